package lease

import (
	"bytes"
	"context"
	"database/sql"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// cutProxy relays TCP between the client and a database on loopback. Once
// armed, it passes on the next client packet that isCommit recognises, lets
// the server act on it, and then cuts the connection before the server's
// answer reaches the client: a COMMIT that commits, unanswered.
type cutProxy struct {
	ln       net.Listener
	target   string
	isCommit func([]byte) bool
	armed    atomic.Bool
	cuts     atomic.Int32
}

func newCutProxy(t *testing.T, target string, isCommit func([]byte) bool) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: target, isCommit: isCommit}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.relay(c)
		}
	}()
	return p
}

func (p *cutProxy) relay(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	var once sync.Once
	closeBoth := func() { once.Do(func() { client.Close(); server.Close() }) }
	defer closeBoth()
	var toClient sync.Mutex // held during a cut, so nothing more reaches the client
	go func() {
		defer closeBoth()
		buf := make([]byte, 64<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				toClient.Lock()
				_, werr := client.Write(buf[:n])
				toClient.Unlock()
				if werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			if p.isCommit(buf[:n]) && p.armed.CompareAndSwap(true, false) {
				toClient.Lock()
				_, _ = server.Write(buf[:n])
				time.Sleep(300 * time.Millisecond) // the server commits; its answer is never relayed
				p.cuts.Add(1)
				client.Close()
				toClient.Unlock()
				return
			}
			if _, err := server.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestCommitAnswerLost: the server commits the take but the connection
// breaks before the client hears so. The lease reads the pool row back and
// keeps the id it committed, instead of failing (and falling back) with a
// worker id used up and unseen.
func TestCommitAnswerLost(t *testing.T) {
	t.Run("mariadb", func(t *testing.T) {
		db := dbtest.MySQL(t)
		take(t, request(db.DB, dialect.MySQL, "svc"))
		cfg, err := mysql.ParseDSN(db.DSN)
		require.NoError(t, err)
		// A COM_QUERY packet (0x03) carrying exactly "COMMIT".
		p := newCutProxy(t, cfg.Addr, func(b []byte) bool {
			return len(b) == 4+1+6 && b[4] == 0x03 && string(b[5:]) == "COMMIT"
		})
		cfg.Addr = p.ln.Addr().String()
		via, err := sql.Open("mysql", cfg.FormatDSN())
		require.NoError(t, err)
		defer via.Close()
		checkRecovered(t, db.DB, via, dialect.MySQL, p)
	})
	t.Run("postgres", func(t *testing.T) {
		db := dbtest.Postgres(t)
		take(t, request(db.DB, dialect.Postgres, "svc"))
		u, err := url.Parse(db.DSN)
		require.NoError(t, err)
		// A simple Query message ('Q') carrying "commit".
		p := newCutProxy(t, u.Host, func(b []byte) bool {
			return len(b) > 5 && b[0] == 'Q' && bytes.EqualFold(b[5:], []byte("commit\x00"))
		})
		u.Host = p.ln.Addr().String()
		via, err := sql.Open("pgx", u.String())
		require.NoError(t, err)
		defer via.Close()
		checkRecovered(t, db.DB, via, dialect.Postgres, p)
	})
}

func checkRecovered(t *testing.T, direct, via *sql.DB, d string, p *cutProxy) {
	t.Helper()
	before := poolValue(t, direct)
	p.armed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := Take(ctx, request(via, d, "svc"))
	require.Equal(t, int32(1), p.cuts.Load(), "the proxy cut one COMMIT")
	require.NoError(t, err)
	assert.True(t, l.CommitRecovered)
	assert.Equal(t, before+1, l.WorkerID)
	assert.Equal(t, before+1, poolValue(t, direct))
	assert.NoError(t, l.AuditErr)
	assert.Equal(t, l.WorkerID, serviceWorker(t, direct, d, "svc"))
}

// TestLeaseConnectionKilled: the server kills the lease's connection (or
// its statement) while the take waits on the pool row's lock. The take
// fails, nothing is committed, and the application's pool keeps working.
func TestLeaseConnectionKilled(t *testing.T) {
	for _, k := range []struct {
		name, stmt string
		backend    dbtest.Backend
	}{
		{"mariadb KILL", "KILL %d", dbtest.Backends[0]},
		{"mariadb KILL QUERY", "KILL QUERY %d", dbtest.Backends[0]},
		{"postgres terminate", "SELECT pg_terminate_backend(%d)", dbtest.Backends[1]},
		{"postgres cancel", "SELECT pg_cancel_backend(%d)", dbtest.Backends[1]},
	} {
		t.Run(k.name, func(t *testing.T) {
			db := k.backend.Fresh(t)
			take(t, request(db.DB, k.backend.Dialect, "svc"))
			before := poolValue(t, db.DB)
			release := db.LockPoolRow(t, k.backend.Dialect)
			done := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
				defer cancel()
				_, err := Take(ctx, request(db.DB, k.backend.Dialect, "svc"))
				done <- err
			}()
			require.True(t, db.KillLease(t, k.stmt))
			assert.Error(t, <-done)
			release()
			time.Sleep(300 * time.Millisecond)
			assert.Equal(t, before, poolValue(t, db.DB), "a failed take commits nothing")
			assert.Equal(t, before+1, take(t, request(db.DB, k.backend.Dialect, "svc")).WorkerID, "the pool still works")
		})
	}
}

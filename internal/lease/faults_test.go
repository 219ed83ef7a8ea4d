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
	"github.com/entflake/entflake/schema"
)

// cutProxy relays TCP between the client and a database on loopback. Once
// armed, it passes on the next client packet that isTarget recognises, lets
// the server act on it, and then cuts the connection before the server's
// answer reaches the client: a write that commits, unanswered. With drop,
// it cuts the connection instead of passing the packet on: a COMMIT that
// never arrives, so the server rolls the transaction back when it sees the
// client gone, and the client has no answer either way.
type cutProxy struct {
	ln       net.Listener
	target   string
	isTarget func([]byte) bool
	drop     bool
	armed    atomic.Bool
	cuts     atomic.Int32
}

func newCutProxy(t *testing.T, target string, drop bool, isTarget func([]byte) bool) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: target, isTarget: isTarget, drop: drop}
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
			if p.isTarget(buf[:n]) && p.armed.CompareAndSwap(true, false) {
				toClient.Lock()
				if !p.drop {
					_, _ = server.Write(buf[:n])
					time.Sleep(300 * time.Millisecond) // the server commits; its answer is never relayed
				}
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

// claimText is how the claim of a slot starts: on a pool that is set up
// (the first take made its rows and wrote its layout), a claim that runs
// alone, as one statement.
const claimText = "UPDATE sys_sequence_slot SET fence"

// TestClaimAnswerLost: the server commits the claim of a slot but the
// connection breaks before the client hears so. The lease reads the slot
// back and keeps it (its instance tag and fence are there), instead of
// failing with a slot taken and unused for a TTL. The DSNs send statements
// as text (interpolateParams, pgx's simple protocol), so that the proxy can
// recognise them. The same holds for the COMMIT of the locked take, which
// makes a fresh pool's rows and claims the first slot in one transaction.
func TestClaimAnswerLost(t *testing.T) {
	for _, c := range []struct {
		name, mysqlText, pgText string
		setUp                   bool // take once before: the claim then runs alone
	}{
		{"claim", claimText, claimText, true},
		{"locked commit", "COMMIT", "commit", false},
	} {
		for _, b := range serverBackends {
			t.Run(b.Name+"/"+c.name, func(t *testing.T) {
				db := b.Fresh(t)
				prepare(t, db.DB, b.Dialect, c.setUp)
				via, p := viaCut(t, db, c.mysqlText, c.pgText, false)
				checkRecovered(t, db.DB, via, b.Dialect, p)
			})
		}
	}
}

// prepare sets a fresh database up for checkRecovered: one take, or only
// the tables (schema.DDL), so that the next take is the pool's first.
func prepare(t *testing.T, db *sql.DB, d string, setUp bool) {
	t.Helper()
	if setUp {
		take(t, request(db, d, "svc"))
		return
	}
	stmts, err := schema.DDL(d)
	require.NoError(t, err)
	for _, s := range stmts {
		_, err := db.Exec(s)
		require.NoError(t, err)
	}
}

func checkRecovered(t *testing.T, direct, via *sql.DB, d string, p *cutProxy) {
	t.Helper()
	before := poolValue(t, direct)
	p.armed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := Take(ctx, request(via, d, "svc"))
	require.Equal(t, int32(1), p.cuts.Load(), "the proxy cut one claim")
	require.NoError(t, err)
	if d == dialect.MySQL && dbtest.TiDB(t) && !l.Recovered {
		// On TiDB every claim runs inside the locked take's transaction
		// (its shared locks do not work): a claim whose answer is lost
		// there was rolled back with the connection, and the take started
		// again on another, at the counter's next value.
		assert.Equal(t, before+2, l.WorkerID)
		assert.Equal(t, int64(0), slotOf(t, direct, before+1).fence, "the claim cut off was not committed")
		return
	}
	assert.True(t, l.Recovered)
	assert.Equal(t, before+1, l.WorkerID)
	var fence int64
	require.NoError(t, direct.QueryRow(dbtest.Rebind(d, "SELECT fence FROM sys_sequence_slot WHERE worker_id = ?"), l.WorkerID).Scan(&fence))
	assert.Equal(t, l.Fence, fence)
	// The slot is really held: renewing it with its fence works.
	assert.NoError(t, Renew(ctx, holding(direct, d, l), 60_000, l.Promise))
}

// TestLeaseConnectionKilled: the server kills the lease's connection (or
// its statement) while the take waits on the counter row's lock. The take
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

// TestRenewAnswerLost: a renewal commits, but the connection breaks before
// the client hears so. The renewal reads the slot back on another
// connection and counts as done, since the slot shows its fence, its tag
// and the promise it asked for: otherwise the holder would stay fenced
// while its slot stays live, blocking the worker id for everyone.
func TestRenewAnswerLost(t *testing.T) {
	for _, b := range serverBackends {
		t.Run(b.Name, func(t *testing.T) {
			db := b.Fresh(t)
			slot := take(t, request(db.DB, b.Dialect, "svc"))
			via, p := viaCut(t, db, "COMMIT", "commit", false)
			checkRenewRecovered(t, db.DB, via, b.Dialect, slot, p)
		})
	}
}

// TestRenewRolledBack: a renewal's COMMIT never reaches the server (the
// connection is cut as it is sent), which rolls the UPDATE back; the
// client has no answer, and the slot still reads back as this holder's and
// live, under the previous renewal's expiry, with the old promise. The
// renewal must fail: counted as done, it would let the holder issue up to
// a promise the database never kept, and the next holder of the worker id
// start below IDs it issued. (The read-back's promise comparison is the
// line this kills; TestRenewAnswerLost's renewals all commit.)
func TestRenewRolledBack(t *testing.T) {
	for _, b := range serverBackends {
		t.Run(b.Name, func(t *testing.T) {
			db := b.Fresh(t)
			slot := take(t, request(db.DB, b.Dialect, "svc"))
			via, p := viaCut(t, db, "COMMIT", "commit", true)
			checkRenewRolledBack(t, db.DB, via, b.Dialect, slot, p)
		})
	}
}

// viaCut opens a pool to db (MariaDB or PostgreSQL) through a cutProxy
// that breaks the connection at the first statement it sees that starts
// with mysqlText (a COM_QUERY packet, 0x03) or pgText (a simple Query
// message, 'Q'): after passing it on to the server (it acts, its answer is
// lost), or, with drop, instead of passing it on (a COMMIT that never
// arrives: the server rolls the transaction back).
func viaCut(t *testing.T, db *dbtest.DB, mysqlText, pgText string, drop bool) (*sql.DB, *cutProxy) {
	t.Helper()
	var (
		p   *cutProxy
		dsn string
	)
	switch db.Driver {
	case "mysql":
		cfg, err := mysql.ParseDSN(db.DSN)
		require.NoError(t, err)
		p = newCutProxy(t, cfg.Addr, drop, func(b []byte) bool {
			return len(b) > 5 && b[4] == 0x03 && bytes.HasPrefix(b[5:], []byte(mysqlText))
		})
		cfg.Addr, cfg.InterpolateParams = p.ln.Addr().String(), true
		dsn = cfg.FormatDSN()
	default:
		u, err := url.Parse(db.DSN)
		require.NoError(t, err)
		p = newCutProxy(t, u.Host, drop, func(b []byte) bool {
			return len(b) > 5 && b[0] == 'Q' && bytes.HasPrefix(b[5:], []byte(pgText))
		})
		u.Host = p.ln.Addr().String()
		q := u.Query()
		q.Set("default_query_exec_mode", "simple_protocol")
		u.RawQuery = q.Encode()
		dsn = u.String()
	}
	via, err := sql.Open(db.Driver, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { via.Close() })
	return via, p
}

// serverBackends are MariaDB and PostgreSQL: the databases a proxy can
// stand in front of.
var serverBackends = dbtest.Backends[:2]

func checkRenewRolledBack(t *testing.T, direct, via *sql.DB, d string, slot Slot, p *cutProxy) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// A renewal that commits first: the slot is live, with a promise the
	// database holds, when the second one's COMMIT is lost.
	first := slot.Promise + 1000
	require.NoError(t, Renew(ctx, holding(via, d, slot), 60_000, first))
	p.armed.Store(true)
	err := Renew(ctx, holding(via, d, slot), 60_000, first+1000)
	require.Equal(t, int32(1), p.cuts.Load(), "the proxy cut one COMMIT")
	require.Error(t, err, "a renewal the server rolled back is no renewal")
	got := slotOf(t, direct, slot.WorkerID)
	assert.Equal(t, first, got.promise, "the database kept the first renewal's promise")
	assert.Equal(t, slot.Fence, got.fence)
}

func checkRenewRecovered(t *testing.T, direct, via *sql.DB, d string, slot Slot, p *cutProxy) {
	t.Helper()
	p.armed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	promise := slot.Promise + 1000
	err := Renew(ctx, holding(via, d, slot), 60_000, promise)
	require.Equal(t, int32(1), p.cuts.Load(), "the proxy cut one COMMIT")
	require.NoError(t, err, "the renewal committed, and the read-back saw it")
	got := slotOf(t, direct, slot.WorkerID)
	assert.Equal(t, promise, got.promise)
	assert.Equal(t, slot.Fence, got.fence)
}

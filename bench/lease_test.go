package bench

import (
	"context"
	"database/sql"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/go-sql-driver/mysql"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/internal/dbtest"
)

// quiet drops the ladder's logs, which the benchmarks do not read.
var quiet = entflake.WithLogger(slog.New(slog.DiscardHandler))

// turnCounter relays TCP to a database and counts round trips: each time
// the client speaks after the server did (or first), a new one begins.
type turnCounter struct {
	ln     net.Listener
	target string
	turns  atomic.Int64
}

func newTurnCounter(tb testing.TB, target string) *turnCounter {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	c := &turnCounter{ln: ln, target: target}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go c.relay(conn)
		}
	}()
	return c
}

func (c *turnCounter) relay(client net.Conn) {
	server, err := net.Dial("tcp", c.target)
	if err != nil {
		client.Close()
		return
	}
	var serverSpoke atomic.Bool
	serverSpoke.Store(true) // the client's first packet starts a round trip
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				serverSpoke.Store(true)
				if _, err := client.Write(buf[:n]); err != nil {
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
			if serverSpoke.Swap(false) {
				c.turns.Add(1)
			}
			if _, err := server.Write(buf[:n]); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	client.Close()
	server.Close()
	<-done
}

// throughCounter returns the DSN of db with its address replaced by a
// counting relay's.
func throughCounter(tb testing.TB, b dbtest.Backend, db *dbtest.DB) (string, *turnCounter) {
	tb.Helper()
	if b.Dialect == dialect.MySQL {
		cfg, err := mysql.ParseDSN(db.DSN)
		if err != nil {
			tb.Fatal(err)
		}
		c := newTurnCounter(tb, cfg.Addr)
		cfg.Addr = c.ln.Addr().String()
		return cfg.FormatDSN(), c
	}
	u, err := url.Parse(db.DSN)
	if err != nil {
		tb.Fatal(err)
	}
	c := newTurnCounter(tb, u.Host)
	u.Host = c.ln.Addr().String()
	return u.String(), c
}

// BenchmarkOpen: a generator's start on loopback, leasing from an existing
// table. cold: a new pool, so the time and the round trips include the
// connection's handshake; warm: a pool with an idle connection.
func BenchmarkOpen(b *testing.B) {
	for _, be := range dbtest.Backends[:2] {
		db := be.Fresh(b)
		if _, err := entflake.OpenDB(context.Background(), db.DB, be.Dialect, entflake.WithService("bench"), quiet); err != nil {
			b.Fatal(err)
		}
		dsn, counter := throughCounter(b, be, db)
		b.Run(be.Name+"/cold", func(b *testing.B) {
			counter.turns.Store(0)
			for b.Loop() {
				pool, err := sql.Open(db.Driver, dsn)
				if err != nil {
					b.Fatal(err)
				}
				g, err := entflake.OpenDB(context.Background(), pool, be.Dialect, entflake.WithService("bench"), quiet)
				if err != nil || g.Source() != entflake.SourceLease {
					b.Fatalf("%v from %v", err, g)
				}
				pool.Close()
			}
			b.ReportMetric(float64(counter.turns.Load())/float64(b.N), "roundtrips/op")
		})
		b.Run(be.Name+"/warm", func(b *testing.B) {
			pool, err := sql.Open(db.Driver, dsn)
			if err != nil {
				b.Fatal(err)
			}
			defer pool.Close()
			pool.SetMaxIdleConns(4)
			if err := pool.Ping(); err != nil {
				b.Fatal(err)
			}
			var turns int64
			for b.Loop() {
				// MySQL's lease discards the connection it used (its session
				// holds the lease's settings): open a new idle one, untimed.
				b.StopTimer()
				if err := pool.Ping(); err != nil {
					b.Fatal(err)
				}
				before := counter.turns.Load()
				b.StartTimer()
				g, err := entflake.OpenDB(context.Background(), pool, be.Dialect, entflake.WithService("bench"), quiet)
				if err != nil || g.Source() != entflake.SourceLease {
					b.Fatalf("%v from %v", err, g)
				}
				turns += counter.turns.Load() - before
			}
			b.ReportMetric(float64(turns)/float64(b.N), "roundtrips/op")
		})
	}
}

// TestOpenStorm: 256 generators open at once on one database, through a
// pool that stays under the server's connection limit (151 on MariaDB, 100
// on PostgreSQL here): every one leases, no worker id twice. It logs the
// wall time and the 99th percentile of one open.
func TestOpenStorm(t *testing.T) {
	t.Setenv(entflake.EnvWorkerID, "")
	limits := map[string]int{dialect.MySQL: 100, dialect.Postgres: 64}
	for _, be := range dbtest.Backends[:2] {
		t.Run(be.Name, func(t *testing.T) {
			db := be.Fresh(t)
			db.SetMaxOpenConns(limits[be.Dialect])
			if _, err := entflake.OpenDB(context.Background(), db.DB, be.Dialect, entflake.WithService("storm"), quiet); err != nil {
				t.Fatal(err)
			}
			const opens = 256
			lat := make([]time.Duration, opens)
			workers := make([]int64, opens)
			errs := make([]error, opens)
			start := time.Now()
			var wg sync.WaitGroup
			for i := range opens {
				wg.Go(func() {
					t0 := time.Now()
					g, err := entflake.OpenDB(context.Background(), db.DB, be.Dialect, entflake.WithService("storm"), quiet,
						entflake.WithLeaseTimeout(30*time.Second))
					lat[i] = time.Since(t0)
					errs[i] = err
					if err != nil {
						return
					}
					if g.Source() != entflake.SourceLease {
						t.Errorf("open %d fell back", i)
					}
					workers[i] = g.WorkerID()
				})
			}
			wg.Wait()
			wall := time.Since(start)
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			slices.Sort(workers)
			if n := len(slices.Compact(workers)); n != opens {
				t.Fatalf("%d distinct worker ids of %d", n, opens)
			}
			slices.Sort(lat)
			t.Logf("%d opens at once, pool of %d: wall %v, p50 %v, p99 %v, max %v", opens, limits[be.Dialect],
				wall.Round(time.Millisecond), lat[opens/2].Round(time.Millisecond),
				lat[opens*99/100].Round(time.Millisecond), lat[opens-1].Round(time.Millisecond))
		})
	}
}

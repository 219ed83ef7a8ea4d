package bench

import (
	"context"
	"database/sql"
	"fmt"
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
	"github.com/entflake/entflake/internal/lease"
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

// idlePool opens a pool on dsn that keeps up to 4 idle connections, so that
// a statement after the first finds one; it is closed with the benchmark.
func idlePool(b *testing.B, driver, dsn string) *sql.DB {
	b.Helper()
	pool, err := sql.Open(driver, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pool.Close() })
	pool.SetMaxIdleConns(4)
	return pool
}

// BenchmarkOpen: a generator's start on loopback, leasing from existing
// tables. cold: a new pool, so the time and the round trips include the
// connection's handshake; warm: a pool with an idle connection, which the
// lease hands back as it found it; warm-interpolate (MySQL): the same with
// interpolateParams=true, where go-sql-driver sends bound statements as
// text, in one round trip instead of two. Each generator is closed, untimed,
// so that its worker id is free for the next.
func BenchmarkOpen(b *testing.B) {
	for _, be := range dbtest.Backends[:2] {
		db := be.Fresh(b)
		g, err := entflake.OpenDB(context.Background(), db.DB, be.Dialect, entflake.WithService("bench"), quiet)
		if err != nil {
			b.Fatal(err)
		}
		if err := g.Close(); err != nil {
			b.Fatal(err)
		}
		dsn, counter := throughCounter(b, be, db)
		// open opens a generator and returns the round trips it took; the
		// service's audit row is written later, with the first renewal.
		open := func(b *testing.B, pool *sql.DB) int64 {
			before := counter.turns.Load()
			g, err := entflake.OpenDB(context.Background(), pool, be.Dialect, entflake.WithService("bench"), quiet)
			turns := counter.turns.Load() - before
			if err != nil || g.Source() != entflake.SourceLease {
				b.Fatalf("%v from %v", err, g)
			}
			b.StopTimer()
			if err := g.Close(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			return turns
		}
		b.Run(be.Name+"/cold", func(b *testing.B) {
			var turns int64
			for b.Loop() {
				pool, err := sql.Open(db.Driver, dsn)
				if err != nil {
					b.Fatal(err)
				}
				turns += open(b, pool)
				pool.Close()
			}
			b.ReportMetric(float64(turns)/float64(b.N), "roundtrips/op")
		})
		warm := func(b *testing.B, dsn string) {
			pool := idlePool(b, db.Driver, dsn)
			if err := pool.Ping(); err != nil {
				b.Fatal(err)
			}
			var turns int64
			for b.Loop() {
				turns += open(b, pool)
			}
			b.ReportMetric(float64(turns)/float64(b.N), "roundtrips/op")
		}
		b.Run(be.Name+"/warm", func(b *testing.B) { warm(b, dsn) })
		if be.Dialect == dialect.MySQL {
			b.Run(be.Name+"/warm-interpolate", func(b *testing.B) { warm(b, dsn+"&interpolateParams=true") })
		}
	}
}

// BenchmarkRenew: one renewal of a held slot, the statement the heartbeat
// sends every Interval (lease.Renew, as the keeper calls it), on a pool with
// an idle connection; interpolate (MySQL): the same with
// interpolateParams=true, where go-sql-driver sends the UPDATE as text
// instead of preparing it, executing it and closing it. On a pool at its
// pace this is the one statement whose cost grows with the instances
// (TestCapacity); run it on TiDB through tidb/run serve.
func BenchmarkRenew(b *testing.B) {
	for _, be := range dbtest.Backends[:2] {
		db := be.Fresh(b)
		dsn, counter := throughCounter(b, be, db)
		renew := func(b *testing.B, dsn string) {
			pool := idlePool(b, db.Driver, dsn)
			req := lease.Request{DB: pool, Dialect: be.Dialect, Service: "bench", Instance: "bench@renew",
				Layout:  fmt.Sprintf("0/10/12 %s", entflake.DefaultEpoch.UTC().Format("2006-01-02T15:04:05.000Z")),
				Workers: 1024, TTL: entflake.DefaultLeaseTTL, Horizon: entflake.DefaultLeaseTTL - entflake.DefaultLeaseMargin}
			ctx := context.Background()
			s, err := lease.Take(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			h := req.Holding(s)
			defer func() {
				if err := lease.Release(ctx, h, time.Now().UnixMilli()); err != nil {
					b.Fatal(err)
				}
			}()
			before := counter.turns.Load()
			for b.Loop() {
				if err := lease.Renew(ctx, h, req.TTL.Milliseconds(), time.Now().Add(req.Horizon).UnixMilli()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(counter.turns.Load()-before)/float64(b.N), "roundtrips/op")
		}
		b.Run(be.Name+"/default", func(b *testing.B) { renew(b, dsn) })
		if be.Dialect == dialect.MySQL {
			b.Run(be.Name+"/interpolate", func(b *testing.B) { renew(b, dsn+"&interpolateParams=true") })
		}
	}
}

// TestOpenStorm: 256 generators open at once on one database, through a
// pool that stays under the server's connection limit (151 on MariaDB, 100
// on PostgreSQL here) and is connected beforehand. Then they close, and 256
// open at once again: on connections whose server sessions have run the
// lease's statements before (PostgreSQL's backends cache the tables'
// catalog entries and pgx its prepared statements per connection, so the
// first storm on fresh connections is slower). Each storm runs twice, on a
// fresh database each time: with the default lease timeout (3 s), which is
// what an application gets, and with a 30 s one, long enough that no open
// falls back on this machine.
//
// It asserts what the lease promises under a storm, not its speed: every
// open returns without error within its lease timeout (plus slack for a
// loaded machine), and then either holds a lease or has fallen back with
// the lease's error recorded; no worker id is leased twice; with the 30 s
// timeout every open leased. It logs the wall time, the percentiles of one
// open and how many fell back (bench/README.md has the figures).
func TestOpenStorm(t *testing.T) {
	t.Setenv(entflake.EnvWorkerID, "")
	limits := map[string]int{dialect.MySQL: 100, dialect.Postgres: 64}
	for _, be := range dbtest.Backends[:2] {
		for _, timeout := range []time.Duration{entflake.DefaultLeaseTimeout, 30 * time.Second} {
			t.Run(fmt.Sprintf("%s/timeout=%v", be.Name, timeout), func(t *testing.T) {
				stormOpens(t, be, limits[be.Dialect], timeout)
			})
		}
	}
}

// stormOpens runs TestOpenStorm's two storms on a fresh database of be,
// through a pool of n connections, each open with the lease timeout given.
func stormOpens(t *testing.T, be dbtest.Backend, n int, timeout time.Duration) {
	db := be.Fresh(t)
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	open := func() (*entflake.Generator, error) {
		return entflake.OpenDB(context.Background(), db.DB, be.Dialect,
			entflake.WithService("storm"), entflake.WithLeaseTimeout(timeout), quiet)
	}
	g, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	warmUp(t, db.DB, n)
	// An open past its timeout is a hang, however loaded the machine: the
	// slack covers scheduling, not the lease.
	limit := timeout + 10*time.Second
	for _, storm := range []string{"first", "second"} {
		const opens = 256
		lat := make([]time.Duration, opens)
		gens := make([]*entflake.Generator, opens)
		errs := make([]error, opens)
		start := time.Now()
		var wg sync.WaitGroup
		for i := range opens {
			wg.Go(func() {
				t0 := time.Now()
				gens[i], errs[i] = open()
				lat[i] = time.Since(t0)
			})
		}
		wg.Wait()
		wall := time.Since(start)
		workers := make([]int64, 0, opens)
		fellBack := 0
		for i, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
			if lat[i] > limit {
				t.Errorf("open %d took %v, past its lease timeout %v", i, lat[i], timeout)
			}
			switch src := gens[i].Source(); src {
			case entflake.SourceLease:
				workers = append(workers, gens[i].WorkerID())
			case entflake.SourceFallback:
				fellBack++
				if gens[i].Lease().Err == nil {
					t.Errorf("open %d fell back without the lease's error", i)
				}
			default:
				t.Errorf("open %d: worker id from %v", i, src)
			}
		}
		if fellBack > 0 && timeout >= 30*time.Second {
			t.Errorf("%d of %d opens fell back with a %v lease timeout", fellBack, opens, timeout)
		}
		leased := len(workers)
		slices.Sort(workers)
		if d := len(slices.Compact(workers)); d != leased {
			t.Fatalf("%d distinct worker ids among %d leases", d, leased)
		}
		slices.Sort(lat)
		t.Logf("%s storm: %d opens at once, pool of %d connected, lease timeout %v: wall %v, p50 %v, p99 %v, max %v, %d fell back",
			storm, opens, n, timeout, wall.Round(time.Millisecond), lat[opens/2].Round(time.Millisecond),
			lat[opens*99/100].Round(time.Millisecond), lat[opens-1].Round(time.Millisecond), fellBack)
		for _, g := range gens {
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// warmUp opens n connections in db's pool and leaves them idle.
func warmUp(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	conns := make([]*sql.Conn, n)
	for i := range conns {
		c, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	for _, c := range conns {
		if err := c.PingContext(context.Background()); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
}

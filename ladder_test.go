package entflake

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// record is one captured log record.
type record struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// logSink is a slog.Handler that keeps what it is given.
type logSink struct {
	mu      sync.Mutex
	records []record
}

func (s *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (s *logSink) WithAttrs([]slog.Attr) slog.Handler       { return s }
func (s *logSink) WithGroup(string) slog.Handler            { return s }
func (s *logSink) Handle(_ context.Context, r slog.Record) error {
	rec := record{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	watchSecret(rec)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = append(s.records, rec)
	return nil
}

// leaks are the records, of any test of the package, that showed
// dbtest.Secret: every logger the package's tests give the library is a
// logSink (quiet, newSink), so every line the library logs in them is
// looked at, and TestMain fails the run if one showed it.
var leaks struct {
	sync.Mutex
	records []string
}

// watchSecret records rec in leaks if it shows dbtest.Secret.
func watchSecret(rec record) {
	text := rec.msg
	for k, v := range rec.attrs {
		text += " " + k + "=" + v
	}
	if strings.Contains(text, dbtest.Secret) {
		leaks.Lock()
		defer leaks.Unlock()
		leaks.records = append(leaks.records, text)
	}
}

// leaked reports, after the tests, every log line that showed the tests'
// password; TestMain then fails the run.
func leaked() bool {
	leaks.Lock()
	defer leaks.Unlock()
	for _, l := range leaks.records {
		fmt.Fprintf(os.Stderr, "FAIL: a log line shows the tests' password: %s\n", l)
	}
	return len(leaks.records) > 0
}

func (s *logSink) all() []record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]record(nil), s.records...)
}

// find returns the records at level whose message contains substr.
func (s *logSink) find(level slog.Level, substr string) []record {
	var out []record
	for _, r := range s.all() {
		if r.level == level && strings.Contains(r.msg, substr) {
			out = append(out, r)
		}
	}
	return out
}

func newSink() (*logSink, Option) {
	s := &logSink{}
	return s, WithLogger(slog.New(s))
}

// quiet returns a logger option whose records no one reads, on a fresh sink
// each time, so that no two tests share one.
func quiet() Option {
	_, opt := newSink()
	return opt
}

// sqliteTables counts the tables named name in a SQLite database.
func sqliteTables(t *testing.T, db *sql.DB, name string) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM sqlite_master WHERE name = ?", name).Scan(&n))
	return n
}

// closeAtEnd closes g when the test ends, so that its heartbeat stops.
func closeAtEnd(t testing.TB, g *Generator) *Generator {
	t.Helper()
	if g != nil {
		t.Cleanup(func() { _ = g.Close() })
	}
	return g
}

// open opens a generator on db that is closed when the test ends.
func open(t testing.TB, db *sql.DB, dialectName string, opts ...Option) *Generator {
	t.Helper()
	g, err := OpenDB(context.Background(), db, dialectName, opts...)
	require.NoError(t, err)
	return closeAtEnd(t, g)
}

// checkIDs issues a few IDs and checks that they decode to the generator's
// worker id.
func checkIDs(t *testing.T, g *Generator) {
	t.Helper()
	prev := int64(0)
	for range 100 {
		id, err := g.NextID()
		require.NoError(t, err)
		require.Greater(t, id, prev)
		p, err := g.Decode(id)
		require.NoError(t, err)
		require.Equal(t, g.WorkerID(), p.WorkerID)
		prev = id
	}
}

func TestLadderLease(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		t.Setenv(EnvWorkerID, "")
		db := b.Fresh(t)
		sink, logOpt := newSink()
		g := open(t, db.DB, b.Dialect, WithService("payments"), logOpt)
		assert.Equal(t, SourceLease, g.Source())
		assert.Equal(t, int64(1), g.WorkerID())
		assert.Equal(t, "payments", g.Service())
		parts := strings.Split(g.Instance(), "@")
		require.Len(t, parts, 5, g.Instance())
		assert.Equal(t, "payments", parts[0])
		assert.Equal(t, hostIdentity(), parts[1])
		assert.Equal(t, strconv.Itoa(os.Getpid()), parts[2])
		assert.Len(t, parts[4], 16, "64 random bits")
		checkIDs(t, g)
		st := g.Lease()
		assert.Equal(t, LeaseHeld, st.State)
		assert.Equal(t, int64(1), st.Fence)
		assert.WithinDuration(t, time.Now().Add(DefaultLeaseTTL-DefaultLeaseMargin), st.Promise, 5*time.Second)

		infos := sink.find(slog.LevelInfo, "worker id leased")
		require.Len(t, infos, 1)
		assert.Equal(t, map[string]string{"service": "payments", "worker_id": "1", "source": "lease", "fence": "1"},
			pick(infos[0].attrs, "service", "worker_id", "source", "fence"))
		// The first lease on a fresh database created the tables, and says
		// so, without a warning: a fresh database is no alarm.
		assert.Len(t, sink.find(slog.LevelInfo, "created lease tables"), 1)
		assert.Empty(t, sink.find(slog.LevelWarn, ""))

		g2 := open(t, db.DB, b.Dialect, WithService("payments"), logOpt)
		assert.Equal(t, int64(2), g2.WorkerID())
		assert.Empty(t, sink.find(slog.LevelWarn, ""))
		// A release with nothing issued says so, not the epoch.
		require.NoError(t, g2.Close())
		released := sink.find(slog.LevelInfo, "worker id released")
		require.Len(t, released, 1)
		assert.Equal(t, "none issued", released[0].attrs["last"])

		// A fixed worker id is registered, not leased.
		g3 := open(t, db.DB, b.Dialect, WithService("payments"), WithWorkerID(7), logOpt)
		assert.Equal(t, SourceExplicit, g3.Source())
		assert.Len(t, sink.find(slog.LevelInfo, "fixed worker id registered"), 1)
		assert.Len(t, sink.find(slog.LevelInfo, "worker id leased"), 2, "the two leases' only")
		checkIDs(t, g3)
		require.NoError(t, g3.Close())
		released = sink.find(slog.LevelInfo, "worker id released")
		require.Len(t, released, 2)
		assert.NotEqual(t, "none issued", released[1].attrs["last"])
	})
}

func pick(m map[string]string, keys ...string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}

func TestLadderExplicit(t *testing.T) {
	mariadb := dbtest.Backends[0]
	down, err := sql.Open(mariadb.Driver, mariadb.ClosedDSN(t))
	require.NoError(t, err)
	defer down.Close()

	t.Run("option, no database", func(t *testing.T) {
		t.Setenv(EnvWorkerID, "5")
		sink, logOpt := newSink()
		g := open(t, nil, "", WithWorkerID(9), logOpt)
		assert.Equal(t, int64(9), g.WorkerID(), "the option wins over the environment")
		assert.Equal(t, SourceExplicit, g.Source())
		assert.Equal(t, LeaseNone, g.Lease().State)
		infos := sink.find(slog.LevelInfo, "fixed worker id without database")
		require.Len(t, infos, 1)
		assert.Equal(t, "explicit", infos[0].attrs["source"])
		assert.Equal(t, "9", infos[0].attrs["worker_id"])
		checkIDs(t, g)
	})
	t.Run("environment, no database", func(t *testing.T) {
		t.Setenv(EnvWorkerID, "1023")
		g := open(t, nil, "", quiet())
		assert.Equal(t, int64(1023), g.WorkerID())
		assert.Equal(t, SourceExplicit, g.Source())
	})
	t.Run("database down", func(t *testing.T) {
		// Registration fails: the id is used, unregistered, with a warning,
		// and registration goes on in the background.
		t.Setenv(EnvWorkerID, "")
		sink, logOpt := newSink()
		g := open(t, down, dialect.MySQL, WithWorkerID(9), WithService("svc"), WithLeaseTimeout(time.Second), logOpt)
		assert.Equal(t, int64(9), g.WorkerID())
		assert.Equal(t, SourceExplicit, g.Source())
		assert.Equal(t, LeaseUnregistered, g.Lease().State)
		assert.Len(t, sink.find(slog.LevelWarn, "fixed worker id unregistered"), 1)
		checkIDs(t, g)
		// With WithRequireLease it is an error instead.
		_, err := OpenDB(context.Background(), down, dialect.MySQL, WithWorkerID(9), WithService("svc"),
			WithLeaseTimeout(time.Second), WithRequireLease(), quiet())
		assert.ErrorIs(t, err, ErrNoLease)
		assert.ErrorContains(t, err, "register worker id 9")
	})
	t.Run("no service to register under", func(t *testing.T) {
		t.Setenv(EnvWorkerID, "")
		_, err := OpenDB(context.Background(), down, dialect.MySQL, WithWorkerID(9))
		assert.ErrorIs(t, err, ErrInvalidService)
		assert.ErrorContains(t, err, "required to register a fixed worker id")
	})
	for value, want := range map[string]string{
		"abc":  `ENTFLAKE_WORKER_ID="abc" is not a decimal integer`,
		" 7":   `ENTFLAKE_WORKER_ID=" 7" is not a decimal integer`,
		"1024": "ENTFLAKE_WORKER_ID=1024 is outside 0..1023",
		"-1":   "ENTFLAKE_WORKER_ID=-1 is outside 0..1023",
	} {
		t.Run("malformed "+value, func(t *testing.T) {
			t.Setenv(EnvWorkerID, value)
			_, err := OpenDB(context.Background(), down, dialect.MySQL, WithService("svc"))
			assert.ErrorIs(t, err, ErrInvalidWorkerID)
			assert.ErrorContains(t, err, want)
		})
	}
	t.Run("layout bounds the variable", func(t *testing.T) {
		t.Setenv(EnvWorkerID, "32")
		_, err := OpenDB(context.Background(), nil, "", WithLayout(ClockSequenceLayout), WithRollbackPolicy(BumpClockSequence()))
		assert.ErrorContains(t, err, "ENTFLAKE_WORKER_ID=32 is outside 0..31")
	})
}

func TestLadderFallbackNoDatabase(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	sink, logOpt := newSink()
	g := open(t, nil, "", WithService("reports"), logOpt)
	assert.Equal(t, SourceFallback, g.Source())
	assert.Equal(t, LeaseNone, g.Lease().State, "no database: no lease sought")
	assert.Equal(t, fallbackWorkerID("reports", hostIdentity(), os.Getpid(), 1024), g.WorkerID())
	warns := sink.find(slog.LevelWarn, "fallback hash")
	require.Len(t, warns, 1)
	w := warns[0]
	assert.Equal(t, "fallback", w.attrs["source"])
	assert.Equal(t, "reports", w.attrs["service"])
	assert.Equal(t, strconv.FormatInt(g.WorkerID(), 10), w.attrs["worker_id"])
	assert.Contains(t, w.attrs["reason"], "no database")
	assert.Contains(t, w.attrs["risk"], "1/1024")
	assert.Contains(t, w.attrs["risk"], "about 38 give even odds")
	assert.Contains(t, w.attrs["risk"], "N live leased instances with probability about N/1024")
	assert.Equal(t, "false", w.attrs["retrying_lease"])
	checkIDs(t, g)

	// Open with a nil ent driver is the same rung.
	g, err := Open(context.Background(), nil, WithService("reports"), logOpt)
	require.NoError(t, err)
	assert.Equal(t, SourceFallback, g.Source())

	// A nil *entsql.Driver (entsql.Open's error ignored) is a mistake, not
	// "no database": an error, neither a panic nor the fallback.
	var typed *entsql.Driver
	g, err = Open(context.Background(), typed, WithService("reports"), logOpt)
	require.ErrorIs(t, err, ErrInvalidOption)
	assert.ErrorContains(t, err, "nil *entsql.Driver")
	assert.Nil(t, g)
	g, err = Open(context.Background(), dialect.Debug(typed), WithService("reports"), logOpt)
	require.ErrorIs(t, err, ErrInvalidOption)
	assert.Nil(t, g)
}

// TestLadderFallbackServerDown: a database that does not answer (a closed
// port) falls back, well within the lease timeout.
func TestLadderFallbackServerDown(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	for _, b := range dbtest.Backends[:2] {
		t.Run(b.Dialect, func(t *testing.T) {
			db, err := sql.Open(b.Driver, b.ClosedDSN(t))
			require.NoError(t, err)
			defer db.Close()
			sink, logOpt := newSink()
			start := time.Now()
			g := open(t, db, b.Dialect, WithService("svc"), WithLeaseTimeout(time.Second), logOpt)
			assert.Less(t, time.Since(start), 3*time.Second)
			assert.Equal(t, SourceFallback, g.Source())
			assert.Equal(t, LeaseFallback, g.Lease().State)
			warns := sink.find(slog.LevelWarn, "fallback hash")
			require.Len(t, warns, 1)
			assert.Contains(t, warns[0].attrs["reason"], "refused")
		})
	}
}

// TestLadderFallbackRowLocked: while another transaction holds the pool
// row, Open falls back when its lease timeout runs out, not later.
func TestLadderFallbackRowLocked(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		open(t, db.DB, b.Dialect, WithService("svc"), quiet())
		release := db.LockPoolRow(t, b.Dialect)
		defer release()

		sink, logOpt := newSink()
		start := time.Now()
		g := open(t, db.DB, b.Dialect, WithService("svc"), WithLeaseTimeout(time.Second), logOpt)
		elapsed := time.Since(start)
		assert.Equal(t, SourceFallback, g.Source())
		assert.GreaterOrEqual(t, elapsed, 900*time.Millisecond, "it did wait for the lock")
		assert.Less(t, elapsed, 3*time.Second, "within the lease timeout plus 2 s")
		assert.Len(t, sink.find(slog.LevelWarn, "fallback hash"), 1)
	})
}

// TestLadderFallbackPoolExhausted: an application pool with no free
// connection makes the lease fall back at its timeout.
func TestLadderFallbackPoolExhausted(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	db := dbtest.MySQL(t)
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(context.Background())
	require.NoError(t, err)
	defer conn.Close()
	start := time.Now()
	g := open(t, db.DB, dialect.MySQL, WithService("svc"), WithLeaseTimeout(500*time.Millisecond), quiet())
	assert.Equal(t, SourceFallback, g.Source())
	assert.Less(t, time.Since(start), 2500*time.Millisecond)
}

// TestLadderCallerContextEnded: when the caller's own context ends, Open
// returns its error instead of starting on a fallback id.
func TestLadderCallerContextEnded(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	db := dbtest.SQLite(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := OpenDB(ctx, db.DB, dialect.SQLite, WithService("svc"))
	assert.ErrorIs(t, err, context.Canceled)
}

// TestLadderLeaseDB: the pool can live in another database than the
// entities: the tables appear there, not in the entities' database.
func TestLadderLeaseDB(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	entities := dbtest.SQLite(t)
	pool := dbtest.MySQL(t)
	g := open(t, entities.DB, dialect.SQLite, WithService("svc"), WithLeaseDB(pool.DB, dialect.MySQL), quiet())
	assert.Equal(t, SourceLease, g.Source())
	var n int
	require.NoError(t, pool.QueryRow("SELECT COUNT(*) FROM sys_sequence_slot WHERE service_name = 'svc'").Scan(&n))
	assert.Equal(t, 1, n)
	assert.Zero(t, sqliteTables(t, entities.DB, "sys_sequence"))
	assert.Zero(t, sqliteTables(t, entities.DB, "sys_sequence_slot"))
}

// TestLadderLifetimeWrapWarns: with WithLifetimeLease, the start that wraps
// the counter to 0 logs a warning; live leases do not care about the wrap.
func TestLadderLifetimeWrapWarns(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		g := open(t, db.DB, b.Dialect, WithService("svc"), WithLifetimeLease(), quiet())
		assert.Equal(t, LeaseLifetime, g.Lease().State)
		_, err := db.Exec("UPDATE sys_sequence SET worker_id = 1023 WHERE service_name = '__global__'")
		require.NoError(t, err)
		sink, logOpt := newSink()
		g = open(t, db.DB, b.Dialect, WithService("svc"), WithLifetimeLease(), logOpt)
		assert.Equal(t, int64(0), g.WorkerID())
		assert.Equal(t, SourceLease, g.Source())
		assert.Len(t, sink.find(slog.LevelWarn, "lifetime counter wrapped"), 1)

		_, err = db.Exec("UPDATE sys_sequence SET worker_id = 1023 WHERE service_name = '__global__'")
		require.NoError(t, err)
		sink, logOpt = newSink()
		g = open(t, db.DB, b.Dialect, WithService("svc"), logOpt)
		assert.Equal(t, int64(0), g.WorkerID(), "slot 0 is free: the lifetime leases took no slot")
		assert.Empty(t, sink.find(slog.LevelWarn, ""))
	})
}

// skewedClock is the real clock an hour ahead.
type skewedClock struct{ off time.Duration }

func (c skewedClock) Now() time.Time        { return time.Now().Add(c.off) }
func (c skewedClock) Sleep(d time.Duration) { time.Sleep(d) }

func TestLadderClockSkew(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		sink, logOpt := newSink()
		g := open(t, db.DB, b.Dialect, WithService("svc"), logOpt, WithClock(skewedClock{time.Hour}))
		assert.Equal(t, SourceLease, g.Source())
		warns := sink.find(slog.LevelWarn, "clock skew")
		require.Len(t, warns, 1)
		// The skew is measured across a round trip and rounded to the
		// millisecond, so it is an hour give or take a little, either side.
		skew, err := time.ParseDuration(warns[0].attrs["skew"])
		require.NoError(t, err)
		assert.InDelta(t, time.Hour, skew, float64(5*time.Second), "skew %v", skew)

		_, err = OpenDB(context.Background(), db.DB, b.Dialect, WithService("svc"), logOpt,
			WithClock(skewedClock{-time.Hour}), WithClockSkewCheck(time.Minute, true))
		assert.ErrorIs(t, err, ErrClockSkew)
		assert.ErrorContains(t, err, "leaving worker id 2 unused")
		errs := sink.find(slog.LevelError, "refusing to start")
		require.Len(t, errs, 1)
		assert.Equal(t, "2", errs[0].attrs["worker_id"])

		// A true clock passes a strict check.
		g = open(t, db.DB, b.Dialect, WithService("svc"), logOpt, WithClockSkewCheck(time.Second, true))
		assert.Equal(t, SourceLease, g.Source())
		var expires int64
		require.NoError(t, db.QueryRow("SELECT expires_ms FROM sys_sequence_slot WHERE worker_id = 2").Scan(&expires))
		assert.Zero(t, expires, "the refused start released its slot")
	})
}

// TestOpenEntDriver: Open takes what ent users hold, an ent SQL driver,
// also when wrapped by dialect.Debug.
func TestOpenEntDriver(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	db := dbtest.SQLite(t)
	drv := entsql.OpenDB(dialect.SQLite, db.DB)
	g, err := Open(context.Background(), drv, WithService("svc"), quiet())
	require.NoError(t, err)
	closeAtEnd(t, g)
	assert.Equal(t, SourceLease, g.Source())
	assert.Equal(t, int64(1), g.WorkerID())
	g, err = Open(context.Background(), dialect.Debug(drv), WithService("svc"), quiet())
	require.NoError(t, err)
	closeAtEnd(t, g)
	assert.Equal(t, int64(2), g.WorkerID())
}

// TestConcurrentOpens: many generators opened at once on one database get
// distinct worker ids, and their IDs never collide.
func TestConcurrentOpens(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		db.SetMaxOpenConns(8)
		const n = 32
		gens := make([]*Generator, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				g, err := OpenDB(context.Background(), db.DB, b.Dialect, WithService(fmt.Sprintf("svc-%d", i%4)),
					quiet(), WithLeaseTimeout(20*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				gens[i] = closeAtEnd(t, g)
			})
		}
		wg.Wait()
		seen := map[int64]bool{}
		ids := map[int64]bool{}
		for _, g := range gens {
			require.NotNil(t, g)
			require.Equal(t, SourceLease, g.Source(), "fell back: %v", g.Lease().Err)
			require.False(t, seen[g.WorkerID()], "worker id %d twice", g.WorkerID())
			seen[g.WorkerID()] = true
			for range 1000 {
				id, err := g.NextID()
				require.NoError(t, err)
				require.False(t, ids[id])
				ids[id] = true
			}
		}
	})
}

func TestOpenRejectsBadInput(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	db := dbtest.SQLite(t)
	for name, c := range map[string]struct {
		dialect string
		opts    []Option
		is      error
		msg     string
	}{
		"unknown dialect":    {"oracle", []Option{WithService("svc")}, ErrUnknownDialect, `"oracle"`},
		"no service":         {dialect.SQLite, nil, ErrInvalidService, "WithService is required"},
		"pool name":          {dialect.SQLite, []Option{WithService("__global__")}, ErrInvalidService, "reserved for a row of the lease's own"},
		"long service":       {dialect.SQLite, []Option{WithService(strings.Repeat("x", 65))}, ErrInvalidService, "65 characters"},
		"worker too big":     {dialect.SQLite, []Option{WithWorkerID(1024)}, ErrInvalidWorkerID, "WithWorkerID(1024) is outside 0..1023"},
		"bad layout":         {dialect.SQLite, []Option{WithService("svc"), WithLayout(Layout{WorkerBits: 10, SequenceBits: 11})}, ErrInvalidLayout, "= 21, want 22"},
		"zero layout":        {dialect.SQLite, []Option{WithService("svc"), WithLayout(Layout{})}, ErrInvalidLayout, "worker field"},
		"epoch future":       {dialect.SQLite, []Option{WithService("svc"), WithEpoch(time.Now().Add(time.Hour))}, ErrInvalidEpoch, "in the future"},
		"epoch before 1970":  {dialect.SQLite, []Option{WithService("svc"), WithEpoch(time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC))}, ErrInvalidEpoch, "before 1970"},
		"clamp zero fuse":    {dialect.SQLite, []Option{WithService("svc"), WithRollbackPolicy(ClampRollback(0))}, ErrInvalidPolicy, "at least 1ms"},
		"bump no bits":       {dialect.SQLite, []Option{WithService("svc"), WithRollbackPolicy(BumpClockSequence())}, ErrInvalidPolicy, "clock-sequence bits"},
		"lease timeout":      {dialect.SQLite, []Option{WithService("svc"), WithLeaseTimeout(0)}, ErrInvalidOption, "lease timeout 0s"},
		"lease timeout long": {dialect.SQLite, []Option{WithService("svc"), WithLeaseTimeout(25 * 24 * time.Hour)}, ErrInvalidOption, "lease timeout 600h0m0s is not in (0, 1h0m0s]"},
		"skew limit":         {dialect.SQLite, []Option{WithService("svc"), WithClockSkewCheck(-time.Second, false)}, ErrInvalidOption, "clock skew limit"},
		"nil logger":         {dialect.SQLite, []Option{WithService("svc"), WithLogger(nil)}, ErrInvalidOption, "WithLogger(nil)"},
		"nil clock":          {dialect.SQLite, []Option{WithService("svc"), WithClock(nil)}, ErrInvalidOption, "WithClock(nil)"},
		"nil lease db":       {dialect.SQLite, []Option{WithService("svc"), WithLeaseDB(nil, dialect.MySQL)}, ErrInvalidOption, "WithLeaseDB(nil"},
		"lease db dialect":   {dialect.SQLite, []Option{WithService("svc"), WithLeaseDB(db.DB, "sqlite")}, ErrUnknownDialect, `"sqlite"`},
		"clock before epoch": {dialect.SQLite, []Option{WithService("svc"), WithClock(skewedClock{-24 * 365 * 5 * time.Hour})}, ErrClockBeforeEpoch, "before the epoch"},
		"heartbeat rule":     {dialect.SQLite, []Option{WithService("svc"), WithHeartbeat(Heartbeat{TTL: 20 * time.Second})}, ErrInvalidOption, "TTL 20s is shorter than Interval 10s + Timeout 5s + Retry 2s + Margin 10s"},
		"heartbeat retry":    {dialect.SQLite, []Option{WithService("svc"), WithHeartbeat(Heartbeat{Interval: time.Second, Retry: 2 * time.Second})}, ErrInvalidOption, "Retry 2s is longer than Interval 1s"},
		"heartbeat negative": {dialect.SQLite, []Option{WithService("svc"), WithHeartbeat(Heartbeat{Margin: -time.Second})}, ErrInvalidOption, "Heartbeat.Margin -1s is below 1ms"},
		"heartbeat long TTL": {dialect.SQLite, []Option{WithService("svc"), WithHeartbeat(Heartbeat{TTL: 48 * time.Hour})}, ErrInvalidOption, "use WithLifetimeLease"},
	} {
		t.Run(name, func(t *testing.T) {
			g, err := OpenDB(context.Background(), db.DB, c.dialect, c.opts...)
			assert.Nil(t, g)
			assert.ErrorIs(t, err, c.is)
			assert.ErrorContains(t, err, c.msg)
		})
	}
	// Nothing was leased by all that bad input: the tables were never made.
	assert.Zero(t, sqliteTables(t, db.DB, "sys_sequence"))
	assert.Zero(t, sqliteTables(t, db.DB, "sys_sequence_slot"))
}

func TestFallbackWorkerID(t *testing.T) {
	// Deterministic, in range, and spread over the range by host.
	assert.Equal(t, fallbackWorkerID("svc", "host-a", 1, 1024), fallbackWorkerID("svc", "host-a", 1, 1024))
	seen := map[int64]bool{}
	for i := range 1000 {
		id := fallbackWorkerID("svc", fmt.Sprintf("pod-%d", i), 1, 1024)
		require.GreaterOrEqual(t, id, int64(0))
		require.Less(t, id, int64(1024))
		seen[id] = true
	}
	// 1000 draws from 1024 values leave about 1024*(1-e^-0.98) = 640 distinct.
	assert.Greater(t, len(seen), 580)
	assert.NotEqual(t, fallbackWorkerID("a", "h", 1, 1024), fallbackWorkerID("b", "h", 1, 1024))
	assert.Less(t, fallbackWorkerID("svc", "h", 1, 32), int64(32))
	assert.Equal(t, 38, evenOdds(1024))
	assert.Equal(t, 7, evenOdds(32))
}

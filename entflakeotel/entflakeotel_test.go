package entflakeotel_test

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	_ "modernc.org/sqlite"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/entflakeotel"
)

// points is one collection: instrument name -> encoded attribute set ->
// value. Integer values are converted to float64 (exact for the counts here).
type points map[string]map[string]float64

var enc = attribute.DefaultEncoder()

// key encodes an attribute set the way points does.
func key(kvs ...attribute.KeyValue) string {
	s := attribute.NewSet(kvs...)
	return s.Encoded(enc)
}

// meter returns a Meter of a real SDK whose data the returned reader
// collects on demand.
func meter(t *testing.T) (metric.Meter, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	return provider.Meter(entflakeotel.ScopeName), reader
}

// collect runs one collection and returns its data points, and the metrics
// by name for their metadata. It fails the test on an aggregation Register
// must not produce (histograms and the like).
func collect(t *testing.T, r *sdkmetric.ManualReader) (points, map[string]metricdata.Metrics) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	pts, byName := points{}, map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			byName[m.Name] = m
			vals := map[string]float64{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					vals[p.Attributes.Encoded(enc)] = float64(p.Value)
				}
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					vals[p.Attributes.Encoded(enc)] = p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					vals[p.Attributes.Encoded(enc)] = float64(p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					vals[p.Attributes.Encoded(enc)] = p.Value
				}
			default:
				t.Fatalf("%s: unexpected aggregation %T", m.Name, m.Data)
			}
			if len(vals) > 0 {
				pts[m.Name] = vals
			}
		}
	}
	return pts, byName
}

// leaseStates walks the LeaseState values up to the first that has no name:
// every state the library names, whether or not the adapter knows it.
func leaseStates() []entflake.LeaseState {
	var states []entflake.LeaseState
	for s := entflake.LeaseState(0); !strings.HasPrefix(s.String(), "LeaseState("); s++ {
		states = append(states, s)
	}
	return states
}

// expect is what Register must report for s, written out independently of
// the adapter's code: every instrument, every series.
func expect(s entflake.Stats, attrs ...attribute.KeyValue) points {
	with := func(extra ...attribute.KeyValue) string {
		return key(append(append([]attribute.KeyValue(nil), attrs...), extra...)...)
	}
	base := with()
	one := func(v float64) map[string]float64 { return map[string]float64{base: v} }
	status := map[string]float64{}
	for _, st := range leaseStates() {
		v := 0.0
		if st == s.LeaseState {
			v = 1
		}
		status[with(attribute.String("entflake.lease.state", st.String()))] = v
	}
	errType := func(typ string) string { return with(attribute.String("error.type", typ)) }
	return points{
		"entflake.id.waits":               one(float64(s.Waits)),
		"entflake.id.wait.time":           one(s.WaitDuration.Seconds()),
		"entflake.id.borrowed.time":       one(float64(s.Borrowed) / 1000),
		"entflake.clock.rollbacks":        one(float64(s.Rollbacks)),
		"entflake.clock.rollback.largest": one(s.LargestRollback.Seconds()),
		"entflake.lease.renewals":         one(float64(s.Renewals)),
		"entflake.lease.renewal.failures": one(float64(s.RenewalFailures)),
		"entflake.lease.fencings":         one(float64(s.Fencings)),
		"entflake.worker.switches":        one(float64(s.Switches)),
		"entflake.id.errors": {
			errType("fenced"):             float64(s.Errors.Fenced),
			errType("clock_backwards"):    float64(s.Errors.ClockBackwards),
			errType("sequence_exhausted"): float64(s.Errors.SequenceExhausted),
			errType("closed"):             float64(s.Errors.Closed),
			errType("_OTHER"):             float64(s.Errors.Other),
		},
		"entflake.worker.id": {
			with(attribute.String("entflake.worker.source", s.Source.String())): float64(s.WorkerID),
		},
		"entflake.lease.status": status,
	}
}

// testClock is a clock that moves only when told to, or when the generator
// sleeps on it.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock {
	return &testClock{now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Sleep(d time.Duration) { c.Add(d) }

// Add moves the clock by d, backward for a negative d.
func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// take issues n IDs and returns how many failed, with the last error.
func take(g *entflake.Generator, n int) (failed int, last error) {
	for range n {
		if _, err := g.NextID(); err != nil {
			failed, last = failed+1, err
		}
	}
	return failed, last
}

// register registers g on a fresh SDK meter and unregisters at the end.
func register(t *testing.T, g *entflake.Generator, opts ...entflakeotel.Option) *sdkmetric.ManualReader {
	t.Helper()
	m, reader := meter(t)
	reg, err := entflakeotel.Register(m, g, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Unregister() })
	return reader
}

// The kind, unit and temporality of every instrument: counters are
// monotonic cumulative sums, the status a non-monotonic sum, the worker id
// and largest rollback gauges.
func TestInstruments(t *testing.T) {
	g, err := entflake.New(3)
	require.NoError(t, err)
	_, byName := collect(t, register(t, g))

	type shape struct {
		kind, unit string
	}
	want := map[string]shape{
		"entflake.id.waits":               {"counter int64", "{wait}"},
		"entflake.id.wait.time":           {"counter float64", "s"},
		"entflake.id.borrowed.time":       {"counter float64", "s"},
		"entflake.id.errors":              {"counter int64", "{error}"},
		"entflake.clock.rollbacks":        {"counter int64", "{rollback}"},
		"entflake.clock.rollback.largest": {"gauge float64", "s"},
		"entflake.lease.renewals":         {"counter int64", "{renewal}"},
		"entflake.lease.renewal.failures": {"counter int64", "{failure}"},
		"entflake.lease.fencings":         {"counter int64", "{fencing}"},
		"entflake.worker.switches":        {"counter int64", "{switch}"},
		"entflake.worker.id":              {"gauge int64", ""},
		"entflake.lease.status":           {"updowncounter int64", "1"},
	}
	got := map[string]shape{}
	for name, m := range byName {
		assert.NotEmpty(t, m.Description, name)
		var kind string
		sum := func(monotonic bool, temp metricdata.Temporality, typ string) string {
			assert.Equal(t, metricdata.CumulativeTemporality, temp, name)
			if monotonic {
				return "counter " + typ
			}
			return "updowncounter " + typ
		}
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			kind = sum(d.IsMonotonic, d.Temporality, "int64")
		case metricdata.Sum[float64]:
			kind = sum(d.IsMonotonic, d.Temporality, "float64")
		case metricdata.Gauge[int64]:
			kind = "gauge int64"
		case metricdata.Gauge[float64]:
			kind = "gauge float64"
		}
		got[name] = shape{kind, m.Unit}
	}
	assert.Equal(t, want, got)

	// The exported names are the ones reported.
	for _, name := range []string{
		entflakeotel.WaitsName, entflakeotel.WaitTimeName, entflakeotel.BorrowedTimeName,
		entflakeotel.ErrorsName, entflakeotel.RollbacksName, entflakeotel.LargestRollbackName,
		entflakeotel.RenewalsName, entflakeotel.RenewalFailuresName, entflakeotel.FencingsName,
		entflakeotel.SwitchesName, entflakeotel.WorkerIDName, entflakeotel.LeaseStatusName,
	} {
		assert.Contains(t, want, name)
	}
}

// A generator without a database: worker id 3 from New, source explicit,
// lease state none; all counts zero, and every series there.
func TestRegisterNew(t *testing.T) {
	g, err := entflake.New(3)
	require.NoError(t, err)
	reader := register(t, g)
	got, _ := collect(t, reader)
	assert.Equal(t, expect(g.Stats()), got)
	assert.Equal(t, map[string]float64{key(attribute.String("entflake.worker.source", "explicit")): 3},
		got["entflake.worker.id"])
	assert.Equal(t, 1.0, got["entflake.lease.status"][key(attribute.String("entflake.lease.state", "none"))])
	assert.Equal(t, 0.0, got["entflake.lease.status"][key(attribute.String("entflake.lease.state", "held"))])
	assert.Len(t, got["entflake.lease.status"], len(leaseStates()), "one series per state, every state the library names")
}

// Waits: a millisecond's 4096 IDs are used up at a clock that stands
// still, so the 4097th call waits (on the test clock, which moves by the
// sleep).
func TestWaits(t *testing.T) {
	clk := newTestClock()
	g, err := entflake.New(1, entflake.WithClock(clk))
	require.NoError(t, err)
	reader := register(t, g)

	failed, last := take(g, 4096)
	require.Zero(t, failed, last)
	got, _ := collect(t, reader)
	assert.Equal(t, expect(g.Stats()), got)
	assert.Equal(t, 0.0, got["entflake.id.waits"][key()], "no wait within the first millisecond")

	failed, last = take(g, 1)
	require.Zero(t, failed, last)
	s := g.Stats()
	require.Equal(t, int64(1), s.Waits)
	require.Positive(t, s.WaitDuration)
	got, _ = collect(t, reader)
	assert.Equal(t, expect(s), got)
	assert.Equal(t, 1.0, got["entflake.id.waits"][key()])
	assert.Positive(t, got["entflake.id.wait.time"][key()])
}

// Borrowed: under WithBurst, used-up milliseconds open ahead of the clock
// instead of waiting.
func TestBorrowed(t *testing.T) {
	clk := newTestClock()
	g, err := entflake.New(1, entflake.WithClock(clk), entflake.WithBurst(10*time.Millisecond))
	require.NoError(t, err)
	reader := register(t, g)

	failed, last := take(g, 3*4096)
	require.Zero(t, failed, last)
	s := g.Stats()
	require.Equal(t, int64(2), s.Borrowed, "two milliseconds opened ahead of a clock that stood still")
	got, _ := collect(t, reader)
	assert.Equal(t, expect(s), got)
	assert.InDelta(t, 0.002, got["entflake.id.borrowed.time"][key()], 1e-12)
	assert.Equal(t, 0.0, got["entflake.id.waits"][key()], "a burst within its lead does not wait")
}

// Rollbacks: the clock steps back twice; the default policy clamps, counts
// both, and keeps the larger step.
func TestRollbacks(t *testing.T) {
	clk := newTestClock()
	g, err := entflake.New(1, entflake.WithClock(clk))
	require.NoError(t, err)
	reader := register(t, g)

	_, _ = take(g, 1)
	clk.Add(-20 * time.Millisecond)
	failed, last := take(g, 1)
	require.Zero(t, failed, last)
	clk.Add(10 * time.Millisecond) // still 10 ms behind the last ID
	failed, last = take(g, 1)
	require.Zero(t, failed, last)

	s := g.Stats()
	require.Positive(t, s.Rollbacks)
	require.Equal(t, 20*time.Millisecond, s.LargestRollback)
	got, _ := collect(t, reader)
	assert.Equal(t, expect(s), got)
	assert.InDelta(t, 0.020, got["entflake.clock.rollback.largest"][key()], 1e-12)
}

// Errors, by kind: a rejected rollback (clock_backwards), then calls after
// Close (closed).
func TestErrors(t *testing.T) {
	clk := newTestClock()
	g, err := entflake.New(1, entflake.WithClock(clk), entflake.WithRollbackPolicy(entflake.RejectRollback()))
	require.NoError(t, err)
	reader := register(t, g)

	_, _ = take(g, 1)
	clk.Add(-5 * time.Millisecond)
	failed, last := take(g, 2)
	require.Equal(t, 2, failed)
	require.ErrorIs(t, last, entflake.ErrClockBackwards)
	got, _ := collect(t, reader)
	assert.Equal(t, expect(g.Stats()), got)
	assert.Equal(t, 2.0, got["entflake.id.errors"][key(attribute.String("error.type", "clock_backwards"))])

	require.NoError(t, g.Close())
	failed, last = take(g, 3)
	require.Equal(t, 3, failed)
	require.ErrorIs(t, last, entflake.ErrClosed)
	s := g.Stats()
	got, _ = collect(t, reader)
	assert.Equal(t, expect(s), got)
	assert.Equal(t, 3.0, got["entflake.id.errors"][key(attribute.String("error.type", "closed"))])
	assert.Equal(t, 2.0, got["entflake.id.errors"][key(attribute.String("error.type", "clock_backwards"))])
}

// fastBeat renews every 100 ms, so that a test sees renewals soon.
var fastBeat = entflake.Heartbeat{
	Interval: 100 * time.Millisecond, Retry: 50 * time.Millisecond, Timeout: 500 * time.Millisecond,
	Margin: 300 * time.Millisecond, TTL: 2 * time.Second,
}

// openSQLite opens a fresh SQLite database in the test's directory.
func openSQLite(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "app.db")+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// A leased worker id on SQLite: source lease, state held, renewals that
// move between collections; after Close, state released.
func TestLease(t *testing.T) {
	ctx := context.Background()
	db := openSQLite(t)
	g, err := entflake.OpenDB(ctx, db, dialect.SQLite, entflake.WithService("svc"),
		entflake.WithHeartbeat(fastBeat), entflake.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	defer g.Close()
	reader := register(t, g)

	got, _ := collect(t, reader)
	s := g.Stats()
	require.Equal(t, entflake.SourceLease, s.Source)
	assert.Equal(t, map[string]float64{key(attribute.String("entflake.worker.source", "lease")): float64(s.WorkerID)},
		got["entflake.worker.id"])
	assert.Equal(t, 1.0, got["entflake.lease.status"][key(attribute.String("entflake.lease.state", "held"))])
	assert.Equal(t, 0.0, got["entflake.lease.status"][key(attribute.String("entflake.lease.state", "none"))])

	// The keeper renews in the background, so the stats may move between
	// a read and the collection: the reported count lies between the two
	// reads around it.
	first := got["entflake.lease.renewals"][key()]
	require.Eventually(t, func() bool { return g.Stats().Renewals >= int64(first)+2 }, 30*time.Second, 10*time.Millisecond)
	before := g.Stats()
	got, _ = collect(t, reader)
	after := g.Stats()
	renewals := got["entflake.lease.renewals"][key()]
	assert.GreaterOrEqual(t, renewals, float64(before.Renewals))
	assert.LessOrEqual(t, renewals, float64(after.Renewals))
	assert.GreaterOrEqual(t, renewals, first+2, "the renewals moved")

	require.NoError(t, g.Close())
	s = g.Stats()
	got, _ = collect(t, reader)
	assert.Equal(t, expect(s), got, "a closed generator's stats no longer move")
	assert.Equal(t, 1.0, got["entflake.lease.status"][key(attribute.String("entflake.lease.state", "released"))])
	assert.Equal(t, 0.0, got["entflake.lease.status"][key(attribute.String("entflake.lease.state", "held"))])
}

// The lease's events on SQLite, each driven for real: another connection
// holds the database locked past the promise (renewals fail, the generator
// is fenced and NextID fails with ErrFenced), then, once it is held again,
// the slot rows vanish (the lease is lost, a fencing, and the keeper
// switches to a new slot). Fencings 2, switches 1 and failures more than
// that: distinct values, so that a mix-up of the counters shows.
func TestLeaseEvents(t *testing.T) {
	ctx := context.Background()
	// A short busy timeout: a renewal that meets the lock fails at once
	// instead of waiting out its own timeout.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "app.db")+"?_pragma=busy_timeout(20)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	g, err := entflake.OpenDB(ctx, db, dialect.SQLite, entflake.WithService("svc"),
		entflake.WithHeartbeat(fastBeat), entflake.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	defer g.Close()
	reader := register(t, g)
	require.Equal(t, entflake.LeaseHeld, g.Stats().LeaseState)

	// Lock the database until the promise passes.
	lock, err := db.Conn(ctx)
	require.NoError(t, err)
	_, err = lock.ExecContext(ctx, "BEGIN EXCLUSIVE")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return g.Stats().LeaseState == entflake.LeaseRenewing }, 10*time.Second, 5*time.Millisecond)
	got, _ := collect(t, reader)
	// The state may move on to fenced between the check and the collection.
	assert.Equal(t, 1.0, got["entflake.lease.status"][key(attribute.String("entflake.lease.state", "renewing"))]+
		got["entflake.lease.status"][key(attribute.String("entflake.lease.state", "fenced"))])
	require.Eventually(t, func() bool { return g.Stats().LeaseState == entflake.LeaseFenced }, 10*time.Second, 5*time.Millisecond)
	_, err = g.NextID()
	require.ErrorIs(t, err, entflake.ErrFenced)
	// Lease reports fenced as soon as the clock passes the promise; the
	// keeper counts the fencing at its next failed renewal, so the lock
	// stays until then.
	require.Eventually(t, func() bool { return g.Stats().Fencings == 1 }, 10*time.Second, 5*time.Millisecond)
	_, err = lock.ExecContext(ctx, "ROLLBACK")
	require.NoError(t, err)
	require.NoError(t, lock.Close())
	// Held again: renewed, or, if the slot expired during the lock, taken
	// afresh (a renewal does not revive an expired slot), which counts a
	// switch but no second fencing.
	require.Eventually(t, func() bool { return g.Stats().LeaseState == entflake.LeaseHeld }, 10*time.Second, 5*time.Millisecond)
	base := g.Stats()
	require.Equal(t, int64(1), base.Fencings, "%+v", base)

	// The slot rows vanish: the next renewal finds its slot gone, and the
	// keeper takes another (made again a TTL ahead, which it waits for).
	_, err = db.ExecContext(ctx, "DELETE FROM sys_sequence_slot")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s := g.Stats()
		return s.Switches == base.Switches+1 && s.LeaseState == entflake.LeaseHeld
	}, 10*time.Second, 5*time.Millisecond)

	// Renewals go on in the background: every reported value lies between
	// the stats read before and after the collection.
	before := g.Stats()
	got, _ = collect(t, reader)
	after := g.Stats()
	require.Equal(t, int64(2), after.Fencings, "%+v", after)
	require.Equal(t, base.Switches+1, after.Switches, "%+v", after)
	require.Greater(t, after.RenewalFailures, after.Fencings, "%+v", after)
	require.Positive(t, after.Errors.Fenced, "%+v", after)
	lo, hi := expect(before), expect(after)
	for name, series := range got {
		for k, v := range series {
			assert.GreaterOrEqual(t, v, min(lo[name][k], hi[name][k]), "%s %s", name, k)
			assert.LessOrEqual(t, v, max(lo[name][k], hi[name][k]), "%s %s", name, k)
		}
	}
	assert.Equal(t, 2.0, got["entflake.lease.fencings"][key()])
	assert.Equal(t, float64(after.Switches), got["entflake.worker.switches"][key()])
	assert.Equal(t, float64(after.RenewalFailures), got["entflake.lease.renewal.failures"][key()])
	assert.Equal(t, float64(after.Errors.Fenced), got["entflake.id.errors"][key(attribute.String("error.type", "fenced"))])
	assert.Equal(t, 1.0, got["entflake.lease.status"][key(attribute.String("entflake.lease.state", "held"))])
	assert.Equal(t, float64(after.WorkerID), got["entflake.worker.id"][key(attribute.String("entflake.worker.source", "lease"))])
}

// Unregister stops the reporting: the next collection has no entflake data
// points, while the generator's stats keep moving.
func TestUnregister(t *testing.T) {
	clk := newTestClock()
	g, err := entflake.New(1, entflake.WithClock(clk))
	require.NoError(t, err)
	m, reader := meter(t)
	reg, err := entflakeotel.Register(m, g)
	require.NoError(t, err)
	got, _ := collect(t, reader)
	require.Len(t, got, 12)

	require.NoError(t, reg.Unregister())
	_, _ = take(g, 4097)
	require.Positive(t, g.Stats().Waits)
	got, _ = collect(t, reader)
	assert.Empty(t, got)
}

// WithAttributes: two generators on one Meter, told apart by an attribute,
// each with its own series.
func TestWithAttributes(t *testing.T) {
	m, reader := meter(t)
	gens := map[string]*entflake.Generator{}
	for i, name := range []string{"orders", "payments"} {
		g, err := entflake.New(int64(10 + i))
		require.NoError(t, err)
		gens[name] = g
		reg, err := entflakeotel.Register(m, g, entflakeotel.WithAttributes(attribute.String("app.generator", name)),
			entflakeotel.WithAttributes(attribute.Int("app.shard", i)))
		require.NoError(t, err)
		t.Cleanup(func() { _ = reg.Unregister() })
	}
	require.NoError(t, gens["payments"].Close())
	_, _ = take(gens["payments"], 1)

	got, _ := collect(t, reader)
	want := expect(gens["orders"].Stats(), attribute.String("app.generator", "orders"), attribute.Int("app.shard", 0))
	for name, series := range expect(gens["payments"].Stats(), attribute.String("app.generator", "payments"), attribute.Int("app.shard", 1)) {
		for k, v := range series {
			want[name][k] = v
		}
	}
	assert.Equal(t, want, got)
	assert.Equal(t, 11.0, got["entflake.worker.id"][key(attribute.String("app.generator", "payments"), attribute.Int("app.shard", 1),
		attribute.String("entflake.worker.source", "explicit"))])
	assert.Equal(t, 1.0, got["entflake.id.errors"][key(attribute.String("app.generator", "payments"), attribute.Int("app.shard", 1),
		attribute.String("error.type", "closed"))])
	assert.Equal(t, 0.0, got["entflake.id.errors"][key(attribute.String("app.generator", "orders"), attribute.Int("app.shard", 0),
		attribute.String("error.type", "closed"))])
}

// Bad input gives an error that names it, never a panic.
func TestRegisterBadInput(t *testing.T) {
	g, err := entflake.New(1)
	require.NoError(t, err)
	m, reader := meter(t)

	cases := map[string]struct {
		m    metric.Meter
		g    *entflake.Generator
		opts []entflakeotel.Option
		err  error
		msg  string
	}{
		"nil meter":     {nil, g, nil, entflakeotel.ErrNilMeter, "nil metric.Meter"},
		"nil generator": {m, nil, nil, entflakeotel.ErrNilGenerator, "nil *entflake.Generator"},
		"nil option":    {m, g, []entflakeotel.Option{nil}, entflakeotel.ErrInvalidOption, "a nil Option"},
		"empty key": {m, g, []entflakeotel.Option{entflakeotel.WithAttributes(attribute.String("", "x"))},
			entflakeotel.ErrInvalidOption, `WithAttributes(""="x"): an empty key`},
		"error.type": {m, g, []entflakeotel.Option{entflakeotel.WithAttributes(attribute.String("error.type", "x"))},
			entflakeotel.ErrInvalidOption, `WithAttributes("error.type"): Register sets this key itself`},
		"lease state": {m, g, []entflakeotel.Option{entflakeotel.WithAttributes(entflakeotel.LeaseStateKey.String("held"))},
			entflakeotel.ErrInvalidOption, `"entflake.lease.state"`},
		"worker source": {m, g, []entflakeotel.Option{entflakeotel.WithAttributes(entflakeotel.WorkerSourceKey.String("lease"))},
			entflakeotel.ErrInvalidOption, `"entflake.worker.source"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			reg, err := entflakeotel.Register(c.m, c.g, c.opts...)
			require.ErrorIs(t, err, c.err)
			assert.ErrorContains(t, err, c.msg)
			assert.Nil(t, reg)
		})
	}
	// None of the refused registrations left a callback behind.
	got, _ := collect(t, reader)
	assert.Empty(t, got)
}

// The no-op Meter (what otel.Meter gives before an SDK is installed) is
// accepted.
func TestNoopMeter(t *testing.T) {
	g, err := entflake.New(1)
	require.NoError(t, err)
	reg, err := entflakeotel.Register(noop.NewMeterProvider().Meter(entflakeotel.ScopeName), g)
	require.NoError(t, err)
	require.NoError(t, reg.Unregister())
}

// Collections run while goroutines issue IDs beyond the ceiling (real clock,
// so calls wait): every counter is monotonic across collections, and once the
// goroutines stop a collection equals Stats. Run with -race.
func TestConcurrentCollect(t *testing.T) {
	g, err := entflake.New(1)
	require.NoError(t, err)
	reader := register(t, g)

	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			// 8192 IDs at a time are more than one millisecond holds, so
			// every call waits at least once, even as slow as -race is.
			buf := make([]int64, 8192)
			for !stop.Load() {
				if err := g.NextIDs(buf); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	counters := []string{"entflake.id.waits", "entflake.id.wait.time", "entflake.id.borrowed.time",
		"entflake.clock.rollbacks", "entflake.lease.renewals", "entflake.lease.renewal.failures",
		"entflake.lease.fencings", "entflake.worker.switches"}
	prev := map[string]float64{}
	deadline := time.Now().Add(300 * time.Millisecond)
	var collections int
	for time.Now().Before(deadline) {
		got, _ := collect(t, reader)
		for _, name := range counters {
			v := got[name][key()]
			assert.GreaterOrEqual(t, v, prev[name], name)
			prev[name] = v
		}
		collections++
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("NextID: %v", err)
	}
	s := g.Stats()
	got, _ := collect(t, reader)
	assert.Equal(t, expect(s), got)
	t.Logf("%d collections; stats at the end: %+v", collections, s)
	assert.Positive(t, s.Waits, "batches larger than a millisecond wait for the clock")
	assert.Positive(t, prev["entflake.id.waits"], "the waits were reported while they happened")
}

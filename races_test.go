package entflake

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// The holes a review found in the live lease, each shown first by a test
// that issued the same IDs from two generators (or after Close), kept here
// as regression tests. They run on MariaDB.

// gateClock is the real clock, except that, once armed, the first read made
// from inside waitClock (a background take waiting for its slot's floor)
// blocks until the gate opens: it picks an interleaving, nothing else.
type gateClock struct {
	armed   atomic.Bool
	blocked chan struct{}
	gate    chan struct{}
}

func (c *gateClock) Now() time.Time {
	if c.armed.Load() {
		pc := make([]uintptr, 16)
		frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
		for {
			f, more := frames.Next()
			if strings.HasSuffix(f.Function, "entflake.waitClock") {
				c.armed.Store(false)
				close(c.blocked)
				<-c.gate
				break
			}
			if !more {
				break
			}
		}
	}
	return time.Now()
}

func (c *gateClock) Sleep(d time.Duration) { time.Sleep(d) }

// TestCloseDuringSwitch: Close runs while the keeper, upgrading a fallback,
// has taken a slot and is about to switch to it. The switch must fail, the
// slot must go back, and nothing may be issued after Close.
func TestCloseDuringSwitch(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	b := dbtest.Backends[0]
	db := b.Fresh(t)
	open(t, db.DB, b.Dialect, WithService("warmup"), quiet()) // the tables exist
	clk := &gateClock{blocked: make(chan struct{}), gate: make(chan struct{})}
	c := newConfig([]Option{WithService("race"), WithClock(clk), quiet(),
		WithHeartbeat(Heartbeat{Interval: 500 * time.Millisecond, Retry: 100 * time.Millisecond})})
	require.NoError(t, c.validate())
	g, err := c.build(1000, SourceFallback, "race@h@1@1") // as the fallback rung builds it
	require.NoError(t, err)
	g.k = c.keeper(db.DB, b.Dialect, "race@h@1@1", SourceLease)
	g.k.g = g
	for range 10 {
		_, err = g.NextID()
		require.NoError(t, err)
	}
	clk.armed.Store(true)
	g.k.start()
	<-clk.blocked // the keeper holds a slot and waits to switch to it
	closed := make(chan error)
	go func() { closed <- g.Close() }()
	time.Sleep(100 * time.Millisecond)
	close(clk.gate)
	require.NoError(t, <-closed)
	_, err = g.NextID()
	require.ErrorIs(t, err, ErrClosed)
	assert.Equal(t, int64(1000), g.WorkerID(), "no switch after Close")
	var live int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM sys_sequence_slot WHERE service_name = 'race' AND expires_ms > 0").Scan(&live))
	assert.Zero(t, live, "the slot taken during Close was given back")
}

// offClock is the real clock plus an offset the test moves.
type offClock struct{ off atomic.Int64 }

func (c *offClock) Now() time.Time        { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *offClock) Sleep(d time.Duration) { time.Sleep(d) }

// issueFor issues IDs for d and returns them as a set.
func issueFor(t *testing.T, g *Generator, d time.Duration) map[int64]bool {
	t.Helper()
	seen := map[int64]bool{}
	for end := time.Now().Add(d); time.Now().Before(end); {
		id, err := g.NextID()
		require.NoError(t, err)
		seen[id] = true
	}
	return seen
}

// countRepeats issues from g for d and counts the IDs seen before; errors
// (a generator waiting for its floor) are skipped.
func countRepeats(g *Generator, seen map[int64]bool, d time.Duration) (repeats, issued int) {
	for end := time.Now().Add(d); time.Now().Before(end); {
		id, err := g.NextID()
		if err != nil {
			continue
		}
		issued++
		if seen[id] {
			repeats++
		}
	}
	return repeats, issued
}

// TestClockSequenceRelease: after a clock-sequence bump the time field is
// below the highest millisecond issued; Close must still leave the highest
// as the promise, or the next holder repeats IDs.
func TestClockSequenceRelease(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	b := dbtest.Backends[0]
	db := b.Fresh(t)
	clk := &offClock{}
	clk.off.Store(int64(2 * time.Second)) // A's clock runs 2 s fast
	opts := []Option{WithService("cs"), WithLayout(ClockSequenceLayout), WithHeartbeat(fastBeat), quiet()}
	a, err := OpenDB(t.Context(), db.DB, b.Dialect, append(opts, WithClock(clk), WithRollbackPolicy(BumpClockSequence()))...)
	require.NoError(t, err)
	w := a.WorkerID()
	seen := issueFor(t, a, time.Second)
	clk.off.Store(0) // NTP steps it back
	id, err := a.NextID()
	require.NoError(t, err)
	seen[id] = true
	p, err := a.Decode(id)
	require.NoError(t, err)
	require.Equal(t, int64(1), p.ClockSeq, "a bump")
	require.NoError(t, a.Close())
	promise, _ := slotPromise(t, db.DB, w)
	for id := range seen {
		require.LessOrEqual(t, unixMs(t, a, id), promise, "an ID above the released promise")
	}
	next := open(t, db.DB, b.Dialect, append(opts, WithWorkerID(w), WithLeaseTimeout(5*time.Second))...)
	repeats, issued := countRepeats(next, seen, 2500*time.Millisecond)
	assert.Zero(t, repeats)
	assert.Positive(t, issued)
}

// TestExplicitFloorAhead: a fixed worker id whose previous holder promised
// further ahead than the lease timeout can wait starts fenced, not
// unregistered, and registers once its clock is near enough: it never
// issues below the floor.
func TestExplicitFloorAhead(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	b := dbtest.Backends[0]
	db := b.Fresh(t)
	a, err := OpenDB(t.Context(), db.DB, b.Dialect, WithService("ledger"), WithWorkerID(7),
		WithClock(skewedClock{5 * time.Second}), quiet()) // A's clock is 5 s fast
	require.NoError(t, err)
	seen := issueFor(t, a, time.Second)
	require.NoError(t, a.Close())

	sink, logOpt := newSink()
	next := open(t, db.DB, b.Dialect, WithService("ledger"), WithWorkerID(7), WithHeartbeat(Heartbeat{Retry: 500 * time.Millisecond}), logOpt)
	assert.Equal(t, LeaseFenced, next.Lease().State)
	_, err = next.NextID()
	assert.ErrorIs(t, err, ErrFenced)
	assert.Len(t, sink.find(slog.LevelWarn, "waits for floor"), 1)
	repeats, issued := countRepeats(next, seen, 5500*time.Millisecond)
	assert.Zero(t, repeats)
	assert.Positive(t, issued, "registered once the clock came near the floor")
	assert.Equal(t, LeaseHeld, next.Lease().State)
}

// TestTakeoverDefaultHeartbeat: a crash-restarted pod whose old incarnation
// promised TTL - Margin ahead (80 s by default) cannot wait that long in
// Open: it starts fenced, and says why.
func TestTakeoverDefaultHeartbeat(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	t.Setenv("POD_NAME", "ledger-0")
	b := dbtest.Backends[0]
	db := b.Fresh(t)
	open(t, db.DB, b.Dialect, WithService("ledger"), WithWorkerID(7), quiet())
	again := open(t, db.DB, b.Dialect, WithService("ledger"), WithWorkerID(7), quiet())
	st := again.Lease()
	assert.Equal(t, LeaseFenced, st.State)
	assert.ErrorContains(t, st.Err, "ahead of this clock")
	_, err := again.NextID()
	assert.ErrorIs(t, err, ErrFenced)
}

// TestHeldAfterOtherFailure: a fixed worker id used unregistered stops as
// soon as a background take finds it held by another live instance, also
// when earlier takes failed for another reason.
func TestHeldAfterOtherFailure(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	b := dbtest.Backends[0]
	db := b.Fresh(t)
	holder := open(t, db.DB, b.Dialect, WithService("ledger"), WithWorkerID(7), WithHeartbeat(fastBeat), quiet())
	down, err := sql.Open(db.Driver, b.ClosedDSN(t))
	require.NoError(t, err)
	defer down.Close()
	sink, logOpt := newSink()
	c := newConfig([]Option{WithService("ledger"), WithHeartbeat(fastBeat), logOpt})
	require.NoError(t, c.validate())
	g, err := c.build(7, SourceExplicit, "ledger@other@1@1")
	require.NoError(t, err)
	k := c.keeper(down, b.Dialect, "ledger@other@1@1", SourceExplicit)
	k.req.Explicit, k.req.WorkerID = true, 7
	k.g, g.k = g, k
	k.acquire(t.Context()) // the database is unreachable
	k.req.DB = db.DB
	k.acquire(t.Context()) // it is back, and 7 is held
	_, err = g.NextID()
	assert.ErrorIs(t, err, ErrFenced)
	_, err = holder.NextID()
	assert.NoError(t, err)
	assert.Equal(t, int64(1), g.Stats().Fencings, "finding 7 held fenced the generator")
	k.acquire(t.Context()) // still held: the same fencing, not another
	st := g.Stats()
	assert.Equal(t, int64(1), st.Fencings, "one fencing, however many takes find it held")
	assert.Zero(t, st.Switches)
	assert.Equal(t, LeaseLost, g.Lease().State)
	assert.Len(t, sink.find(slog.LevelError, "background lease failed"), 1, "said once, at ERROR")
}

// TestVanishedRowRetaken: the slot rows vanish (a restore, a truncate) and
// another instance takes the same worker id afresh, at fence 1 again: the
// old holder's renewals name its instance too, so they fail, and it stops.
func TestVanishedRowRetaken(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	b := dbtest.Backends[0]
	db := b.Fresh(t)
	a := open(t, db.DB, b.Dialect, WithService("svc"), WithHeartbeat(fastBeat), quiet())
	w := a.WorkerID()
	_, err := db.Exec("DELETE FROM sys_sequence_slot")
	require.NoError(t, err)
	other := open(t, db.DB, b.Dialect, WithService("svc"), WithWorkerID(w), WithHeartbeat(fastBeat), quiet())
	require.Equal(t, LeaseHeld, other.Lease().State)
	eventually(t, 3*time.Second, func() bool { _, err := a.NextID(); return errors.Is(err, ErrLeaseLost) },
		fmt.Sprintf("the old holder of worker %d kept issuing", w))
	_, err = other.NextID()
	assert.NoError(t, err)
}

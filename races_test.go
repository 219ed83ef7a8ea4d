package entflake

import (
	"database/sql"
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
	"github.com/entflake/entflake/internal/lease"
)

// The holes a review found in the live lease, each shown first by a test
// that issued the same IDs from two generators (or after Close), kept here
// as regression tests. They run on MariaDB.

// gateClock is the real clock, except that, once armed, the first read made
// from inside waitFloor (a background take waiting for its slot's floor)
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
			if strings.HasSuffix(f.Function, "entflake.(*keeper).waitFloor") {
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
	clk.off.Store(int64(200 * time.Millisecond)) // A's clock runs 200 ms fast (within Margin: the cap lets its promises through)
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

// TestDeletedSlotRows (issue 15, hole 1): the slot rows are deleted (a
// restore, a truncate, a careless DELETE) while A holds worker id w and
// issues, and B opens: with WithWorkerID(w), or with a plain lease. The
// pool's count of rows made tells the rows made again from rows never
// made, and floors them at the database's clock + TTL, above anything A can
// have been promised; A stops at its next renewal. Before the count, B got
// w with floor 1 and issued at once, while A went on until its renewal:
// thousands of repeated IDs.
func TestDeletedSlotRows(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	for _, plain := range []bool{false, true} {
		name := "fixed"
		if plain {
			name = "plain"
		}
		t.Run(name, func(t *testing.T) {
			dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
				db := b.Fresh(t)
				// Two instances so that a plain lease has a row to come back
				// to: every made row is floored after the deletion.
				a := open(t, db.DB, b.Dialect, WithService("svc"), WithHeartbeat(fastBeat), quiet())
				w := a.WorkerID()
				ia := issue(t, a, 2, 0)
				time.Sleep(100 * time.Millisecond)
				_, err := db.Exec("DELETE FROM sys_sequence_slot")
				require.NoError(t, err)
				// A plain lease starts its search at the counter's next
				// value: make that w.
				_, err = db.Exec(fmt.Sprintf("UPDATE sys_sequence SET worker_id = %d WHERE service_name = '__global__'", w-1))
				require.NoError(t, err)
				sink, logOpt := newSink()
				opts := []Option{WithService("svc"), WithHeartbeat(fastBeat), WithLeaseTimeout(5 * time.Second), logOpt}
				if !plain {
					opts = append(opts, WithWorkerID(w))
				}
				bg := open(t, db.DB, b.Dialect, opts...)
				ib := issue(t, bg, 2, 0)
				eventually(t, 5*time.Second, func() bool { return bg.Lease().State == LeaseHeld && ib.mark() > 1000 },
					"B never issued")
				time.Sleep(300 * time.Millisecond)
				ia.halt()
				ib.halt()
				idsA, _, lostA, _ := ia.snapshot()
				idsB, _, _, otherB := ib.snapshot()
				assert.Empty(t, otherB)
				assert.Positive(t, lostA, "A learnt that its slot is gone")
				seen := make(map[int64]bool, len(idsA))
				for _, id := range idsA {
					seen[id] = true
				}
				repeats := 0
				for _, id := range idsB {
					if seen[id] {
						repeats++
					}
				}
				assert.Zero(t, repeats, "of %d IDs of B, %d were A's (A issued %d)", len(idsB), repeats, len(idsA))
				assert.NotEmpty(t, sink.find(slog.LevelError, "slot rows found deleted"))
			})
		})
	}
}

// stepBackClock is the real clock until a read is made from inside
// waitFloor (a take waiting for its slot's floor); from then on it is
// `back` behind: the clock stepped back while the take waited, so that the
// wait ends at the lease timeout instead of at the floor.
type stepBackClock struct {
	back    time.Duration
	stepped atomic.Bool
}

func (c *stepBackClock) Now() time.Time {
	if !c.stepped.Load() {
		pc := make([]uintptr, 16)
		frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
		for {
			f, more := frames.Next()
			if strings.HasSuffix(f.Function, "entflake.(*keeper).waitFloor") {
				c.stepped.Store(true)
				break
			}
			if !more {
				break
			}
		}
	}
	if c.stepped.Load() {
		return time.Now().Add(-c.back)
	}
	return time.Now()
}

func (c *stepBackClock) Sleep(d time.Duration) { time.Sleep(d) }

// closedWithFloorAhead opens a generator with WithWorkerID(7) whose clock
// runs ahead by `ahead`, issues for a while, and closes it: the slot's
// promise, its last issued millisecond, is about `ahead` in the future.
func closedWithFloorAhead(t *testing.T, db *sql.DB, dialectName string, ahead time.Duration) map[int64]bool {
	t.Helper()
	a, err := OpenDB(t.Context(), db, dialectName, WithService("ledger"), WithWorkerID(7),
		WithClock(skewedClock{ahead}), quiet()) // default heartbeat: Margin 10 s covers the skew
	require.NoError(t, err)
	seen := issueFor(t, a, 500*time.Millisecond)
	require.NoError(t, a.Close())
	return seen
}

// TestFixedFloorWaitTimesOut (issue 15, hole 2): a fixed worker id's slot
// has a floor ahead of the clock, near enough to wait for, but the clock
// steps back during the wait, which then ends at the lease timeout. The
// floor is known: the generator starts fenced, and registers once the clock
// passes it. Before, the timeout took the "database unreachable" path and
// the generator issued unregistered, below the floor: thousands of IDs of
// the closed holder again.
func TestFixedFloorWaitTimesOut(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		seen := closedWithFloorAhead(t, db.DB, b.Dialect, 1500*time.Millisecond)
		clk := &stepBackClock{back: 3 * time.Second}
		sink, logOpt := newSink()
		next := open(t, db.DB, b.Dialect, WithService("ledger"), WithWorkerID(7), WithClock(clk),
			WithLeaseTimeout(2500*time.Millisecond), WithHeartbeat(Heartbeat{Retry: 200 * time.Millisecond}), logOpt)
		require.True(t, clk.stepped.Load(), "the take waited for the floor")
		assert.Equal(t, LeaseFenced, next.Lease().State)
		_, err := next.NextID()
		assert.ErrorIs(t, err, ErrFenced)
		assert.ErrorIs(t, next.Lease().Err, lease.ErrFloorAhead)
		assert.Len(t, sink.find(slog.LevelWarn, "waits for floor"), 1)
		assert.Empty(t, sink.find(slog.LevelWarn, "unregistered"))
		// The clock is 3 s behind now: it passes the closed holder's IDs
		// within about 2 s.
		repeats, issued := countRepeats(next, seen, 5*time.Second)
		assert.Zero(t, repeats, "IDs of the closed holder issued again")
		assert.Positive(t, issued, "registered once the clock passed the floor")
		assert.Equal(t, LeaseHeld, next.Lease().State)
	})
}

// TestUnregisteredFixedLearnsFloor (issue 15, hole 3): a fixed worker id
// starts unregistered (the database is unreachable) and issues; the
// database comes back, and the background registration finds the slot's
// floor ahead of the clock (the previous holder issued up to it). The
// generator stops at once, says at ERROR which of its IDs may have repeated
// the previous holder's, and registers once the clock passes the floor.
// Before, it kept issuing, into the previous holder's milliseconds.
func TestUnregisteredFixedLearnsFloor(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	for _, b := range dbtest.Backends[:2] {
		t.Run(b.Name, func(t *testing.T) {
			db := b.Fresh(t)
			seen := closedWithFloorAhead(t, db.DB, b.Dialect, 2500*time.Millisecond)
			proxy := dbtest.NewProxy(t, db.ServerAddr(t))
			via := db.Via(t, proxy.Addr())
			proxy.Cut()
			sink, logOpt := newSink()
			next := open(t, via, b.Dialect, WithService("ledger"), WithWorkerID(7), WithLeaseTimeout(500*time.Millisecond),
				WithHeartbeat(Heartbeat{Retry: 200 * time.Millisecond}), logOpt)
			require.Equal(t, LeaseUnregistered, next.Lease().State)
			is := issue(t, next, 2, 100*time.Microsecond)
			time.Sleep(300 * time.Millisecond)
			proxy.Pass()
			// Until the clock has passed the previous holder's IDs (2.5 s
			// ahead, 0.5 s of them), and a while after, no ID of theirs
			// comes again.
			time.Sleep(3500 * time.Millisecond)
			is.halt()
			logged := sink.find(slog.LevelError, "floor is ahead")
			if assert.Len(t, logged, 1, "the floor found was reported once") {
				assert.Contains(t, logged[0].attrs, "repeats_from", "the range of IDs that may repeat")
			}
			assert.Eventually(t, func() bool { return next.Lease().State == LeaseHeld }, 3*time.Second, 10*time.Millisecond,
				"never registered")
			ids, _, _, other := is.snapshot()
			assert.Empty(t, other)
			repeats := 0
			for _, id := range ids {
				if seen[id] {
					repeats++
				}
			}
			assert.Zero(t, repeats, "of %d IDs, %d were the previous holder's", len(ids), repeats)
		})
	}
}

// TestLeaseFloorWaitPicksAnother: on the lease path, a slot whose floor
// the take judged near enough, but which the clock then falls behind (it
// stepped back), is given back untouched, and another slot is taken,
// rather than falling back to a hashed worker id.
func TestLeaseFloorWaitPicksAnother(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		a := open(t, db.DB, b.Dialect, WithService("svc"), quiet())
		c := open(t, db.DB, b.Dialect, WithService("svc"), quiet())
		wa, wc := a.WorkerID(), c.WorkerID()
		require.NoError(t, a.Close())
		require.NoError(t, c.Close())
		// wa's last holder issued up to 200 ms ahead (near enough not to
		// look for another slot first); wc's long ago.
		near := time.Now().Add(200 * time.Millisecond).UnixMilli()
		_, err := db.Exec(fmt.Sprintf("UPDATE sys_sequence_slot SET promise_ms = %d WHERE worker_id = %d", near, wa))
		require.NoError(t, err)
		_, err = db.Exec(fmt.Sprintf("UPDATE sys_sequence_slot SET promise_ms = %d WHERE worker_id = %d",
			time.Now().Add(-time.Minute).UnixMilli(), wc))
		require.NoError(t, err)
		_, err = db.Exec(fmt.Sprintf("UPDATE sys_sequence SET worker_id = %d WHERE service_name = '__global__'", wa-1))
		require.NoError(t, err)
		clk := &stepBackClock{back: 10 * time.Second}
		sink, logOpt := newSink()
		g := open(t, db.DB, b.Dialect, WithService("svc"), WithClock(clk), WithLeaseTimeout(3*time.Second), logOpt)
		require.True(t, clk.stepped.Load(), "the take waited for wa's floor")
		assert.Equal(t, SourceLease, g.Source(), "no fallback")
		assert.Equal(t, LeaseHeld, g.Lease().State)
		assert.Equal(t, wc, g.WorkerID(), "the other free slot")
		assert.Empty(t, sink.find(slog.LevelWarn, "fallback"))
		promise, _ := slotPromise(t, db.DB, wa)
		assert.Equal(t, near, promise, "wa given back with its promise untouched")
	})
}

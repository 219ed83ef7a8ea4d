package snowflake

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	defaultLayout = Layout{WorkerBits: 10, SequenceBits: 12}
	csLayout      = Layout{ClockSeqBits: 5, WorkerBits: 5, SequenceBits: 12}
	testEpoch     = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
)

// fakeClock is a clock that moves only when told to, or when slept on.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	slept  time.Duration
	sleeps int
	frozen bool // Sleep does not advance the time (a clock that is stuck)
	// After stepIn more reads, the clock steps by step (once).
	stepIn int
	step   time.Duration
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{now: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stepIn > 0 {
		c.stepIn--
		if c.stepIn == 0 {
			c.now = c.now.Add(c.step)
		}
	}
	return c.now
}

// stepAfter makes the clock step by d on the nth read from now.
func (c *fakeClock) stepAfter(n int, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stepIn, c.step = n, d
}

func (c *fakeClock) Sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept += d
	c.sleeps++
	if !c.frozen {
		c.now = c.now.Add(d)
	}
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Slept() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slept
}

func newGen(t testing.TB, cfg Config) *Generator {
	t.Helper()
	if cfg.Layout == (Layout{}) {
		cfg.Layout = defaultLayout
	}
	if cfg.EpochMilli == 0 {
		cfg.EpochMilli = testEpoch.UnixMilli()
	}
	if cfg.Policy == (Policy{}) {
		cfg.Policy = Policy{Kind: Clamp, Limit: time.Second}
	}
	g, err := New(cfg)
	require.NoError(t, err)
	return g
}

func mustNext(t testing.TB, g *Generator) int64 {
	t.Helper()
	id, err := g.NextID()
	require.NoError(t, err)
	return id
}

func TestLayoutValidate(t *testing.T) {
	for _, tc := range []struct {
		l  Layout
		ok bool
	}{
		{Layout{0, 10, 12}, true},
		{Layout{5, 5, 12}, true},
		{Layout{0, 1, 21}, true},
		{Layout{0, 21, 1}, true},
		{Layout{0, 10, 11}, false}, // 21 bits
		{Layout{0, 11, 12}, false}, // 23 bits
		{Layout{0, 0, 22}, false},  // no worker field
		{Layout{0, 22, 0}, false},  // no sequence field
		{Layout{-1, 11, 12}, false},
		{Layout{}, false},
	} {
		err := tc.l.Validate()
		if tc.ok {
			assert.NoError(t, err, "%+v", tc.l)
		} else {
			assert.ErrorIs(t, err, ErrInvalidLayout, "%+v", tc.l)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	now := time.Now()
	clk := newFakeClock(testEpoch.Add(time.Hour))
	base := Config{Layout: defaultLayout, EpochMilli: testEpoch.UnixMilli(), Clock: clk, Policy: Policy{Kind: Clamp, Limit: time.Second}}
	for name, tc := range map[string]struct {
		mod  func(*Config)
		want error
	}{
		"worker too big":        {func(c *Config) { c.WorkerID = 1024 }, ErrInvalidWorkerID},
		"worker negative":       {func(c *Config) { c.WorkerID = -1 }, ErrInvalidWorkerID},
		"worker too big for cs": {func(c *Config) { c.Layout = csLayout; c.WorkerID = 32 }, ErrInvalidWorkerID},
		"epoch before 1970":     {func(c *Config) { c.EpochMilli = -1 }, ErrInvalidEpoch},
		"epoch in future":       {func(c *Config) { c.EpochMilli = now.Add(time.Hour).UnixMilli() }, ErrInvalidEpoch},
		"epoch too old":         {func(c *Config) { c.EpochMilli = now.UnixMilli() - MaxTime - 1000 }, ErrInvalidEpoch},
		"clamp without fuse":    {func(c *Config) { c.Policy = Policy{Kind: Clamp} }, ErrInvalidPolicy},
		"wait below 1ms":        {func(c *Config) { c.Policy = Policy{Kind: Wait, Limit: time.Microsecond} }, ErrInvalidPolicy},
		"clock seq w/o bits":    {func(c *Config) { c.Policy = Policy{Kind: ClockSequence} }, ErrInvalidPolicy},
		"unknown policy":        {func(c *Config) { c.Policy = Policy{Kind: 42} }, ErrInvalidPolicy},
		"bad layout":            {func(c *Config) { c.Layout = Layout{WorkerBits: 10, SequenceBits: 10} }, ErrInvalidLayout},
		"clock before epoch":    {func(c *Config) { c.Clock = newFakeClock(testEpoch.Add(-time.Second)) }, ErrClockBeforeEpoch},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := base
			tc.mod(&cfg)
			g, err := New(cfg)
			assert.Nil(t, g)
			assert.ErrorIs(t, err, tc.want)
		})
	}
}

func TestDecodeRoundTrip(t *testing.T) {
	clk := newFakeClock(testEpoch.Add(1234567 * time.Millisecond))
	g := newGen(t, Config{WorkerID: 777, Clock: clk})
	for i := range 10 {
		id := mustNext(t, g)
		p := Decode(id, defaultLayout)
		assert.Equal(t, int64(1234567), p.Millis)
		assert.Equal(t, int64(777), p.WorkerID)
		assert.Equal(t, int64(i), p.Sequence)
		assert.Zero(t, p.ClockSeq)
		assert.Greater(t, id, int64(0))
	}
	// The layout's extreme values survive a round trip.
	id := int64(MaxTime)<<TimeShift | 31<<17 | 31<<12 | 4095
	assert.Equal(t, Parts{Millis: MaxTime, ClockSeq: 31, WorkerID: 31, Sequence: 4095}, Decode(id, csLayout))
}

// TestSequenceExhaustion: on a clock that stands still, the 4097th ID of a
// millisecond waits (through the clock) for the next one and starts the
// sequence over.
func TestSequenceExhaustion(t *testing.T) {
	start := testEpoch.Add(time.Hour)
	clk := newFakeClock(start)
	g := newGen(t, Config{WorkerID: 1, Clock: clk})
	first := mustNext(t, g)
	prev := first
	for range 4095 {
		id := mustNext(t, g)
		require.Greater(t, id, prev)
		prev = id
	}
	p := Decode(prev, defaultLayout)
	require.Equal(t, int64(4095), p.Sequence)
	require.Zero(t, clk.Slept(), "no wait before the sequence runs out")

	id := mustNext(t, g)
	assert.Greater(t, id, prev)
	p = Decode(id, defaultLayout)
	assert.Equal(t, Decode(first, defaultLayout).Millis+1, p.Millis)
	assert.Zero(t, p.Sequence)
	assert.Equal(t, time.Millisecond, clk.Slept(), "waited exactly to the next millisecond")
}

// TestRollbackPolicies drives each policy through rollbacks of 1 ms, 5 ms,
// 500 ms and 10 s on an injected clock.
func TestRollbackPolicies(t *testing.T) {
	type outcome int
	const (
		borrowed outcome = iota // same frozen millisecond, next sequence, no wait
		waited                  // slept until the clock caught up, then continued the sequence
		errored                 // ErrClockBackwards at once
		bumped                  // clock sequence bumped, time field moved back
	)
	policies := map[string]struct {
		p      Policy
		layout Layout
		want   map[time.Duration]outcome
	}{
		"clamp 1s fuse": {Policy{Kind: Clamp, Limit: time.Second}, defaultLayout, map[time.Duration]outcome{
			time.Millisecond: borrowed, 5 * time.Millisecond: borrowed, 500 * time.Millisecond: borrowed, 10 * time.Second: errored}},
		"clamp 20s fuse": {Policy{Kind: Clamp, Limit: 20 * time.Second}, defaultLayout, map[time.Duration]outcome{
			time.Millisecond: borrowed, 5 * time.Millisecond: borrowed, 500 * time.Millisecond: borrowed, 10 * time.Second: borrowed}},
		"wait 5ms": {Policy{Kind: Wait, Limit: 5 * time.Millisecond}, defaultLayout, map[time.Duration]outcome{
			time.Millisecond: waited, 5 * time.Millisecond: waited, 500 * time.Millisecond: errored, 10 * time.Second: errored}},
		"reject": {Policy{Kind: Reject}, defaultLayout, map[time.Duration]outcome{
			time.Millisecond: errored, 5 * time.Millisecond: errored, 500 * time.Millisecond: errored, 10 * time.Second: errored}},
		"clock sequence": {Policy{Kind: ClockSequence}, csLayout, map[time.Duration]outcome{
			time.Millisecond: bumped, 5 * time.Millisecond: bumped, 500 * time.Millisecond: bumped, 10 * time.Second: bumped}},
	}
	for name, pc := range policies {
		for back, want := range pc.want {
			t.Run(name+"/"+back.String(), func(t *testing.T) {
				start := testEpoch.Add(time.Hour)
				clk := newFakeClock(start)
				g := newGen(t, Config{WorkerID: 3, Clock: clk, Policy: pc.p, Layout: pc.layout})
				before := mustNext(t, g)
				lastMs := Decode(before, pc.layout).Millis
				clk.Add(-back)
				id, err := g.NextID()
				switch want {
				case borrowed:
					require.NoError(t, err)
					p := Decode(id, pc.layout)
					assert.Equal(t, lastMs, p.Millis, "time field stays frozen")
					assert.Equal(t, id, before+1, "next sequence number")
					assert.Zero(t, clk.Slept())
				case waited:
					require.NoError(t, err)
					assert.Equal(t, back, clk.Slept(), "slept until the clock caught up, no longer")
					assert.Equal(t, before+1, id)
				case errored:
					assert.ErrorIs(t, err, ErrClockBackwards)
					assert.Zero(t, id)
					assert.Zero(t, clk.Slept(), "no stall before the error")
					// Once the clock is past the last ID again, issuing resumes.
					clk.Add(back + time.Millisecond)
					id = mustNext(t, g)
					assert.Greater(t, id, before)
				case bumped:
					require.NoError(t, err)
					p := Decode(id, pc.layout)
					assert.Equal(t, int64(1), p.ClockSeq)
					assert.Equal(t, lastMs-back.Milliseconds(), p.Millis, "time field follows the clock back")
					assert.Less(t, id, before, "the documented exception to order")
					assert.Zero(t, clk.Slept())
				}
			})
		}
	}
}

// TestWaitPolicyClockStuck: a wait that does not see the clock catch up errors
// after waiting twice the rollback, never longer.
func TestWaitPolicyClockStuck(t *testing.T) {
	clk := newFakeClock(testEpoch.Add(time.Hour))
	g := newGen(t, Config{Clock: clk, Policy: Policy{Kind: Wait, Limit: 5 * time.Millisecond}})
	mustNext(t, g)
	clk.Add(-4 * time.Millisecond)
	clk.frozen = true
	_, err := g.NextID()
	assert.ErrorIs(t, err, ErrClockBackwards)
	assert.Equal(t, 8*time.Millisecond, clk.Slept())
}

// TestClampExhaustedInFrozenMillisecond: during a 500 ms rollback the clamp
// spends the frozen millisecond's sequence, then waits for the clock to pass
// it: about the size of the rollback, never more than the fuse.
func TestClampExhaustedInFrozenMillisecond(t *testing.T) {
	clk := newFakeClock(testEpoch.Add(time.Hour))
	g := newGen(t, Config{Clock: clk, Policy: Policy{Kind: Clamp, Limit: time.Second}})
	first := mustNext(t, g)
	clk.Add(-500 * time.Millisecond)
	prev := first
	for range 4095 { // the rest of the frozen millisecond
		id := mustNext(t, g)
		require.Equal(t, prev+1, id)
		prev = id
	}
	require.Zero(t, clk.Slept())
	id := mustNext(t, g)
	assert.Greater(t, id, prev)
	assert.Equal(t, Decode(first, defaultLayout).Millis+1, Decode(id, defaultLayout).Millis)
	assert.Equal(t, 501*time.Millisecond, clk.Slept(), "waited until the clock passed the frozen millisecond")
}

// TestRepeatedRollbacks: a clock that steps back again and again never makes
// the clamp repeat or reorder an ID.
func TestRepeatedRollbacks(t *testing.T) {
	clk := newFakeClock(testEpoch.Add(time.Hour))
	g := newGen(t, Config{Clock: clk, Policy: Policy{Kind: Clamp, Limit: time.Second}})
	prev := mustNext(t, g)
	steps := []time.Duration{time.Millisecond, -time.Millisecond, -5 * time.Millisecond, 2 * time.Millisecond,
		-500 * time.Millisecond, 300 * time.Millisecond, -100 * time.Millisecond, time.Second}
	for round := range 50 {
		for _, s := range steps {
			clk.Add(s)
			for range 100 + round {
				id := mustNext(t, g)
				require.Greater(t, id, prev)
				prev = id
			}
		}
	}
}

// TestClockSequenceExhausted: the clock-sequence policy errors, rather than
// wrapping, when its field has no value left.
func TestClockSequenceExhausted(t *testing.T) {
	clk := newFakeClock(testEpoch.Add(time.Hour))
	g := newGen(t, Config{Clock: clk, Policy: Policy{Kind: ClockSequence}, Layout: csLayout})
	seen := map[int64]bool{}
	for bump := range 32 {
		for range 10 {
			id := mustNext(t, g)
			require.False(t, seen[id], "duplicate %d", id)
			seen[id] = true
			assert.Equal(t, int64(bump), Decode(id, csLayout).ClockSeq)
		}
		clk.Add(-3 * time.Millisecond) // overlapping the time already used
	}
	_, err := g.NextID()
	assert.ErrorIs(t, err, ErrClockSequenceExhausted)
}

func TestClockBeforeEpochAtRuntime(t *testing.T) {
	clk := newFakeClock(testEpoch.Add(time.Second))
	g := newGen(t, Config{Clock: clk})
	mustNext(t, g)
	clk.Add(-2 * time.Second)
	_, err := g.NextID()
	assert.ErrorIs(t, err, ErrClockBeforeEpoch)
}

// stepClock advances one millisecond every perMs reads, without sleeping:
// the clock of a generator running below the layout's ceiling.
type stepClock struct {
	base  time.Time
	reads atomic.Int64
	perMs int64
}

func (c *stepClock) Now() time.Time {
	n := c.reads.Add(1)
	return c.base.Add(time.Duration(n/c.perMs) * time.Millisecond)
}

func (c *stepClock) Sleep(time.Duration) {}

// realAndStepClocks makes, for each test, the clocks every generator should
// work on: the default monotonic one, the wall clock, and a step clock that
// advances every perMs reads.
func realAndStepClocks(perMs int64) map[string]func() Clock {
	return map[string]func() Clock{
		"monotonic": func() Clock { return nil },
		"wall":      func() Clock { return WallClock{} },
		"step":      func() Clock { return &stepClock{base: testEpoch.Add(time.Hour), perMs: perMs} },
	}
}

// TestUniqueAndOrderedMillions issues millions of IDs on each kind of clock and
// checks that every one is greater than the one before.
func TestUniqueAndOrderedMillions(t *testing.T) {
	n := 3_000_000
	if testing.Short() {
		n = 300_000
	}
	for name, mk := range realAndStepClocks(1000) {
		t.Run(name, func(t *testing.T) {
			g := newGen(t, Config{WorkerID: 5, Clock: mk()})
			prev := int64(-1)
			for range n {
				id := mustNext(t, g)
				if id <= prev {
					t.Fatalf("id %d after %d", id, prev)
				}
				prev = id
			}
		})
	}
}

// TestConcurrentUniqueAndPerGoroutineOrder: many goroutines share one
// generator; no ID repeats and each goroutine sees its IDs increase. Run with
// -race.
func TestConcurrentUniqueAndPerGoroutineOrder(t *testing.T) {
	const goroutines = 16
	per := 100_000
	if testing.Short() {
		per = 10_000
	}
	for name, mk := range realAndStepClocks(50) {
		t.Run(name, func(t *testing.T) {
			g := newGen(t, Config{WorkerID: 9, Clock: mk()})
			out := make([][]int64, goroutines)
			var wg sync.WaitGroup
			for i := range goroutines {
				wg.Go(func() {
					ids := make([]int64, per)
					for j := range ids {
						id, err := g.NextID()
						if err != nil {
							t.Error(err)
							return
						}
						ids[j] = id
					}
					out[i] = ids
				})
			}
			wg.Wait()
			seen := make(map[int64]struct{}, goroutines*per)
			for _, ids := range out {
				for j, id := range ids {
					if j > 0 && id <= ids[j-1] {
						t.Fatalf("goroutine saw %d after %d", id, ids[j-1])
					}
					if _, dup := seen[id]; dup {
						t.Fatalf("duplicate id %d", id)
					}
					seen[id] = struct{}{}
				}
			}
			require.Len(t, seen, goroutines*per)
		})
	}
}

// jumpyClock moves 4 ms forward every 1,000 reads and 6 ms back every 2,000
// (offset by 500): a clock that NTP keeps yanking, shared by many goroutines.
type jumpyClock struct {
	base  time.Time
	reads atomic.Int64
}

func (c *jumpyClock) Now() time.Time {
	n := c.reads.Add(1)
	off := time.Duration(n/1000*4-(n+500)/2000*6) * time.Millisecond
	return c.base.Add(off)
}

func (c *jumpyClock) Sleep(time.Duration) { c.reads.Add(100) }

func TestConcurrentRollbacksClamp(t *testing.T) {
	const goroutines, per = 8, 20_000
	g := newGen(t, Config{WorkerID: 1, Clock: &jumpyClock{base: testEpoch.Add(time.Hour)},
		Policy: Policy{Kind: Clamp, Limit: time.Second}})
	var mu sync.Mutex
	seen := make(map[int64]struct{}, goroutines*per)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			ids := make([]int64, 0, per)
			for range per {
				id, err := g.NextID()
				if err != nil {
					t.Error(err)
					return
				}
				if len(ids) > 0 && id <= ids[len(ids)-1] {
					t.Errorf("order: %d after %d", id, ids[len(ids)-1])
					return
				}
				ids = append(ids, id)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				seen[id] = struct{}{}
			}
		})
	}
	wg.Wait()
	assert.Len(t, seen, goroutines*per)
}

// TestWorkersNeverCollide: two generators on one clock with different worker
// ids, interleaved, never produce the same ID.
func TestWorkersNeverCollide(t *testing.T) {
	clk := &stepClock{base: testEpoch.Add(time.Hour), perMs: 700}
	a := newGen(t, Config{WorkerID: 1, Clock: clk})
	b := newGen(t, Config{WorkerID: 2, Clock: clk})
	seen := map[int64]bool{}
	for range 200_000 {
		for _, g := range []*Generator{a, b} {
			id := mustNext(t, g)
			require.False(t, seen[id])
			seen[id] = true
		}
	}
}

func TestMonotonicClockTracksWall(t *testing.T) {
	c := NewMonotonicClock()
	d := time.Until(c.Now())
	assert.Less(t, d.Abs(), time.Second, "anchored to the wall clock")
	assert.Equal(t, "clamp", Clamp.String())
	assert.True(t, errors.Is(ErrClockBackwards, ErrClockBackwards))
}

func BenchmarkNextID(b *testing.B) {
	g := newGen(b, Config{WorkerID: 1})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.NextID(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNextIDParallel(b *testing.B) {
	g := newGen(b, Config{WorkerID: 1})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.NextID(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkNextIDRaw measures the cost below the ceiling: a clock that moves
// one millisecond every 4,096 reads never makes the generator wait.
func BenchmarkNextIDRaw(b *testing.B) {
	g := newGen(b, Config{WorkerID: 1, Clock: &stepClock{base: testEpoch.Add(time.Hour), perMs: 4096}})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.NextID(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestContentionIsNotARollback: goroutines racing on one generator must never
// see a rollback on a clock that does not go back, or the reject policy would
// fail at random under load.
func TestContentionIsNotARollback(t *testing.T) {
	for name, clk := range map[string]Clock{"monotonic": nil, "wall": WallClock{}} {
		t.Run(name, func(t *testing.T) {
			g := newGen(t, Config{WorkerID: 2, Clock: clk, Policy: Policy{Kind: Reject}})
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					for range 20_000 {
						if _, err := g.NextID(); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// offsetClock is the real wall clock, minus an offset that a test changes.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) Now() time.Time        { return time.Now().Add(-time.Duration(c.off.Load())) }
func (c *offsetClock) Sleep(d time.Duration) { WallClock{}.Sleep(d) }

// TestWaitPolicyRealClock: on the real clock, a rollback of 1.2 ms under
// WaitRollback(5ms) is waited out, not refused (the real clock's Sleep must
// really wait the short durations it is asked to).
func TestWaitPolicyRealClock(t *testing.T) {
	for range 50 {
		c := &offsetClock{}
		g := newGen(t, Config{Clock: c, Policy: Policy{Kind: Wait, Limit: 5 * time.Millisecond}})
		before := mustNext(t, g)
		c.off.Store(int64(1200 * time.Microsecond))
		id, err := g.NextID()
		require.NoError(t, err)
		require.Greater(t, id, before)
	}
}

// TestRealSleepWaits: the real clocks' Sleep waits at least what it is asked,
// short or long, and not much more.
func TestRealSleepWaits(t *testing.T) {
	for _, d := range []time.Duration{50 * time.Microsecond, 900 * time.Microsecond, 3 * time.Millisecond} {
		start := time.Now()
		WallClock{}.Sleep(d)
		got := time.Since(start)
		assert.GreaterOrEqual(t, got, d)
		assert.Less(t, got, d+250*time.Millisecond, "a generous upper bound, for a loaded machine")
	}
}

// TestStepDuringWait: the clock steps back an hour while NextID waits for the
// next millisecond (its sequence used up). No policy may turn that wait into
// an hour: each decides again on the rollback it now sees.
func TestStepDuringWait(t *testing.T) {
	for name, c := range map[string]struct {
		p      Policy
		layout Layout
		bump   bool
	}{
		"clamp":          {Policy{Kind: Clamp, Limit: time.Second}, defaultLayout, false},
		"wait":           {Policy{Kind: Wait, Limit: 5 * time.Millisecond}, defaultLayout, false},
		"reject":         {Policy{Kind: Reject}, defaultLayout, false},
		"clock sequence": {Policy{Kind: ClockSequence}, csLayout, true},
	} {
		t.Run(name, func(t *testing.T) {
			clk := newFakeClock(testEpoch.Add(2 * time.Hour))
			g := newGen(t, Config{Clock: clk, Policy: c.p, Layout: c.layout})
			for range 4096 {
				mustNext(t, g)
			}
			// The next NextID reads the clock (same millisecond: exhausted),
			// then waits; its first read in the wait sees the step.
			clk.stepAfter(2, -time.Hour)
			id, err := g.NextID()
			assert.Less(t, clk.Slept(), 10*time.Millisecond, "no hour-long sleep")
			if c.bump {
				require.NoError(t, err)
				assert.Equal(t, int64(1), Decode(id, c.layout).ClockSeq)
			} else {
				assert.ErrorIs(t, err, ErrClockBackwards)
			}
		})
	}
}

// TestClampWaitBoundedOnStuckClock: a clock that does not move while slept
// on cannot hold NextID beyond the fuse.
func TestClampWaitBoundedOnStuckClock(t *testing.T) {
	clk := newFakeClock(testEpoch.Add(time.Hour))
	g := newGen(t, Config{Clock: clk, Policy: Policy{Kind: Clamp, Limit: 50 * time.Millisecond}})
	for range 4096 {
		mustNext(t, g)
	}
	clk.frozen = true
	_, err := g.NextID()
	assert.ErrorIs(t, err, ErrClockBackwards)
	assert.LessOrEqual(t, clk.Slept(), 50*time.Millisecond+waitSlack+time.Millisecond)
}

// coarseClock is the real clock truncated to 4 ms ticks: it never goes back,
// but waiting for the next millisecond takes up to 4 ms.
type coarseClock struct{}

func (coarseClock) Now() time.Time        { return time.Now().Truncate(4 * time.Millisecond) }
func (coarseClock) Sleep(d time.Duration) { WallClock{}.Sleep(d) }

// TestCoarseClock: a clock that ticks every 4 ms never makes any policy
// report a rollback.
func TestCoarseClock(t *testing.T) {
	for _, p := range []Policy{{Kind: Clamp, Limit: time.Second}, {Kind: Wait, Limit: 5 * time.Millisecond},
		{Kind: Reject}, {Kind: ClockSequence}} {
		t.Run(p.Kind.String(), func(t *testing.T) {
			l := defaultLayout
			if p.Kind == ClockSequence {
				l = csLayout
			}
			g := newGen(t, Config{Clock: coarseClock{}, Policy: p, Layout: l})
			prev := int64(0)
			for range 100_000 { // at least 25 ticks' worth: the sequence runs out in most
				id, err := g.NextID()
				if err != nil || id <= prev {
					t.Fatalf("id %d after %d: %v", id, prev, err)
				}
				prev = id
			}
		})
	}
}

// TestBurstLeadBounded: on a clock that stands still, a burst runs ahead
// millisecond by millisecond without waiting until it leads by MaxLead,
// then waits for the clock; IDs stay strictly increasing.
func TestBurstLeadBounded(t *testing.T) {
	start := testEpoch.Add(time.Hour)
	clk := newFakeClock(start)
	g := newGen(t, Config{WorkerID: 4, Clock: clk, MaxLead: 5 * time.Millisecond})
	first := mustNext(t, g)
	base := Decode(first, defaultLayout).Millis
	prev := first
	for i := 1; i < 6*4096; i++ { // milliseconds base..base+5: a lead of 5 ms
		id := mustNext(t, g)
		require.Greater(t, id, prev)
		prev = id
		p := Decode(id, defaultLayout)
		require.Equal(t, base+int64(i/4096), p.Millis, "id %d", i)
		require.LessOrEqual(t, p.Millis-base, int64(5), "the lead never passes 5 ms")
	}
	require.Zero(t, clk.Slept(), "no wait while within the lead")
	id := mustNext(t, g) // the lead is used up: wait until the clock is back within it
	assert.Greater(t, id, prev)
	assert.Equal(t, base+6, Decode(id, defaultLayout).Millis)
	assert.Equal(t, time.Millisecond, clk.Slept(), "the clock had to move one millisecond")
}

// TestBurstMillion: a burst of 1M IDs on the real clock never leads it by
// more than the lead, and every ID is greater than the one before.
func TestBurstMillion(t *testing.T) {
	const lead = 300 * time.Millisecond // room for 1M IDs: 245 ms of 4096
	g := newGen(t, Config{WorkerID: 4, MaxLead: lead})
	prev := int64(0)
	maxAhead := int64(0)
	start := time.Now()
	for range 1_000_000 {
		id, err := g.NextID()
		if err != nil {
			t.Fatal(err)
		}
		if id <= prev {
			t.Fatalf("%d after %d", id, prev)
		}
		prev = id
		if id&4095 == 0 { // sample once per millisecond of IDs: the check costs a clock read
			now, _ := g.millis()
			maxAhead = max(maxAhead, Decode(id, defaultLayout).Millis-now)
		}
	}
	elapsed := time.Since(start)
	assert.LessOrEqual(t, maxAhead, lead.Milliseconds())
	t.Logf("1M IDs in %v (%.1fx the strict ceiling of 4096/ms), led the clock by at most %dms",
		elapsed, (1e6/4096*float64(time.Millisecond))/float64(elapsed), maxAhead)
}

// TestBurstAndRollback: with a lead, a step back within the lead is no
// rollback; one beyond it meets the policy, judged on the part beyond the
// lead.
func TestBurstAndRollback(t *testing.T) {
	clk := newFakeClock(testEpoch.Add(time.Hour))
	g := newGen(t, Config{WorkerID: 4, Clock: clk, MaxLead: 10 * time.Millisecond,
		Policy: Policy{Kind: Clamp, Limit: 100 * time.Millisecond}})
	prev := mustNext(t, g)
	clk.Add(-8 * time.Millisecond) // within the lead
	id := mustNext(t, g)
	assert.Equal(t, prev+1, id)
	clk.Add(-50 * time.Millisecond) // 58 ms behind: 48 beyond the lead, within the fuse
	id2 := mustNext(t, g)
	assert.Equal(t, id+1, id2)
	clk.Add(-time.Second) // far beyond
	_, err := g.NextID()
	assert.ErrorIs(t, err, ErrClockBackwards)
	assert.Zero(t, clk.Slept())
}

func TestBurstLeadValidation(t *testing.T) {
	for _, lead := range []time.Duration{-time.Millisecond, time.Microsecond, 2 * time.Hour} {
		_, err := New(Config{Layout: defaultLayout, EpochMilli: testEpoch.UnixMilli(), MaxLead: lead,
			Policy: Policy{Kind: Clamp, Limit: time.Second}})
		assert.ErrorIs(t, err, ErrInvalidPolicy, "%v", lead)
	}
}

// TestBurstConcurrent: goroutines sharing a bursting generator get unique,
// per-goroutine increasing IDs. Run with -race.
func TestBurstConcurrent(t *testing.T) {
	g := newGen(t, Config{WorkerID: 4, MaxLead: 20 * time.Millisecond})
	const goroutines, per = 8, 50_000
	out := make([][]int64, goroutines)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			for range per {
				id, err := g.NextID()
				if err != nil {
					t.Error(err)
					return
				}
				if n := len(out[i]); n > 0 && id <= out[i][n-1] {
					t.Errorf("order: %d after %d", id, out[i][n-1])
					return
				}
				out[i] = append(out[i], id)
			}
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, ids := range out {
		for _, id := range ids {
			require.False(t, seen[id])
			seen[id] = true
		}
	}
	assert.Len(t, seen, goroutines*per)
}

// BenchmarkNextIDBurst: the real clock with a lead of a second: the
// generator never waits, so this is its cost per ID.
func BenchmarkNextIDBurst(b *testing.B) {
	g := newGen(b, Config{WorkerID: 1, MaxLead: time.Second})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.NextID(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestNextIDs: runs of IDs from NextIDs interleave with NextID calls and
// other goroutines without a repeat, each run increasing, and a burst of 1M
// in one call stays within its lead.
func TestNextIDs(t *testing.T) {
	t.Run("frozen clock waits like NextID", func(t *testing.T) {
		clk := newFakeClock(testEpoch.Add(time.Hour))
		g := newGen(t, Config{WorkerID: 6, Clock: clk})
		ids := make([]int64, 10_000)
		require.NoError(t, g.NextIDs(ids))
		for i := 1; i < len(ids); i++ {
			require.Greater(t, ids[i], ids[i-1])
		}
		assert.Equal(t, 2*time.Millisecond, clk.Slept(), "10,000 IDs span three milliseconds")
		assert.Equal(t, int64(6), Decode(ids[9999], defaultLayout).WorkerID)
	})
	t.Run("concurrent with NextID", func(t *testing.T) {
		g := newGen(t, Config{WorkerID: 6})
		var mu sync.Mutex
		seen := map[int64]bool{}
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				var got []int64
				for range 200 {
					if i%2 == 0 {
						run := make([]int64, 1+i*37)
						if err := g.NextIDs(run); err != nil {
							t.Error(err)
							return
						}
						for j := 1; j < len(run); j++ {
							if run[j] <= run[j-1] {
								t.Errorf("run not increasing")
								return
							}
						}
						got = append(got, run...)
					} else {
						id, err := g.NextID()
						if err != nil {
							t.Error(err)
							return
						}
						got = append(got, id)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				for _, id := range got {
					if seen[id] {
						t.Errorf("duplicate %d", id)
					}
					seen[id] = true
				}
			})
		}
		wg.Wait()
	})
	t.Run("burst of 1M", func(t *testing.T) {
		const lead = 300 * time.Millisecond
		g := newGen(t, Config{WorkerID: 6, MaxLead: lead})
		ids := make([]int64, 1_000_000)
		start := time.Now()
		require.NoError(t, g.NextIDs(ids))
		elapsed := time.Since(start)
		now, _ := g.millis()
		for i := 1; i < len(ids); i++ {
			require.Greater(t, ids[i], ids[i-1])
		}
		assert.LessOrEqual(t, Decode(ids[len(ids)-1], defaultLayout).Millis-now, lead.Milliseconds())
		t.Logf("1M IDs in %v (%.0fx the strict ceiling of 4096/ms)", elapsed, (1e6/4096*float64(time.Millisecond))/float64(elapsed))
	})
	t.Run("rollback goes through the policy", func(t *testing.T) {
		clk := newFakeClock(testEpoch.Add(time.Hour))
		g := newGen(t, Config{WorkerID: 6, Clock: clk, Policy: Policy{Kind: Reject}})
		mustNext(t, g)
		clk.Add(-time.Second)
		ids := make([]int64, 3)
		assert.ErrorIs(t, g.NextIDs(ids), ErrClockBackwards)
	})
}

func BenchmarkNextIDsBurst(b *testing.B) {
	g := newGen(b, Config{WorkerID: 1, MaxLead: LeadLimit})
	ids := make([]int64, 4096)
	b.ReportAllocs()
	for b.Loop() {
		if err := g.NextIDs(ids); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ids)), "ns/id")
}

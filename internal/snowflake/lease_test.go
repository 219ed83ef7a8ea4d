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

// The hooks a worker lease drives: the limit (its promise), a floor (the
// previous holder's promise), Stop and Switch.

func field(id int64) int64 { return id >> TimeShift }

func TestLimitFences(t *testing.T) {
	clk := newFakeClock(testEpoch.Add(time.Hour))
	now := clk.Now().Sub(testEpoch).Milliseconds()
	g := newGen(t, Config{WorkerID: 3, Clock: clk, Limit: now + 2})
	var last int64
	for range 3 { // now, now+1, now+2: inside the promise
		id := mustNext(t, g)
		assert.LessOrEqual(t, field(id), now+2)
		last = id
		clk.Add(time.Millisecond)
	}
	_, err := g.NextID()
	require.ErrorIs(t, err, ErrFenced, "a millisecond past the promise")
	assert.Contains(t, err.Error(), "past")
	// The clock is at now+3: any new ID opens a millisecond past the
	// promise. NextIDs agrees.
	require.ErrorIs(t, g.NextIDs(make([]int64, 4)), ErrFenced)

	g.SetLimit(now + 10) // a renewal was acknowledged
	id := mustNext(t, g)
	assert.Greater(t, id, last)
	assert.Equal(t, now+3, field(id))
}

// TestLimitWithinMillisecond: the limit is checked when an ID opens a
// millisecond; the rest of an open millisecond at the limit stays usable.
func TestLimitWithinMillisecond(t *testing.T) {
	clk := newFakeClock(testEpoch.Add(time.Hour))
	now := clk.Now().Sub(testEpoch).Milliseconds()
	g := newGen(t, Config{WorkerID: 3, Clock: clk, Limit: now})
	for range 4096 {
		assert.Equal(t, now, field(mustNext(t, g)))
	}
	// The millisecond is used up: the next one is past the limit. This must
	// be an error at once, not a wait for a clock that cannot help.
	_, err := g.NextID()
	require.ErrorIs(t, err, ErrFenced)
	assert.Zero(t, clk.Slept(), "no wait")
}

// TestLimitBoundsBurst: a burst may lead the clock, but never past the limit.
func TestLimitBoundsBurst(t *testing.T) {
	clk := newFakeClock(testEpoch.Add(time.Hour))
	now := clk.Now().Sub(testEpoch).Milliseconds()
	g := newGen(t, Config{WorkerID: 3, Clock: clk, MaxLead: time.Second, Limit: now + 5})
	ids := make([]int64, 6*4096)
	require.NoError(t, g.NextIDs(ids), "six milliseconds fit: now..now+5")
	assert.Equal(t, now+5, field(ids[len(ids)-1]))
	_, err := g.NextID()
	require.ErrorIs(t, err, ErrFenced, "the lead would allow more; the promise does not")
}

func TestFloor(t *testing.T) {
	clk := newFakeClock(testEpoch.Add(time.Hour))
	now := clk.Now().Sub(testEpoch).Milliseconds()
	t.Run("below the clock", func(t *testing.T) {
		g := newGen(t, Config{WorkerID: 3, Clock: clk, Floor: now - 100})
		assert.Equal(t, now, field(mustNext(t, g)))
	})
	t.Run("at the clock", func(t *testing.T) {
		g := newGen(t, Config{WorkerID: 3, Clock: clk, Floor: now})
		id := mustNext(t, g)
		assert.Equal(t, now, field(id))
		assert.Equal(t, int64(0), Decode(id, defaultLayout).Sequence)
	})
	t.Run("ahead of the clock", func(t *testing.T) {
		// The clamp policy waits (on the injected clock) for the floor.
		g := newGen(t, Config{WorkerID: 3, Clock: clk, Floor: now + 20})
		assert.Equal(t, now+20, field(mustNext(t, g)))
	})
	t.Run("invalid", func(t *testing.T) {
		_, err := New(Config{Layout: defaultLayout, EpochMilli: testEpoch.UnixMilli(),
			Policy: Policy{Kind: Reject}, Floor: -1})
		require.ErrorIs(t, err, ErrInvalidPolicy)
		_, err = New(Config{Layout: defaultLayout, EpochMilli: testEpoch.UnixMilli(),
			Policy: Policy{Kind: Reject}, Limit: MaxTime + 1})
		require.ErrorIs(t, err, ErrInvalidPolicy)
	})
}

var errTestStop = errors.New("stopped by the test")

// TestStopUnderLoad: Stop returns the last ID issued, every ID any goroutine
// got is at most that, and no ID comes after.
func TestStopUnderLoad(t *testing.T) {
	g := newGen(t, Config{WorkerID: 5})
	var (
		wg      sync.WaitGroup
		maxSeen atomic.Int64
		after   atomic.Int64 // IDs returned after a goroutine saw the stop error
	)
	for range 8 {
		wg.Go(func() {
			stopped := false
			for range 200_000 {
				id, err := g.NextID()
				if err != nil {
					require.ErrorIs(t, err, errTestStop)
					stopped = true
					continue
				}
				if stopped {
					after.Add(1)
				}
				for {
					m := maxSeen.Load()
					if id <= m || maxSeen.CompareAndSwap(m, id) {
						break
					}
				}
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	last := g.Stop(errTestStop)
	wg.Wait()
	assert.Equal(t, last, maxSeen.Load(), "Stop reports exactly the last ID issued")
	assert.Zero(t, after.Load())
	_, err := g.NextID()
	require.ErrorIs(t, err, errTestStop)
	require.ErrorIs(t, g.NextIDs(make([]int64, 3)), errTestStop)
	assert.Equal(t, field(last), g.Last())
	assert.Equal(t, int64(5), g.WorkerID(), "the stop bit hides no worker bits")
}

// TestSwitchUnderLoad: goroutines issue while the worker id changes several
// times. Every ID of a worker is smaller than every ID of the next (so no ID
// pairs a new worker id with a time field taken under the old one), each
// goroutine sees increasing IDs, and none repeats.
func TestSwitchUnderLoad(t *testing.T) {
	// The step clock moves often enough that a goroutine waiting out a
	// millisecond sees it move.
	for name, clk := range realAndStepClocks(16) {
		t.Run(name, func(t *testing.T) {
			g := newGen(t, Config{WorkerID: 1, Clock: clk()})
			var (
				wg   sync.WaitGroup
				stop atomic.Bool
				mu   sync.Mutex
				all  []int64
			)
			for range 6 {
				wg.Go(func() {
					var mine []int64
					prev := int64(-1)
					for !stop.Load() {
						id, err := g.NextID()
						if !assert.NoError(t, err) {
							break
						}
						if !assert.Greater(t, id, prev) {
							break
						}
						prev = id
						mine = append(mine, id)
					}
					mu.Lock()
					all = append(all, mine...)
					mu.Unlock()
				})
			}
			workers := []int64{1, 700, 2, 1023, 0}
			for _, w := range workers[1:] {
				time.Sleep(5 * time.Millisecond)
				require.NoError(t, g.Switch(w, 0, MaxTime))
				assert.Equal(t, w, g.WorkerID())
			}
			time.Sleep(5 * time.Millisecond)
			stop.Store(true)
			wg.Wait()

			lo, hi := map[int64]int64{}, map[int64]int64{}
			seen := make(map[int64]bool, len(all))
			for _, id := range all {
				require.False(t, seen[id], "duplicate %d", id)
				seen[id] = true
				w := Decode(id, defaultLayout).WorkerID
				if v, ok := lo[w]; !ok || id < v {
					lo[w] = id
				}
				hi[w] = max(hi[w], id)
			}
			for i := 1; i < len(workers); i++ {
				a, b := workers[i-1], workers[i]
				if _, ok := lo[b]; !ok {
					continue // no goroutine got to issue under b: nothing to order
				}
				assert.Less(t, hi[a], lo[b], "every ID of worker %d is below every ID of worker %d", a, b)
			}
		})
	}
}

// TestSwitchFloorAndStop: a switch honours the new slot's floor, ends a
// stop, and moves the limit.
func TestSwitchFloorAndStop(t *testing.T) {
	clk := newFakeClock(testEpoch.Add(time.Hour))
	now := clk.Now().Sub(testEpoch).Milliseconds()
	g := newGen(t, Config{WorkerID: 1, Clock: clk, Limit: now + 1})
	first := mustNext(t, g)
	g.Stop(errTestStop)
	_, err := g.NextID()
	require.ErrorIs(t, err, errTestStop)

	require.NoError(t, g.Switch(9, now+3, now+50))
	clk.Add(10 * time.Millisecond)
	id := mustNext(t, g)
	assert.Greater(t, id, first)
	assert.Equal(t, int64(9), Decode(id, defaultLayout).WorkerID)
	assert.Equal(t, now+10, field(id))
	assert.Equal(t, now+50, g.Limit())

	// A floor ahead of the clock: the next ID waits for it (the clamp
	// policy, on the injected clock).
	require.NoError(t, g.Switch(10, now+30, now+50))
	id = mustNext(t, g)
	assert.Equal(t, now+30, field(id))

	require.ErrorIs(t, g.Switch(1024, 0, 0), ErrInvalidWorkerID)
	require.ErrorIs(t, g.Switch(1, -1, 0), ErrInvalidPolicy)
}

// TestSameWorkerSwitchNoRepeat: switching to the worker id already in use
// (a re-registration) never reissues an ID of the millisecond in hand.
func TestSameWorkerSwitchNoRepeat(t *testing.T) {
	clk := newFakeClock(testEpoch.Add(time.Hour))
	g := newGen(t, Config{WorkerID: 4, Clock: clk})
	a := mustNext(t, g)
	require.NoError(t, g.Switch(4, 0, MaxTime))
	clk.Add(time.Millisecond)
	b := mustNext(t, g)
	assert.Greater(t, b, a)
}

// TestCloseIsFinal: after Close, a Switch (a background lease that took a
// slot just then) fails, and the generator stays closed; a Stop does not
// replace Close's error.
func TestCloseIsFinal(t *testing.T) {
	g := newGen(t, Config{WorkerID: 1})
	mustNext(t, g)
	g.Close(ErrClosed)
	require.ErrorIs(t, g.Switch(2, 0, MaxTime), ErrClosed)
	g.Stop(errTestStop)
	_, err := g.NextID()
	require.ErrorIs(t, err, ErrClosed)
	assert.Equal(t, int64(1), g.WorkerID())
}

// TestHighestAcrossBump: a clock-sequence bump moves the time field back;
// Highest still reports the highest millisecond issued, which is what a
// lease must release.
func TestHighestAcrossBump(t *testing.T) {
	clk := newFakeClock(testEpoch.Add(time.Hour))
	g := newGen(t, Config{Layout: csLayout, WorkerID: 1, Clock: clk, Policy: Policy{Kind: ClockSequence}})
	top := field(mustNext(t, g))
	clk.Add(-2 * time.Second)
	id := mustNext(t, g)
	require.Less(t, field(id), top, "the bump moved the time field back")
	assert.Equal(t, top, g.Highest())
	g.Close(ErrClosed)
	assert.Equal(t, top, g.Highest())
}

// TestBumpNeverBelowFloor: a clock that goes back below the worker id's
// floor is refused under the clock-sequence policy: the previous holder
// issued there.
func TestBumpNeverBelowFloor(t *testing.T) {
	clk := newFakeClock(testEpoch.Add(time.Hour))
	now := clk.Now().Sub(testEpoch).Milliseconds()
	g := newGen(t, Config{Layout: csLayout, WorkerID: 1, Clock: clk, Policy: Policy{Kind: ClockSequence}, Floor: now - 10})
	mustNext(t, g)
	clk.Add(-time.Second)
	_, err := g.NextID()
	require.ErrorIs(t, err, ErrClockBackwards)
	assert.ErrorContains(t, err, "floor")
	require.NoError(t, g.Switch(1, now-5000, MaxTime))
	id := mustNext(t, g) // now-1000 is above the new floor: a bump is fine
	assert.Equal(t, int64(1), Decode(id, csLayout).ClockSeq)
}

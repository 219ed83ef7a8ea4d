package snowflake

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStatsCountEvents: each counter moves when its event happens, by the
// amount it happened, and stays at zero otherwise.
func TestStatsCountEvents(t *testing.T) {
	at := testEpoch.Add(time.Hour)

	t.Run("below the ceiling nothing counts", func(t *testing.T) {
		g := newGen(t, Config{WorkerID: 1, Clock: &stepClock{base: at, perMs: 100}})
		for range 10_000 {
			mustNext(t, g)
		}
		ids := make([]int64, 1000)
		require.NoError(t, g.NextIDs(ids))
		assert.Equal(t, Stats{}, g.Stats())
	})

	t.Run("waits", func(t *testing.T) {
		clk := newFakeClock(at.Add(300 * time.Microsecond))
		g := newGen(t, Config{WorkerID: 1, Clock: clk})
		for range 4096 {
			mustNext(t, g)
		}
		assert.Zero(t, g.Stats().Waits, "the millisecond is used up, but nothing waited yet")
		mustNext(t, g) // waits out the 0.7 ms left
		s := g.Stats()
		assert.Equal(t, int64(1), s.Waits)
		assert.Equal(t, 700*time.Microsecond, s.WaitDuration, "the clock time the wait took")
		ids := make([]int64, 4095+2*4096)
		require.NoError(t, g.NextIDs(ids)) // the 4095 left, then two more milliseconds
		s = g.Stats()
		assert.Equal(t, int64(3), s.Waits)
		assert.Equal(t, 2700*time.Microsecond, s.WaitDuration)
		assert.Zero(t, s.Rollbacks)
		assert.Zero(t, s.Borrowed)
	})

	t.Run("rollbacks count once each, with the largest", func(t *testing.T) {
		clk := newFakeClock(at)
		g := newGen(t, Config{WorkerID: 1, Clock: clk, Policy: Policy{Kind: Clamp, Limit: time.Second}})
		mustNext(t, g)
		clk.Add(-5 * time.Millisecond)
		for range 100 { // all in the frozen millisecond: one rollback
			mustNext(t, g)
		}
		s := g.Stats()
		assert.Equal(t, int64(1), s.Rollbacks)
		assert.Equal(t, 5*time.Millisecond, s.LargestRollback)
		clk.Add(10 * time.Millisecond) // past it: issues from the clock again
		mustNext(t, g)
		clk.Add(-3 * time.Millisecond)
		mustNext(t, g)
		s = g.Stats()
		assert.Equal(t, int64(2), s.Rollbacks)
		assert.Equal(t, 5*time.Millisecond, s.LargestRollback, "the largest, not the last")
		assert.Zero(t, s.Waits)

		r := newGen(t, Config{WorkerID: 1, Clock: clk, Policy: Policy{Kind: Reject}})
		mustNext(t, r)
		clk.Add(-20 * time.Millisecond)
		for range 3 {
			_, err := r.NextID()
			require.ErrorIs(t, err, ErrClockBackwards)
		}
		assert.Equal(t, int64(1), r.Stats().Rollbacks, "refused readings behind the same ID: one rollback")
		assert.Equal(t, 20*time.Millisecond, r.Stats().LargestRollback)
	})

	t.Run("borrowed milliseconds", func(t *testing.T) {
		clk := newFakeClock(at)
		g := newGen(t, Config{WorkerID: 1, Clock: clk, MaxLead: 3 * time.Millisecond})
		for range 2 * 4096 { // the clock's millisecond and one borrowed
			mustNext(t, g)
		}
		assert.Equal(t, int64(1), g.Stats().Borrowed)
		ids := make([]int64, 2*4096)
		require.NoError(t, g.NextIDs(ids)) // two more borrowed
		s := g.Stats()
		assert.Equal(t, int64(3), s.Borrowed)
		assert.Zero(t, s.Waits, "within the lead, nothing waits")
		mustNext(t, g) // the lead is used up: a wait
		assert.Equal(t, int64(1), g.Stats().Waits)
	})
}

// TestStatsDoNotAllocate: reading the statistics is free of allocations, so
// a metrics scrape costs nothing to the collector.
func TestStatsDoNotAllocate(t *testing.T) {
	g := newGen(t, Config{WorkerID: 1})
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = g.Stats() }))
}

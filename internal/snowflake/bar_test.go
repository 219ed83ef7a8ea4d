package snowflake

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tripwire's hooks: Since (where the IDs of the current worker id
// begin) and Bar (a stop that a Switch back cannot end).

func TestSince(t *testing.T) {
	clk := newFakeClock(testEpoch.Add(time.Hour))
	now := clk.Now().Sub(testEpoch).Milliseconds()
	g := newGen(t, Config{WorkerID: 3, Clock: clk})
	assert.Equal(t, now, g.Since(), "nothing issued: the clock at New")
	id := mustNext(t, g)
	assert.GreaterOrEqual(t, field(id), g.Since())

	floored := newGen(t, Config{WorkerID: 3, Clock: clk, Floor: now + 50})
	assert.Equal(t, now+50, floored.Since(), "a floor ahead of the clock")

	clk.Add(5 * time.Millisecond)
	require.NoError(t, g.Switch(4, now+20, MaxTime))
	assert.Equal(t, now+20, g.Since(), "the new worker id's floor")
	id = mustNext(t, g)
	assert.Equal(t, now+20, field(id))
	require.NoError(t, g.Switch(5, 0, MaxTime))
	assert.Equal(t, now+21, g.Since(), "past the last ID")
	clk.Add(30 * time.Millisecond)
	require.NoError(t, g.Switch(6, 0, MaxTime))
	assert.Equal(t, clk.Now().Sub(testEpoch).Milliseconds(), g.Since(), "at the clock")
	assert.GreaterOrEqual(t, field(mustNext(t, g)), g.Since())
}

func TestBar(t *testing.T) {
	clk := newFakeClock(testEpoch.Add(time.Hour))
	g := newGen(t, Config{WorkerID: 3, Clock: clk})
	mustNext(t, g)
	why := errors.New("shared")

	current, stopped := g.Bar(4, why)
	assert.False(t, current, "another worker id: nothing done")
	assert.False(t, stopped)
	mustNext(t, g)

	current, stopped = g.Bar(3, why)
	assert.True(t, current)
	assert.True(t, stopped)
	_, err := g.NextID()
	require.ErrorIs(t, err, why)
	current, stopped = g.Bar(3, why)
	assert.True(t, current)
	assert.False(t, stopped, "stopped already")

	err = g.Switch(3, 0, MaxTime)
	require.ErrorIs(t, err, why, "no switch back to a barred worker id")
	_, err = g.NextID()
	require.ErrorIs(t, err, why, "still stopped")

	require.NoError(t, g.Switch(6, 0, MaxTime))
	mustNext(t, g)
	assert.Equal(t, int64(6), g.WorkerID())

	g.Close(ErrClosed)
	current, stopped = g.Bar(6, why)
	assert.True(t, current)
	assert.False(t, stopped, "closed: nothing to stop")
	_, err = g.NextID()
	require.ErrorIs(t, err, ErrClosed)
}

// TestBarRacesSwitch: whichever of Bar and Switch comes first, no ID under
// the barred worker id is issued after Bar returns true.
func TestBarRacesSwitch(t *testing.T) {
	why := errors.New("shared")
	for range 200 {
		g := newGen(t, Config{WorkerID: 3, Clock: WallClock{}})
		var wg sync.WaitGroup
		var current bool
		wg.Go(func() { current, _ = g.Bar(3, why) })
		wg.Go(func() { _ = g.Switch(3, 0, MaxTime) }) // the keeper coming back to it
		wg.Wait()
		require.True(t, current)
		_, err := g.NextID()
		require.ErrorIs(t, err, why)
	}
}

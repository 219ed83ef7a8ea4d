package entflake

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// manualClock moves when told to, or by as much as it is asked to sleep.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Sleep(d time.Duration) { c.Add(d) }

func (c *manualClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestNewRejectsBadInput(t *testing.T) {
	for name, c := range map[string]struct {
		worker int64
		opts   []Option
		is     error
		msg    string
	}{
		"worker too big":     {1024, nil, ErrInvalidWorkerID, "1024 does not fit 10 worker bits (0..1023)"},
		"worker negative":    {-1, nil, ErrInvalidWorkerID, "-1 does not fit"},
		"worker vs layout":   {40, []Option{WithLayout(ClockSequenceLayout)}, ErrInvalidWorkerID, "0..31"},
		"WithWorkerID":       {1, []Option{WithWorkerID(2)}, ErrInvalidOption, "not WithWorkerID"},
		"lease timeout":      {1, []Option{WithLeaseTimeout(time.Second)}, ErrInvalidOption, "WithLeaseTimeout belongs to Open"},
		"lease db":           {1, []Option{WithLeaseDB(nil, "mysql")}, ErrInvalidOption, "WithLeaseDB"},
		"skew":               {1, []Option{WithClockSkewCheck(time.Second, true)}, ErrInvalidOption, "WithClockSkewCheck belongs to Open"},
		"service":            {1, []Option{WithService("__global__")}, ErrInvalidService, "reserved"},
		"wait below 1ms":     {1, []Option{WithRollbackPolicy(WaitRollback(time.Microsecond))}, ErrInvalidPolicy, "at least 1ms"},
		"epoch too old":      {1, []Option{WithEpoch(time.Date(1950, 1, 1, 0, 0, 0, 0, time.UTC))}, ErrInvalidEpoch, "before 1970"},
		"clock before epoch": {1, []Option{WithClock(&manualClock{now: DefaultEpoch.Add(-time.Second)})}, ErrClockBeforeEpoch, "before the epoch"},
	} {
		t.Run(name, func(t *testing.T) {
			g, err := New(c.worker, c.opts...)
			assert.Nil(t, g)
			assert.ErrorIs(t, err, c.is)
			assert.ErrorContains(t, err, c.msg)
		})
	}
}

func TestNewAndDecode(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clk := &manualClock{now: at}
	g, err := New(321, WithClock(clk), WithService("tool"))
	require.NoError(t, err)
	assert.Equal(t, SourceExplicit, g.Source())
	assert.Equal(t, "tool", g.Service())
	assert.Empty(t, g.Instance())
	assert.Equal(t, DefaultLayout, g.Layout())
	assert.Equal(t, DefaultEpoch, g.Epoch())
	for i := range 5 {
		id, err := g.NextID()
		require.NoError(t, err)
		want := at.Sub(DefaultEpoch).Milliseconds()<<22 | 321<<12 | int64(i)
		assert.Equal(t, want, id)
		p, err := g.Decode(id)
		require.NoError(t, err)
		assert.Equal(t, Parts{Time: at, WorkerID: 321, Sequence: int64(i)}, p)
		p2, err := Decode(id, DefaultLayout, DefaultEpoch)
		require.NoError(t, err)
		assert.Equal(t, p, p2)
	}
	_, err = g.Decode(-1)
	assert.ErrorIs(t, err, ErrInvalidID)
	_, err = g.Decode(0)
	assert.ErrorIs(t, err, ErrInvalidID, "0 is an unset field, as the CLI says")
	assert.ErrorContains(t, err, "zero is no generated ID")
	_, err = Decode(1, Layout{WorkerBits: 22}, DefaultEpoch)
	assert.ErrorIs(t, err, ErrInvalidLayout)
	_, err = Decode(1, DefaultLayout, time.Unix(-1, 0))
	assert.ErrorIs(t, err, ErrInvalidEpoch)
}

// TestEpochAndLayoutOptions: a fleet's epoch and layout shape the IDs.
func TestEpochAndLayoutOptions(t *testing.T) {
	epoch := time.Date(2010, 11, 4, 1, 42, 54, 657_000_000, time.UTC) // Twitter's
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	g, err := New(17, WithEpoch(epoch), WithLayout(ClockSequenceLayout),
		WithRollbackPolicy(BumpClockSequence()), WithClock(&manualClock{now: at}))
	require.NoError(t, err)
	id, err := g.NextID()
	require.NoError(t, err)
	assert.Equal(t, at.Sub(epoch).Milliseconds()<<22|17<<12, id)
	assert.Equal(t, epoch, g.Epoch())
}

// TestClocks: both real clocks give increasing IDs whose time is now.
func TestClocks(t *testing.T) {
	for name, clk := range map[string]Clock{"monotonic": MonotonicClock(), "wall": WallClock()} {
		t.Run(name, func(t *testing.T) {
			g, err := New(1, WithClock(clk))
			require.NoError(t, err)
			prev := int64(0)
			for range 10_000 {
				id, err := g.NextID()
				require.NoError(t, err)
				require.Greater(t, id, prev)
				prev = id
			}
			p, err := g.Decode(prev)
			require.NoError(t, err)
			assert.WithinDuration(t, time.Now(), p.Time, time.Second, "the ID's time is now, not off by the epoch or a zone")
		})
	}
}

// TestPoliciesThroughOptions: each policy, chosen through the public API,
// behaves as documented on a clock stepped back by 10 ms.
func TestPoliciesThroughOptions(t *testing.T) {
	at := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	for name, c := range map[string]struct {
		opts  []Option
		check func(t *testing.T, before, id int64, err error)
	}{
		"default clamp": {nil, func(t *testing.T, before, id int64, err error) {
			require.NoError(t, err)
			assert.Equal(t, before+1, id)
		}},
		"clamp 5ms fuse": {[]Option{WithRollbackPolicy(ClampRollback(5 * time.Millisecond))}, func(t *testing.T, _, _ int64, err error) {
			assert.ErrorIs(t, err, ErrClockBackwards)
		}},
		"wait 20ms": {[]Option{WithRollbackPolicy(WaitRollback(20 * time.Millisecond))}, func(t *testing.T, before, id int64, err error) {
			require.NoError(t, err)
			assert.Greater(t, id, before)
		}},
		"reject": {[]Option{WithRollbackPolicy(RejectRollback())}, func(t *testing.T, _, _ int64, err error) {
			assert.ErrorIs(t, err, ErrClockBackwards)
		}},
		"bump": {[]Option{WithLayout(ClockSequenceLayout), WithRollbackPolicy(BumpClockSequence())}, func(t *testing.T, before, id int64, err error) {
			require.NoError(t, err)
			assert.Less(t, id, before)
			p, _ := Decode(id, ClockSequenceLayout, DefaultEpoch)
			assert.Equal(t, int64(1), p.ClockSeq)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			clk := &manualClock{now: at}
			g, err := New(3, append(c.opts, WithClock(clk))...)
			require.NoError(t, err)
			before, err := g.NextID()
			require.NoError(t, err)
			clk.Add(-10 * time.Millisecond)
			id, err := g.NextID()
			c.check(t, before, id, err)
		})
	}
	assert.Equal(t, "clamp (fuse 1s)", RollbackPolicy{}.String())
	assert.Equal(t, "wait (limit 5ms)", WaitRollback(5*time.Millisecond).String())
	assert.Equal(t, "reject", RejectRollback().String())
	assert.Equal(t, "clock-sequence", BumpClockSequence().String())
	assert.Equal(t, "lease", SourceLease.String())
}

func TestLayoutMethods(t *testing.T) {
	assert.Equal(t, int64(1023), DefaultLayout.MaxWorkerID())
	assert.Equal(t, int64(31), ClockSequenceLayout.MaxWorkerID())
	assert.NoError(t, ClockSequenceLayout.Validate())
	assert.ErrorIs(t, Layout{WorkerBits: 11, SequenceBits: 12}.Validate(), ErrInvalidLayout)
}

// BenchmarkNextID is the public path, at the layout's ceiling.
func BenchmarkNextID(b *testing.B) {
	g, err := New(1)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.NextID(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBurstAndBatch: WithBurst lets a batch run ahead of the clock, within
// the lead; without it, the ceiling holds and the time field never leads.
func TestBurstAndBatch(t *testing.T) {
	at := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	clk := &manualClock{now: at}
	g, err := New(2, WithClock(clk), WithBurst(3*time.Millisecond))
	require.NoError(t, err)
	ids := make([]int64, 4*4096)
	require.NoError(t, g.NextIDs(ids))
	for i := 1; i < len(ids); i++ {
		require.Greater(t, ids[i], ids[i-1])
	}
	last, err := g.Decode(ids[len(ids)-1])
	require.NoError(t, err)
	assert.Equal(t, at.Add(3*time.Millisecond), last.Time, "three milliseconds ahead of a clock that did not move")
	assert.Equal(t, at, clk.Now(), "and no wait")

	strict, err := New(2, WithClock(&manualClock{now: at}))
	require.NoError(t, err)
	require.NoError(t, strict.NextIDs(ids))
	last, err = strict.Decode(ids[len(ids)-1])
	require.NoError(t, err)
	assert.Equal(t, at.Add(3*time.Millisecond), last.Time, "the strict generator waited for each millisecond")

	for _, bad := range []time.Duration{0, -time.Second, time.Microsecond, 2 * time.Hour} {
		_, err := New(2, WithBurst(bad))
		assert.Error(t, err, "%v", bad)
	}
}

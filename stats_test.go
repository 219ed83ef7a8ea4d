package entflake

import (
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
	"github.com/entflake/entflake/internal/lease"
)

// TestStatsErrorsByKind: each kind of NextID or NextIDs error moves its own
// counter, once per failed call, and no other.
func TestStatsErrorsByKind(t *testing.T) {
	at := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	for name, c := range map[string]struct {
		opts []Option
		fail func(t *testing.T, g *Generator, clk *manualClock) error
		want ErrorCounts
	}{
		"closed": {nil, func(t *testing.T, g *Generator, _ *manualClock) error {
			require.NoError(t, g.Close())
			return ErrClosed
		}, ErrorCounts{Closed: 2}},
		"fenced": {nil, func(t *testing.T, g *Generator, clk *manualClock) error {
			g.g.SetLimit(g.g.Last()) // a lease whose promise ends here
			clk.Add(time.Millisecond)
			return ErrFenced
		}, ErrorCounts{Fenced: 2}},
		"clock backwards": {[]Option{WithRollbackPolicy(RejectRollback())}, func(t *testing.T, g *Generator, clk *manualClock) error {
			clk.Add(-time.Second)
			return ErrClockBackwards
		}, ErrorCounts{ClockBackwards: 2}},
		"clock sequence exhausted": {[]Option{WithLayout(ClockSequenceLayout), WithRollbackPolicy(BumpClockSequence())},
			func(t *testing.T, g *Generator, clk *manualClock) error {
				for range 31 { // every value of the 5-bit field
					clk.Add(-time.Millisecond)
					_, err := g.NextID()
					require.NoError(t, err)
				}
				clk.Add(-time.Millisecond)
				return ErrClockSequenceExhausted
			}, ErrorCounts{SequenceExhausted: 2}},
		"other": {nil, func(t *testing.T, g *Generator, clk *manualClock) error {
			clk.Add(-at.Sub(DefaultEpoch) - time.Hour)
			return ErrClockBeforeEpoch
		}, ErrorCounts{Other: 2}},
	} {
		t.Run(name, func(t *testing.T) {
			clk := &manualClock{now: at}
			g, err := New(3, append([]Option{WithClock(clk)}, c.opts...)...)
			require.NoError(t, err)
			_, err = g.NextID()
			require.NoError(t, err)
			assert.Equal(t, ErrorCounts{}, g.Stats().Errors, "no error yet")
			want := c.fail(t, g, clk)
			_, err = g.NextID()
			require.ErrorIs(t, err, want)
			require.ErrorIs(t, g.NextIDs(make([]int64, 10)), want)
			s := g.Stats()
			assert.Equal(t, c.want, s.Errors)
			assert.Zero(t, s.Renewals+s.RenewalFailures+s.Fencings+s.Switches, "no lease, no lease events")
		})
	}
}

// TestStatsOfNew: a generator from New reports its worker id and source,
// counts its waits and bursts, and nothing else.
func TestStatsOfNew(t *testing.T) {
	at := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	clk := &manualClock{now: at}
	g, err := New(5, WithClock(clk), WithBurst(2*time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, Stats{Source: SourceExplicit, LeaseState: LeaseNone, WorkerID: 5}, g.Stats())
	// The clock's millisecond and two borrowed; the lead is then used up,
	// so it waits for the clock's next millisecond, and borrows a third.
	require.NoError(t, g.NextIDs(make([]int64, 4*4096)))
	s := g.Stats()
	assert.Equal(t, int64(3), s.Borrowed)
	assert.Equal(t, int64(1), s.Waits)
	assert.Equal(t, time.Millisecond, s.WaitDuration)
	assert.Zero(t, s.Rollbacks)
	assert.Equal(t, ErrorCounts{}, s.Errors)

	clk.Add(-500 * time.Millisecond) // beyond the lead: a rollback the clamp rides
	for range 10 {
		_, err := g.NextID()
		require.NoError(t, err)
	}
	s = g.Stats()
	assert.Equal(t, int64(1), s.Rollbacks)
	assert.Equal(t, 500*time.Millisecond, s.LargestRollback, "behind the last ID by 502 ms, less the 2 ms lead")
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = g.Stats() }))
}

func TestRandomSequenceStartOption(t *testing.T) {
	for _, span := range []int64{-1, 1, 3, 4096} {
		_, err := New(1, WithRandomSequenceStart(span))
		assert.ErrorIs(t, err, ErrInvalidOption, "%d", span)
		assert.ErrorContains(t, err, "WithRandomSequenceStart(")
		assert.ErrorContains(t, err, "from 2 to 2048")
	}
	// The bound follows the layout, whichever order the options come in.
	_, err := New(1, WithRandomSequenceStart(2048), WithLayout(Layout{WorkerBits: 12, SequenceBits: 10}))
	assert.ErrorContains(t, err, "from 2 to 512")

	clk := &manualClock{now: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)}
	g, err := New(1, WithClock(clk), WithRandomSequenceStart(64))
	require.NoError(t, err)
	shards := map[int64]int{}
	for range 640 {
		id, err := g.NextID()
		require.NoError(t, err)
		shards[id%8]++
		clk.Add(time.Millisecond)
	}
	assert.Len(t, shards, 8, "one ID a millisecond spreads over 8 shards: %v", shards)
	for s, n := range shards {
		assert.Greater(t, n, 30, "shard %d of %v", s, shards)
	}
}

// TestPromiseCappedBySkew: a clock that steps 10 s ahead of the
// database's (far past Margin) asks for promises the database's cap
// refuses: the slot stays live (renewals go on, none fails), the promise
// stays where the database acknowledged it, the generator is fenced once
// its clock passes it (one fencing, one ERROR), and the database never
// holds a promise past its clock + TTL. When the clock comes back, the
// renewals raise the promise again and the generator issues.
func TestPromiseCappedBySkew(t *testing.T) {
	db := dbtest.SQLite(t)
	clk := &steppedClock{}
	sink, logOpt := newSink()
	g, err := OpenDB(t.Context(), db.DB, "sqlite3", WithService("fence-step"), WithHeartbeat(fastBeat),
		WithRequireLease(), WithClock(clk), logOpt)
	require.NoError(t, err)
	defer g.Close()
	_, err = g.NextID()
	require.NoError(t, err)
	before := g.Stats()
	require.Zero(t, before.Fencings)

	clk.off.Store(int64(10 * time.Second)) // well past the promise (TTL - Margin = 1.7 s ahead), and past Margin
	require.Eventually(t, func() bool { return g.Stats().Renewals >= before.Renewals+3 }, 10*time.Second, 10*time.Millisecond)
	_, err = g.NextID()
	require.ErrorIs(t, err, ErrFenced, "no promise covers a clock 10 s ahead")
	s := g.Stats()
	assert.EqualValues(t, 1, s.Fencings)
	assert.Zero(t, s.RenewalFailures, "the slot stayed live")
	assert.Equal(t, LeaseFenced, g.Lease().State)
	assert.ErrorIs(t, g.Lease().Err, lease.ErrCapped)
	assert.Len(t, sink.find(slog.LevelError, "refused by the database's clock"), 1, "said once")
	var over int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM sys_sequence_slot WHERE promise_ms > CAST(unixepoch('subsec') * 1000 AS INTEGER) + 2000").Scan(&over))
	assert.Zero(t, over, "no promise past the database's clock + TTL")

	clk.off.Store(0)
	require.Eventually(t, func() bool { return g.Lease().State == LeaseHeld }, 5*time.Second, 10*time.Millisecond)
	_, err = g.NextID()
	require.NoError(t, err)
}

// TestSourceAndStateText: Source and LeaseState are their names in JSON
// (Stats, LeaseStatus) and read back from them; an unknown name is an
// error that names it.
func TestSourceAndStateText(t *testing.T) {
	g, err := New(5, WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	defer g.Close()
	out, err := json.Marshal(g.Stats())
	require.NoError(t, err)
	assert.Contains(t, string(out), `"Source":"explicit"`)
	assert.Contains(t, string(out), `"LeaseState":"none"`)
	out, err = json.Marshal(g.Lease())
	require.NoError(t, err)
	assert.Contains(t, string(out), `"State":"none"`)

	for _, s := range []Source{SourceExplicit, SourceLease, SourceFallback} {
		b, err := json.Marshal(s)
		require.NoError(t, err)
		var back Source
		require.NoError(t, json.Unmarshal(b, &back), string(b))
		assert.Equal(t, s, back)
	}
	for s := LeaseNone; s <= LeaseUnregistered; s++ {
		b, err := json.Marshal(s)
		require.NoError(t, err)
		assert.NotContains(t, string(b), "LeaseState(", "every state has a name")
		var back LeaseState
		require.NoError(t, json.Unmarshal(b, &back), string(b))
		assert.Equal(t, s, back)
	}
	var s Source
	assert.ErrorContains(t, json.Unmarshal([]byte(`"leased"`), &s), `unknown source "leased"`)
	var ls LeaseState
	assert.ErrorContains(t, json.Unmarshal([]byte(`2`), &ls), "cannot unmarshal number")
	assert.ErrorContains(t, json.Unmarshal([]byte(`"gone"`), &ls), `unknown lease state "gone"`)
}

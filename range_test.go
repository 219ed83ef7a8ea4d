package entflake

import (
	"context"
	"database/sql"
	"log/slog"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// TestWorkerRangeBadInput: a range that holds fewer than two worker ids,
// is negative or goes past the layout, a fixed worker id outside it, and
// the option given to New, are refused before any I/O.
func TestWorkerRangeBadInput(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	db := dbtest.SQLite(t)
	for name, c := range map[string]struct {
		opts []Option
		is   error
		msg  string
	}{
		"negative":      {[]Option{WithWorkerRange(-1, 10)}, ErrInvalidWorkerID, "WithWorkerRange(-1, 10) is negative"},
		"one id":        {[]Option{WithWorkerRange(7, 7)}, ErrInvalidWorkerID, "fewer than two worker ids"},
		"reversed":      {[]Option{WithWorkerRange(9, 3)}, ErrInvalidWorkerID, "lo must be below hi"},
		"past layout":   {[]Option{WithWorkerRange(512, 1024)}, ErrInvalidWorkerID, "past the layout's last worker id, 1023 (10 worker bits)"},
		"narrow layout": {[]Option{WithLayout(ClockSequenceLayout), WithWorkerRange(0, 63)}, ErrInvalidWorkerID, "last worker id, 31"},
		"fixed outside": {[]Option{WithWorkerRange(10, 20), WithWorkerID(21)}, ErrInvalidWorkerID, "WithWorkerID(21) is outside WithWorkerRange's 10..20"},
	} {
		t.Run(name, func(t *testing.T) {
			g, err := OpenDB(context.Background(), db.DB, dialect.SQLite, append([]Option{WithService("svc"), quiet()}, c.opts...)...)
			assert.Nil(t, g)
			require.ErrorIs(t, err, c.is)
			assert.ErrorContains(t, err, c.msg)
		})
	}
	t.Setenv(EnvWorkerID, "25")
	_, err := OpenDB(context.Background(), db.DB, dialect.SQLite, WithService("svc"), WithWorkerRange(10, 20), quiet())
	require.ErrorIs(t, err, ErrInvalidWorkerID)
	assert.ErrorContains(t, err, EnvWorkerID+"=25 is outside WithWorkerRange's 10..20")
	assert.Zero(t, sqliteTables(t, db.DB, "sys_sequence"), "nothing was leased")

	_, err = New(3, WithWorkerRange(0, 10))
	require.ErrorIs(t, err, ErrInvalidOption)
	assert.ErrorContains(t, err, "WithWorkerRange belongs to Open")
}

// TestWorkerRange: generators with a range lease its worker ids; one
// started with another range (another region's) or none, on the same
// tables, fails at Open with ErrWorkerRangeMismatch while they live (no
// fallback: its IDs could be another database's), and a fixed worker id
// inside the range registers.
func TestWorkerRange(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		seen := map[int64]bool{}
		sink, logOpt := newSink()
		for range 3 {
			g := open(t, db.DB, b.Dialect, WithService("eu"), WithWorkerRange(300, 303), logOpt)
			require.Equal(t, SourceLease, g.Source())
			require.True(t, g.WorkerID() >= 300 && g.WorkerID() <= 303, "worker id %d", g.WorkerID())
			require.False(t, seen[g.WorkerID()])
			seen[g.WorkerID()] = true
			checkIDs(t, g)
		}
		// The first recorded the range in a fresh pool: no change, and no
		// warning (issue 33, item 7).
		assert.Empty(t, sink.find(slog.LevelWarn, "worker range changed"))
		for _, opts := range [][]Option{{WithWorkerRange(512, 1023)}, {WithWorkerRange(0, 303)}, nil} {
			sink, logOpt := newSink()
			g, err := OpenDB(context.Background(), db.DB, b.Dialect, append([]Option{WithService("us"), logOpt}, opts...)...)
			assert.Nil(t, g)
			require.ErrorIs(t, err, ErrWorkerRangeMismatch)
			assert.ErrorContains(t, err, "the pool's is 300..303")
			assert.NotErrorIs(t, err, ErrNoLease)
			assert.Empty(t, sink.find(slog.LevelWarn, "fallback hash"), "no fallback")
		}
		// A fixed worker id of the range registers beside them.
		var free int64
		for id := int64(300); id <= 303; id++ {
			if !seen[id] {
				free = id
			}
		}
		g := open(t, db.DB, b.Dialect, WithService("eu"), WithWorkerRange(300, 303), WithWorkerID(free), quiet())
		assert.Equal(t, SourceExplicit, g.Source())
		assert.Equal(t, LeaseHeld, g.Lease().State)
	})
}

// TestWorkerRangeChanged: a pool in use whose slots are all released
// moves to the range of the next starter, and says so once, naming both.
func TestWorkerRangeChanged(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		g := open(t, db.DB, b.Dialect, WithService("eu"), WithWorkerRange(300, 303), quiet())
		require.NoError(t, g.Close())
		sink, logOpt := newSink()
		g = open(t, db.DB, b.Dialect, WithService("eu"), WithWorkerRange(400, 403), logOpt)
		assert.True(t, g.WorkerID() >= 400 && g.WorkerID() <= 403, "worker id %d", g.WorkerID())
		changed := sink.find(slog.LevelWarn, "worker range changed")
		require.Len(t, changed, 1)
		assert.Equal(t, "300-303", changed[0].attrs["from"])
		assert.Equal(t, "400-403", changed[0].attrs["to"])
	})
}

// TestWorkerRangeFallback: the fallback hash lands in the range, and its
// warning counts the range's worker ids.
func TestWorkerRangeFallback(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	b := dbtest.Backends[0]
	db, err := sql.Open(b.Driver, b.ClosedDSN(t))
	require.NoError(t, err)
	defer db.Close()
	for _, service := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		sink, logOpt := newSink()
		g := open(t, db, b.Dialect, WithService(service), WithWorkerRange(512, 1023), WithLeaseTimeout(time.Second), logOpt)
		require.Equal(t, SourceFallback, g.Source())
		require.True(t, g.WorkerID() >= 512 && g.WorkerID() <= 1023, "worker id %d", g.WorkerID())
		warns := sink.find(slog.LevelWarn, "fallback hash")
		require.Len(t, warns, 1)
		assert.Contains(t, warns[0].attrs["risk"], "1/512")
	}
	g := open(t, nil, "", WithService("x"), WithWorkerRange(40, 41), quiet())
	assert.True(t, g.WorkerID() == 40 || g.WorkerID() == 41)
}

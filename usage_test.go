package entflake

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
	"github.com/entflake/entflake/internal/lease"
)

// TestReadPoolUsage: a pool's capacity is its range's (or its layout's),
// its live slots are counted by layout, a closed generator's slot is not
// live, and a database without the tables or a pool says so.
func TestReadPoolUsage(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		db := b.Fresh(t)
		_, err := ReadPoolUsage(ctx, db.DB, b.Dialect)
		require.ErrorIs(t, err, ErrNoTables)

		var gs []*Generator
		for range 3 {
			gs = append(gs, open(t, db.DB, b.Dialect, WithService("svc"), WithWorkerRange(100, 109), quiet()))
		}
		u, err := ReadPoolUsage(ctx, db.DB, b.Dialect)
		require.NoError(t, err)
		assert.Equal(t, "0/10/12 2024-01-01T00:00:00.000Z", u.Layout)
		assert.Equal(t, "100-109", u.Range)
		assert.Equal(t, int64(10), u.Capacity)
		assert.Equal(t, map[string]int64{u.Layout: 3}, u.Live)
		assert.Empty(t, u.Widen)
		assert.False(t, u.At.IsZero())

		require.NoError(t, gs[0].Close())
		u, err = ReadPoolUsage(ctx, db.DB, b.Dialect)
		require.NoError(t, err)
		assert.Equal(t, int64(2), u.Live[u.Layout], "a released slot is not live")

		for _, g := range gs[1:] {
			require.NoError(t, g.Close())
		}
		_, err = lease.SetRange(ctx, db.DB, b.Dialect, 0, 0, false, true)
		require.NoError(t, err)
		_, err = StartWidening(ctx, db.DB, b.Dialect, Layout{WorkerBits: 12, SequenceBits: 10}, true)
		require.NoError(t, err)
		u, err = ReadPoolUsage(ctx, db.DB, b.Dialect)
		require.NoError(t, err)
		assert.Equal(t, int64(1024), u.Capacity, "the whole layout")
		assert.Equal(t, "0/12/10 2024-01-01T00:00:00.000Z", u.Widen)
		assert.Equal(t, int64(4096-1024), u.WidenCapacity, "the wider layout's worker ids from 1024 up")
		assert.Empty(t, u.Live)
	})
}

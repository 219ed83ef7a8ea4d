package lease

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// TestHolders: no table is ErrNoSlotTable; an empty table still reads the
// database's clock; a live, a released and an expired slot each read back
// with their state, judged on the database's clock.
func TestHolders(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		db := b.Fresh(t)
		_, _, err := Holders(ctx, db.DB, b.Dialect)
		require.ErrorIs(t, err, ErrNoSlotTable)

		createTables(t, db.DB, b.Dialect)
		now, hs, err := Holders(ctx, db.DB, b.Dialect)
		require.NoError(t, err)
		assert.Empty(t, hs)
		assert.InDelta(t, time.Now().UnixMilli(), now, float64(time.Minute.Milliseconds()), "the clock, with no slot")

		r := request(db.DB, b.Dialect, "holders")
		live := take(t, r)
		gone := take(t, r)
		require.NoError(t, Release(ctx, r.Holding(gone), time.Now().UnixMilli()))
		expired := take(t, r)
		_, err = db.Exec(dbtest.Rebind(b.Dialect, "UPDATE sys_sequence_slot SET expires_ms = 1000 WHERE worker_id = ?"), expired.WorkerID)
		require.NoError(t, err)

		now, hs, err = Holders(ctx, db.DB, b.Dialect)
		require.NoError(t, err)
		require.Len(t, hs, 3)
		states := map[int64]string{}
		for i, h := range hs {
			states[h.WorkerID] = h.State(now)
			if i > 0 {
				assert.Less(t, hs[i-1].WorkerID, h.WorkerID, "by worker id")
			}
			assert.Equal(t, "holders", h.Service)
			assert.Equal(t, r.Instance, h.Instance)
			assert.Equal(t, testLayout, h.Layout)
			assert.Positive(t, h.Fence)
			assert.InDelta(t, now, h.TakenMs, float64(time.Minute.Milliseconds()))
		}
		assert.Equal(t, map[int64]string{live.WorkerID: StateLive, gone.WorkerID: StateReleased, expired.WorkerID: StateExpired}, states)
	})
}

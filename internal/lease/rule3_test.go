package lease

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// Rule 3 of statements.go: a fact a take relies on is read under the
// locks of the write that relies on it. These tests delete a live
// holder's row after the take counted the slot rows (countRows, which
// locks nothing) and before the locked reads that the take's decision
// rests on: the decision must see the deletion. SQLite is immune (the
// locked take holds the write lock: the DELETE waits for it).

// deleteBefore makes h delete worker id's row, once, just before the
// first statement that starts with prefix is sent, and waits for it.
func deleteBefore(t *testing.T, h *hooks, db *dbtest.DB, prefix string, id int64) *sync.Once {
	t.Helper()
	var once sync.Once
	h.set(func(q string) {
		if !isStmt(q, prefix) {
			return
		}
		once.Do(func() {
			done := make(chan error, 1)
			go func() {
				_, err := db.Exec(fmt.Sprintf("DELETE FROM sys_sequence_slot WHERE worker_id = %d", id))
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("delete row %d: %v", id, err)
				}
			case <-time.After(15 * time.Second): // generous: the machine may be loaded
				t.Errorf("the DELETE of row %d waited for the take: the window is closed by a lock", id)
			}
		})
	}, nil)
	return &once
}

// TestCrossCheckSeesDeletion (issue 32, finding 1): while the pool widens,
// old holder H (worker 256 of 0/10/12) lives; a take of new worker 1024
// (whose IDs are worker 256's) counts the rows, then H's row is deleted,
// then the cross-check reads the old rows locked and finds none. Before,
// it floored above the empty deletion window, and the new holder issued
// inside H's promise (about 150,000 duplicate IDs per run); now the
// missing row is judged under the lock, and the take starts above every
// promise H can have had, or is refused as too far ahead.
func TestCrossCheckSeesDeletion(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		if b.Dialect == dialect.SQLite {
			t.Skip("SQLite: the locked take holds the write lock; the DELETE waits for it")
		}
		db := b.Fresh(t)
		ctx := context.Background()
		h := take(t, holder(db.DB, b.Dialect, "old256@h@1@1", testLayout, 256))
		_, err := Widen(ctx, db.DB, b.Dialect, wideLayout, true)
		require.NoError(t, err)
		hdb, hk := hooked(t, db.Driver, db.DSN)
		deleteBefore(t, hk, db, "SELECT worker_id, expires_ms, promise_ms, instance, layout", 256)
		s, err := tryTake(holder(hdb, b.Dialect, "new1024@h@1@1", wideLayout, 1024))
		hk.set(nil, nil)
		if err != nil {
			require.ErrorIs(t, err, ErrFloorAhead)
			return
		}
		assert.Greater(t, s.Floor, h.Promise, "new worker 1024 starts inside old worker 256's promise: its IDs repeat")
	})
}

// TestLayoutChangeSeesDeletion (issue 32, finding 4): old holder H (worker
// 100 of 0/10/12) lives; a take of another layout counts the rows, then
// H's row is deleted, then the change looks, locked, for live holders of
// the old layout and finds none. Before, the change went through and
// floored above the rows left (about 140,000 duplicate IDs per run); now
// the count it relies on is read under its locks, the deletion is found,
// and the change is refused until H's promise has passed.
func TestLayoutChangeSeesDeletion(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		if b.Dialect == dialect.SQLite {
			t.Skip("SQLite: the locked take holds the write lock; the DELETE waits for it")
		}
		db := b.Fresh(t)
		h := take(t, holder(db.DB, b.Dialect, "old100@h@1@1", testLayout, 100))
		hdb, hk := hooked(t, db.Driver, db.DSN)
		deleteBefore(t, hk, db, "SELECT worker_id FROM sys_sequence_slot", 100)
		r := named(request(hdb, b.Dialect, "t"), "t@h@2@2")
		r.Explicit, r.WorkerID, r.Layout, r.Workers = true, 200, ruleL1, 2048 // 200 of 0/11/11: worker 100's IDs
		s, err := tryTake(r)
		hk.set(nil, nil)
		if err != nil {
			require.ErrorIs(t, err, ErrLayout)
			assert.Contains(t, err.Error(), "slot rows were found deleted")
			return
		}
		assert.Greater(t, s.Floor, h.Promise, "worker 200 of 0/11/11 starts inside worker 100 of 0/10/12's promise")
	})
}

package lease

import (
	"context"
	"sync"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// TestRetakeRemembersPool: a locked take rolled back after its count
// starts again, and what its first try saw stands. Both pool rows are
// lost; X's locked take counts the slot rows (G's among them, live) and
// takes the pool at its worst; then, just before X's claim is sent, X's
// connection is cut (the server rolls the take back, pool rows and all)
// and every slot row is deleted. X's retake finds no trace of the pool.
// Before lockedOnce kept what a try saw (mutant 32), it took that for a
// new pool: rows made again started at promise 0, and X's own floor was
// its clock, below G's window; a deadlock the server breaks by rolling
// the take back does the same without a cut. Now the retake takes the
// pool at its worst: every row it makes starts above G's promise.
//
// MariaDB and PostgreSQL: the test's driver closes X's connection in
// place of its claim, as a network cut would. SQLite's locked take holds
// the database's write lock from its BEGIN IMMEDIATE, and its file has no
// connection to cut.
func TestRetakeRemembersPool(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		if b.Dialect == dialect.SQLite {
			return // see above: nothing to cut; not counted as a run of this case
		}
		db := b.Fresh(t)
		hdb, h := hooked(t, db.Driver, db.DSN)
		ctx := context.Background()

		rg := named(request(db.DB, b.Dialect, "g"), "g@h@1@1")
		rg.TTL, rg.Horizon = 5*time.Second, 4*time.Second
		rg.Explicit, rg.WorkerID = true, 40
		sg := take(t, rg)
		_, err := db.Exec("DELETE FROM sys_sequence WHERE service_name IN ('__layout__', '__slots__')")
		require.NoError(t, err)

		var (
			once sync.Once
			cut  bool
			wipe error
		)
		h.setDrop(func(q string) bool {
			drop := false
			if isStmt(q, "UPDATE sys_sequence_slot SET fence = fence + 1") {
				once.Do(func() { drop, cut = true, true })
			}
			return drop
		}, func() { wipe = wipeAll(ctx, db) })
		rx := named(request(hdb, b.Dialect, "x"), "x@h@2@2")
		rx.TTL, rx.Horizon = time.Second, 700*time.Millisecond
		rx.Explicit, rx.WorkerID = true, 41
		tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		sx, err := Take(tctx, rx)
		cancel()
		h.setDrop(nil, nil)
		require.True(t, cut, "X's claim was never sent: the fault did not apply")
		require.NoError(t, wipe, "delete every row")
		if err != nil {
			// Refused (the floor too far ahead of a short wait): the safe way.
			require.ErrorIs(t, err, ErrFloorAhead)
		} else {
			require.Greater(t, sx.Floor, sg.Promise, "X's floor is above G's window (G's promise %d)", sg.Promise)
		}
		// Every row made again starts above G's window: G's own worker id
		// taken next is not below G's IDs.
		var promise int64
		require.NoError(t, db.QueryRow("SELECT promise_ms FROM sys_sequence_slot WHERE worker_id = 40").Scan(&promise))
		require.GreaterOrEqual(t, promise, sg.Promise, "worker 40's row made again starts above G's promise")
	})
}

// wipeAll deletes every slot row and both pool rows, once the server has
// rolled back the cut connection's transaction (the deletion waits for
// its locks).
func wipeAll(ctx context.Context, db *dbtest.DB) error {
	if _, err := db.ExecContext(ctx, "DELETE FROM sys_sequence_slot"); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, "DELETE FROM sys_sequence WHERE service_name IN ('__layout__', '__slots__')")
	return err
}

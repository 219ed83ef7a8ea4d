package lease

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// TestUnsentCommitLeavesNoTransaction: a locked take whose context ends
// just before its COMMIT goes out must not leave its transaction open on a
// connection the pool hands out again. go-sql-driver/mysql (and
// modernc.org/sqlite) refuse a statement whose context has ended without
// sending it, and the connection stays good: before, the take settled (its
// claim read back on another connection showed nothing, rightly), but the
// session's connection went back to the pool still inside the take's
// transaction. The next take on it ran its statements in that transaction,
// claimed a slot there and returned it as held; when the connection was
// closed the server rolled everything back, that claim with it, and a
// third take found the slot free below the second's IDs. A walk
// (TestWalk, seed 2 on MariaDB on a loaded machine) found two holders of
// one worker id with one fence that way.
//
// X's take holds at its COMMIT until its context has ended; the pool has
// one connection, so Y's take gets the one X had, if X left it to the
// pool. Then every connection of that pool closes, and Y's claim must be
// in the table, as read through another pool. On PostgreSQL database/sql's
// Tx rolls back a transaction whose context ended, and the case runs to
// show that it still does.
func TestUnsentCommitLeavesNoTransaction(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		hdb, h := hooked(t, db.Driver, db.DSN)
		hdb.SetMaxOpenConns(1)
		ctx := context.Background()

		xctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		held := holdCommitUntilDone(h, xctx)
		rx := named(request(hdb, b.Dialect, "x"), "x@h@1@1")
		_, xerr := Take(xctx, rx)
		h.set(nil, nil)
		require.True(t, held(), "X's locked take never reached its COMMIT: the fault did not apply")
		require.Error(t, xerr, "X's take ended with its context at its COMMIT")

		ry := named(request(hdb, b.Dialect, "y"), "y@h@2@2")
		if b.Dialect == dialect.SQLite {
			// X left no pool on SQLite (its transaction was rolled
			// back): Y's take makes one.
			ry.Explicit, ry.WorkerID = true, 7
		}
		sy := take(t, ry)
		require.NoError(t, hdb.Close(), "close Y's pool, and whatever its connection left open")

		var (
			fence    int64
			instance sql.NullString
		)
		require.NoError(t, db.QueryRow(dbtest.Rebind(b.Dialect, "SELECT fence, instance FROM sys_sequence_slot WHERE worker_id = ?"),
			sy.WorkerID).Scan(&fence, &instance), "Y's slot row, read through another pool")
		require.Equal(t, "y@h@2@2", instance.String, "Y's claim of worker %d was committed", sy.WorkerID)
		require.Equal(t, sy.Fence, fence)
	})
}

// TestUnsentCommitKeepsMemoryDatabase: the same fault on an in-memory
// SQLite database of one connection, as docs/databases.md sets one up:
// there the connection is the database, so a take must end its
// transaction by a ROLLBACK, not by dropping the connection (which a
// first fix did: the database went, and a second take got the worker id a
// live holder had, at floor 1). A holds a worker id; X's take, a locked
// one for its longer TTL, has its context end before its COMMIT; then the
// pool is there still, A's row with it, and B's take does not get A's
// worker id below A's promise.
func TestUnsentCommitKeepsMemoryDatabase(t *testing.T) {
	dbtest.Selected(t, "sqlite")
	hdb, h := hooked(t, "sqlite", "file::memory:")
	hdb.SetMaxOpenConns(1)
	ctx := context.Background()

	ra := named(request(hdb, dialect.SQLite, "a"), "a@h@1@1")
	ra.TTL, ra.Horizon = 5*time.Second, 4*time.Second
	sa := take(t, ra)

	xctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	held := holdCommitUntilDone(h, xctx)
	rx := named(request(hdb, dialect.SQLite, "x"), "x@h@2@2")
	rx.TTL, rx.Horizon = 10*time.Second, 8*time.Second // longer than recorded: a locked take
	_, xerr := Take(xctx, rx)
	h.set(nil, nil)
	require.True(t, held(), "X's locked take never reached its COMMIT: the fault did not apply")
	require.Error(t, xerr, "X's take ended with its context at its COMMIT")

	var instance sql.NullString
	require.NoError(t, hdb.QueryRow("SELECT instance FROM sys_sequence_slot WHERE worker_id = ?", sa.WorkerID).Scan(&instance),
		"the in-memory database is still there, A's row in it")
	require.Equal(t, "a@h@1@1", instance.String)

	rb := named(request(hdb, dialect.SQLite, "b"), "b@h@3@3")
	rb.Explicit, rb.WorkerID = true, sa.WorkerID
	_, err := Take(ctx, rb)
	require.ErrorIs(t, err, ErrHeld, "A's worker id is live: B must not get it")
}

// holdCommitUntilDone makes h hold the first COMMIT until ctx has ended,
// and returns whether it did: the lease's COMMIT statement on MySQL and
// SQLite, a driver Tx's Commit on PostgreSQL (which database/sql calls
// once it has checked the context itself). holdFirst holds a statement
// until released, and never a driver Tx's Commit.
func holdCommitUntilDone(h *hooks, ctx context.Context) (held func() bool) {
	var (
		once sync.Once
		did  bool
	)
	hold := func() {
		once.Do(func() {
			did = true
			<-ctx.Done()
		})
	}
	h.set(func(q string) {
		if isStmt(q, "COMMIT") {
			hold()
		}
	}, hold)
	return func() bool { return did }
}

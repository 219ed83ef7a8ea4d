package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
	"github.com/entflake/entflake/schema"
)

// The lease on a database that answers serialization failures (SQLSTATE
// 40001), as CockroachDB and YugabyteDB do under their SERIALIZABLE
// default, on a statement or at COMMIT. PostgreSQL is made to answer them
// by triggers (dbtest.ForceSerializationFailures) that fail the first
// `failures` rows they see, then let them pass.

const failures = 2

var failAts = []dbtest.FailAt{dbtest.AtStatement, dbtest.AtCommit}

func slotRows(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM sys_sequence_slot").Scan(&n))
	return n
}

// TestForcedFailureAtCommit checks the means of these tests: with the
// deferred trigger, the UPDATE succeeds and COMMIT fails, the driver's error
// is a *pgconn.PgError with code 40001 that the lease classifies as a
// conflict, and nothing was committed; the pool works on.
func TestForcedFailureAtCommit(t *testing.T) {
	db := dbtest.PostgresLeaseTables(t)
	f := dbtest.ForceSerializationFailures(t, db.DB, "fail_check", "sys_sequence", dbtest.AtCommit, 1, "")
	tx, err := db.Begin()
	require.NoError(t, err)
	_, err = tx.Exec("UPDATE sys_sequence SET worker_id = 7 WHERE service_name = '__global__'")
	require.NoError(t, err, "the statement passes: the trigger is deferred")
	err = tx.Commit()
	var pg *pgconn.PgError
	require.ErrorAs(t, err, &pg, "COMMIT fails")
	assert.Equal(t, "40001", pg.Code)
	assert.True(t, retryable(err), "a conflict to retry")
	assert.True(t, answered(err), "the server's answer: the transaction did not commit")
	assert.ErrorIs(t, tx.Rollback(), sql.ErrTxDone, "the transaction is over")
	assert.Equal(t, int64(0), poolValue(t, db.DB), "nothing committed")
	assert.Equal(t, int64(1), f.Calls(t))
	// The same on an autocommit statement: its implicit COMMIT fails, and the
	// statement with it.
	f2 := dbtest.ForceSerializationFailures(t, db.DB, "fail_check2", "sys_sequence", dbtest.AtCommit, 1, "")
	_, err = db.Exec("UPDATE sys_sequence SET worker_id = 7 WHERE service_name = '__global__'")
	require.ErrorAs(t, err, &pg)
	assert.Equal(t, "40001", pg.Code)
	assert.Equal(t, int64(0), poolValue(t, db.DB), "nothing committed")
	assert.Equal(t, int64(1), f2.Calls(t))
	// And on UPDATE ... RETURNING read with QueryRow, as the counter is: the
	// row comes back, then the error of the implicit COMMIT, which Scan
	// reports (database/sql's Row.Scan closes the rows; pgconn reads the
	// ErrorResponse that follows CommandComplete).
	dbtest.ForceSerializationFailures(t, db.DB, "fail_check3", "sys_sequence", dbtest.AtCommit, 1, "")
	var v int64
	err = db.QueryRow("UPDATE sys_sequence SET worker_id = 8 WHERE service_name = '__global__' RETURNING worker_id").Scan(&v)
	require.ErrorAs(t, err, &pg, "Scan reports the failed COMMIT")
	assert.Equal(t, "40001", pg.Code)
	assert.Equal(t, int64(0), poolValue(t, db.DB))
}

// TestSerializationFailuresRetried: a 40001 on the take's insert and claim,
// on the counter, on a renewal and on a release, at the statement or at
// COMMIT, is retried within the deadline: each call succeeds, the trigger
// ran failures+1 times (the failures happened, then the retry passed), and
// the rows show exactly one write.
func TestSerializationFailuresRetried(t *testing.T) {
	ctx := func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	for _, at := range failAts {
		t.Run("insert/"+at.String(), func(t *testing.T) {
			db := dbtest.PostgresLeaseTables(t)
			f := dbtest.ForceSerializationFailures(t, db.DB, "fail_slot", "sys_sequence_slot", at, failures, "")
			r := request(db.DB, dialect.Postgres, "svc")
			slot, err := Take(ctx(t), r)
			require.NoError(t, err)
			// The rows are made, and the slot claimed, in the locked take's
			// one transaction: each conflict rolled it back, and it ran
			// again for the same worker id. The trigger saw the first row of
			// each refused try, then every row of the chunk made and the
			// claim.
			assert.Equal(t, int64(failures+1024+1), f.Calls(t))
			assert.Equal(t, int64(1), slot.WorkerID)
			assert.Zero(t, slot.Misses)
			assert.Equal(t, int64(1024), slotRows(t, db.DB), "one chunk, made once")
			var made int64
			require.NoError(t, db.QueryRow("SELECT worker_id FROM sys_sequence WHERE service_name = '__slots__'").Scan(&made))
			assert.Equal(t, int64(1024), made)
			got := slotOf(t, db.DB, slot.WorkerID)
			// Made at the database's clock in ms times 1000 (its
			// incarnation), then claimed once.
			assert.Equal(t, int64(1), got.beats%1000, "one write since the row was made")
			assert.Greater(t, got.beats, time.Now().Add(-time.Minute).UnixMilli()*1000)
			assert.Equal(t, slotState{fence: 1, beats: got.beats, expires: got.expires, promise: slot.Promise, instance: r.Instance}, got)
		})
		t.Run("claim/"+at.String(), func(t *testing.T) {
			db := dbtest.PostgresLeaseTables(t)
			r := request(db.DB, dialect.Postgres, "svc")
			first := take(t, r)
			free(t, db.DB, first.WorkerID)
			before := slotOf(t, db.DB, first.WorkerID)
			f := dbtest.ForceSerializationFailures(t, db.DB, "fail_slot", "sys_sequence_slot", at, failures, "")
			r.Explicit, r.WorkerID = true, first.WorkerID
			slot, err := Take(ctx(t), named(r, "second"))
			require.NoError(t, err)
			assert.Equal(t, int64(failures+1), f.Calls(t))
			// The claim was sent again only after reading the slot again: one
			// take's worth of change.
			got := slotOf(t, db.DB, first.WorkerID)
			assert.Equal(t, slotState{fence: before.fence + 1, beats: before.beats + 1, expires: got.expires,
				promise: slot.Promise, instance: "second"}, got)
			assert.Equal(t, before.fence+1, slot.Fence)
			assert.Equal(t, before.promise+1, slot.Floor)
		})
		t.Run("counter/"+at.String(), func(t *testing.T) {
			db := dbtest.PostgresLeaseTables(t)
			f := dbtest.ForceSerializationFailures(t, db.DB, "fail_counter", "sys_sequence", at, failures,
				"NEW.service_name = '__global__'")
			slot, err := Take(ctx(t), request(db.DB, dialect.Postgres, "svc"))
			require.NoError(t, err)
			assert.Equal(t, int64(failures+1), f.Calls(t))
			assert.Equal(t, int64(1), poolValue(t, db.DB), "the counter moved once")
			assert.Equal(t, int64(1), slot.WorkerID)
			// The lifetime lease's durable move and its audit row too.
			f2 := dbtest.ForceSerializationFailures(t, db.DB, "fail_counter2", "sys_sequence", at, failures, "")
			l := mustTakeForLife(t, request(db.DB, dialect.Postgres, "life"))
			assert.Equal(t, int64(2), l.WorkerID)
			assert.Equal(t, int64(2), serviceWorker(t, db.DB, dialect.Postgres, "life"))
			// failures, the move, the audit row.
			assert.Equal(t, int64(failures+2), f2.Calls(t))
		})
		t.Run("audit/"+at.String(), func(t *testing.T) {
			db := dbtest.PostgresLeaseTables(t)
			f := dbtest.ForceSerializationFailures(t, db.DB, "fail_audit", "sys_sequence", at, failures,
				"NEW.service_name <> '__global__'")
			require.NoError(t, Audit(ctx(t), db.DB, dialect.Postgres, "svc", "svc@host", 9))
			assert.Equal(t, int64(failures+1), f.Calls(t))
			assert.Equal(t, int64(9), serviceWorker(t, db.DB, dialect.Postgres, "svc"))
		})
		t.Run("renew/"+at.String(), func(t *testing.T) {
			db := dbtest.PostgresLeaseTables(t)
			slot := take(t, request(db.DB, dialect.Postgres, "svc"))
			before := slotOf(t, db.DB, slot.WorkerID)
			f := dbtest.ForceSerializationFailures(t, db.DB, "fail_slot", "sys_sequence_slot", at, failures, "")
			promise := slot.Promise + 1000
			require.NoError(t, Renew(ctx(t), holding(db.DB, dialect.Postgres, slot), time.Minute.Milliseconds(), promise))
			assert.Equal(t, int64(failures+1), f.Calls(t))
			got := slotOf(t, db.DB, slot.WorkerID)
			assert.Equal(t, before.beats+1, got.beats, "one renewal committed")
			assert.Equal(t, promise, got.promise)
			assert.Equal(t, before.fence, got.fence)
		})
		t.Run("release/"+at.String(), func(t *testing.T) {
			db := dbtest.PostgresLeaseTables(t)
			slot := take(t, request(db.DB, dialect.Postgres, "svc"))
			before := slotOf(t, db.DB, slot.WorkerID)
			f := dbtest.ForceSerializationFailures(t, db.DB, "fail_slot", "sys_sequence_slot", at, failures, "")
			last := slot.Floor + 5
			require.NoError(t, Release(ctx(t), holding(db.DB, dialect.Postgres, slot), last))
			assert.Equal(t, int64(failures+1), f.Calls(t))
			got := slotOf(t, db.DB, slot.WorkerID)
			assert.Equal(t, slotState{fence: before.fence, beats: before.beats + 1, expires: 0, promise: last,
				instance: before.instance}, got)
		})
	}
	t.Run("create tables", func(t *testing.T) {
		db := dbtest.Postgres(t)
		f := dbtest.ForceDDLSerializationFailures(t, db.DB, "fail_ddl", failures)
		slot, err := Take(ctx(t), request(db.DB, dialect.Postgres, "svc"))
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{schema.TableName, schema.SlotTableName}, slot.Created)
		// The first DDL command of each failed try, then every one of the
		// try that passed.
		assert.Greater(t, f.Calls(t), int64(failures+1))
		f.Remove(t)
		assert.Equal(t, int64(1024), slotRows(t, db.DB), "the first chunk of rows")
	})
}

// TestSerializationFailuresPersist: when the failures go on, the retries
// end by the deadline with the conflict as the error (not ErrLost, not a
// bare "context deadline exceeded"), having tried more than once, and
// nothing is written.
func TestSerializationFailuresPersist(t *testing.T) {
	const timeout = time.Second
	run := func(t *testing.T, f *dbtest.Failer, call func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		start := time.Now()
		err := call(ctx)
		elapsed := time.Since(start)
		require.Error(t, err)
		t.Log(err)
		// The conflict is the error, or, when the deadline passed during the
		// try after one, it is named beside the deadline's error.
		assert.False(t, errors.Is(err, ErrLost))
		assert.Contains(t, err.Error(), "40001")
		assert.Regexp(t, `no time left to try again|after \d+ conflicts`, err.Error())
		assert.Less(t, elapsed, timeout+2*time.Second, "bounded by the deadline")
		assert.Greater(t, f.Calls(t), int64(2), "retried")
	}
	for _, at := range failAts {
		t.Run("take/"+at.String(), func(t *testing.T) {
			db := dbtest.PostgresLeaseTables(t)
			f := dbtest.ForceSerializationFailures(t, db.DB, "fail_slot", "sys_sequence_slot", at, 1<<40, "")
			run(t, f, func(ctx context.Context) error {
				_, err := Take(ctx, request(db.DB, dialect.Postgres, "svc"))
				return err
			})
			assert.Equal(t, int64(0), slotRows(t, db.DB))
		})
		t.Run("explicit/"+at.String(), func(t *testing.T) {
			db := dbtest.PostgresLeaseTables(t)
			f := dbtest.ForceSerializationFailures(t, db.DB, "fail_slot", "sys_sequence_slot", at, 1<<40, "")
			r := request(db.DB, dialect.Postgres, "svc")
			r.Explicit, r.WorkerID = true, 5
			run(t, f, func(ctx context.Context) error {
				_, err := Take(ctx, r)
				return err
			})
			assert.Equal(t, int64(0), slotRows(t, db.DB))
		})
		t.Run("counter/"+at.String(), func(t *testing.T) {
			db := dbtest.PostgresLeaseTables(t)
			f := dbtest.ForceSerializationFailures(t, db.DB, "fail_counter", "sys_sequence", at, 1<<40, "")
			run(t, f, func(ctx context.Context) error {
				_, err := Take(ctx, request(db.DB, dialect.Postgres, "svc"))
				return err
			})
			assert.Equal(t, int64(0), poolValue(t, db.DB))
		})
		for _, what := range []string{"renew", "release"} {
			t.Run(what+"/"+at.String(), func(t *testing.T) {
				db := dbtest.PostgresLeaseTables(t)
				slot := take(t, request(db.DB, dialect.Postgres, "svc"))
				before := slotOf(t, db.DB, slot.WorkerID)
				f := dbtest.ForceSerializationFailures(t, db.DB, "fail_slot", "sys_sequence_slot", at, 1<<40, "")
				h := holding(db.DB, dialect.Postgres, slot)
				run(t, f, func(ctx context.Context) error {
					if what == "renew" {
						return Renew(ctx, h, time.Minute.Milliseconds(), slot.Promise+1000)
					}
					return Release(ctx, h, slot.Floor)
				})
				assert.Equal(t, before, slotOf(t, db.DB, slot.WorkerID), "nothing written")
			})
		}
	}
	t.Run("create tables", func(t *testing.T) {
		db := dbtest.Postgres(t)
		f := dbtest.ForceDDLSerializationFailures(t, db.DB, "fail_ddl", 1<<40)
		run(t, f, func(ctx context.Context) error {
			_, err := Take(ctx, request(db.DB, dialect.Postgres, "svc"))
			return err
		})
		var n int
		require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM pg_tables WHERE tablename LIKE 'sys_sequence%'").Scan(&n))
		assert.Zero(t, n, "no table left behind")
	})
}

// TestRetryableTiDB: TiDB's answers that mean "rolled back, run it again"
// are conflicts; its catch-all 1105 is one only with the lock-retry message,
// since 1105 also reports errors no retry can get past.
func TestRetryableTiDB(t *testing.T) {
	for _, c := range []struct {
		err  *mysql.MySQLError
		want bool
	}{
		{&mysql.MySQLError{Number: 1105, Message: "pessimistic lock retry limit reached"}, true},
		{&mysql.MySQLError{Number: 1105, Message: "other error: region unavailable"}, false},
		{&mysql.MySQLError{Number: 8002, Message: "[tikv:8002]can not retry select for update statement"}, true},
		{&mysql.MySQLError{Number: 8005, Message: "Write Conflict, txnStartTS is stale"}, true},
		{&mysql.MySQLError{Number: 9007, Message: "Write conflict, txnStartTS=1, conflictStartTS=2 [try again later]"}, true},
		{&mysql.MySQLError{Number: 8022, Message: "Error: KV error safe to retry"}, true},
		{&mysql.MySQLError{Number: 8028, Message: "Information schema is changed during the execution of the statement"}, true},
		{&mysql.MySQLError{Number: 1064, Message: "You have an error in your SQL syntax"}, false},
		{&mysql.MySQLError{Number: 8004, Message: "Transaction is too large"}, false},
	} {
		wrapped := fmt.Errorf("take: %w", c.err)
		assert.Equal(t, c.want, retryable(wrapped), "%d %s", c.err.Number, c.err.Message)
	}
}

// TestTiDBOptimisticConflictRetried: on TiDB with tidb_txn_mode
// 'optimistic' (an application's choice, or a cluster's default before
// v3.0.8), two transactions that write the pool row both get through their
// statements and one fails at COMMIT with a write conflict; the lease
// classifies it as a conflict, and retryConflicts runs the loser again to
// success. On MariaDB there is no optimistic mode: the test says so and
// skips; tidb/run runs it.
func TestTiDBOptimisticConflictRetried(t *testing.T) {
	db := dbtest.MySQL(t)
	if !dbtest.TiDB(t) {
		t.Skip("TiDB only (tidb/run); MariaDB has no optimistic transactions")
	}
	ddl, err := schema.DDL(dialect.MySQL)
	require.NoError(t, err)
	for _, stmt := range ddl {
		_, err = db.Exec(stmt)
		require.NoError(t, err)
	}
	ctx := context.Background()
	conn := func() *sql.Conn {
		c, err := db.Conn(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		_, err = c.ExecContext(ctx, "SET SESSION tidb_txn_mode = 'optimistic'")
		require.NoError(t, err)
		return c
	}
	a, b := conn(), conn()
	tries := 0
	err = retryConflicts(ctx, func() error {
		tries++
		tx, err := a.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, "UPDATE sys_sequence SET worker_id = worker_id + 1 WHERE service_name = '__global__'"); err != nil {
			return err
		}
		if tries == 1 {
			// Another writer commits the same row in between: a's
			// COMMIT must fail.
			_, err := b.ExecContext(ctx, "UPDATE sys_sequence SET worker_id = worker_id + 10 WHERE service_name = '__global__'")
			require.NoError(t, err)
		}
		err = tx.Commit()
		if tries == 1 {
			var my *mysql.MySQLError
			require.ErrorAs(t, err, &my, "the first COMMIT fails with TiDB's answer")
			t.Logf("first COMMIT: %v", err)
		}
		return err
	})
	require.NoError(t, err)
	assert.Equal(t, 2, tries, "one conflict, then through")
	assert.Equal(t, int64(11), poolValue(t, db.DB), "b's +10 and a's +1 once")
}

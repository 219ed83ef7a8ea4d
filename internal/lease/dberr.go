package lease

import (
	"strings"

	"github.com/entflake/entflake/internal/dberr"
)

// The lease tells some database errors apart (a missing table, a duplicate
// key, a lock conflict worth retrying) by what package dberr reads of them.

// classify finds the database's own error in err's chain (dberr.Read).
func classify(err error) (dbError, bool) { return dberr.Read(err) }

// dbError is what the lease knows of an error that came from a database.
type dbError = dberr.Error

// missingTable: MySQL 1146 (ER_NO_SUCH_TABLE), PostgreSQL 42P01
// (undefined_table), SQLite's "no such table" (a plain SQLITE_ERROR).
func missingTable(err error) bool {
	e, ok := classify(err)
	return ok && (e.MySQL == 1146 || e.PG == "42P01" || (e.SQLite != 0 && strings.Contains(e.Text, "no such table")))
}

// retryable: a conflict that a second try can get past. MySQL 1213
// (deadlock, the transaction was rolled back) and 1205 (lock wait timeout);
// TiDB's own conflicts (see tidbConflict); PostgreSQL 40001
// (serialization_failure), 40P01 (deadlock_detected) and 55P03
// (lock_not_available); SQLite SQLITE_BUSY and SQLITE_LOCKED with their
// extended codes.
func retryable(err error) bool {
	e, ok := classify(err)
	if !ok {
		return false
	}
	switch {
	case e.MySQL == 1213 || e.MySQL == 1205:
		return true
	case tidbConflict(e):
		return true
	case e.PG == "40001" || e.PG == "40P01" || e.PG == "55P03":
		return true
	case e.SQLite != 0 && (e.SQLite&0xff == 5 || e.SQLite&0xff == 6):
		return true
	}
	return false
}

// tidbConflict: TiDB's answers that mean the transaction lost a conflict
// and was rolled back, so that running it again from its start is safe (as
// TiDB's error reference says of each):
//   - 1105 with "pessimistic lock retry limit reached": a pessimistic
//     statement kept meeting newer writes to its rows (the pool row, under a
//     storm of takes) and TiDB gave up retrying it inside the server. 1105 is
//     MySQL's catch-all ER_UNKNOWN_ERROR, so only this message is a
//     conflict; any other 1105 is not retried;
//   - 8002: a SELECT ... FOR UPDATE transaction met a write conflict at
//     commit (optimistic mode);
//   - 8005 and 9007: write conflicts (optimistic mode, or
//     tidb_txn_mode='optimistic' set by the application);
//   - 8022: "KV error safe to retry";
//   - 8028: the schema changed while the transaction ran (another copy's
//     DDL on the lease tables, at first start).
func tidbConflict(e dbError) bool {
	switch e.MySQL {
	case 1105:
		return strings.Contains(e.Text, "pessimistic lock retry limit reached")
	case 8002, 8005, 9007, 8022, 8028:
		return true
	}
	return false
}

// serialization: PostgreSQL 40001, a REPEATABLE READ or SERIALIZABLE
// default that makes a single UPDATE fail under concurrency.
func serialization(err error) bool {
	e, ok := classify(err)
	return ok && e.PG == "40001"
}

// answered reports whether the server answered with an error of its own: the
// statement did not take effect. When it is false (the connection broke, or
// the context ended while the statement ran), it may have.
func answered(err error) bool {
	_, ok := classify(err)
	return ok
}

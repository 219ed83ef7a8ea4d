package lease

import (
	"reflect"
	"strings"
)

// The lease tells some database errors apart (a missing table, a duplicate
// key, a lock conflict worth retrying) without importing the drivers, so
// that an application on one database does not link the others'. It reads
// the fields the drivers' error types have had for years:
// go-sql-driver/mysql's *MySQLError.Number, pgx's *pgconn.PgError.Code (the
// SQLSTATE), and modernc.org/sqlite's (*Error).Code() (the extended result
// code).

// dbError is what the lease knows of an error that came from a database.
type dbError struct {
	mysql  uint16 // MySQL/MariaDB error number, or 0
	pg     string // PostgreSQL SQLSTATE, or ""
	sqlite int    // SQLite extended result code, or 0
	text   string
}

// classify finds the database's own error in err's chain; ok is false when
// there is none (a broken connection, a context that ended, a driver's own
// check): then the server may or may not have run the statement.
func classify(err error) (e dbError, ok bool) {
	for _, x := range chain(err) {
		if c, isSQLite := x.(interface{ Code() int }); isSQLite && strings.Contains(reflect.TypeOf(x).String(), "sqlite") {
			return dbError{sqlite: c.Code(), text: x.Error()}, true
		}
		v := reflect.ValueOf(x)
		if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
			continue
		}
		s := v.Elem()
		if f := s.FieldByName("Number"); f.IsValid() && f.Kind() == reflect.Uint16 {
			return dbError{mysql: uint16(f.Uint()), text: x.Error()}, true
		}
		if f, sev := s.FieldByName("Code"), s.FieldByName("Severity"); f.IsValid() && f.Kind() == reflect.String && sev.IsValid() {
			return dbError{pg: f.String(), text: x.Error()}, true
		}
	}
	return dbError{}, false
}

// chain lists err and everything it wraps, depth first.
func chain(err error) []error {
	var out []error
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		out = append(out, e)
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	return out
}

// missingTable: MySQL 1146 (ER_NO_SUCH_TABLE), PostgreSQL 42P01
// (undefined_table), SQLite's "no such table" (a plain SQLITE_ERROR).
func missingTable(err error) bool {
	e, ok := classify(err)
	return ok && (e.mysql == 1146 || e.pg == "42P01" || (e.sqlite != 0 && strings.Contains(e.text, "no such table")))
}

// duplicateKey: MySQL 1062 (ER_DUP_ENTRY), PostgreSQL 23505
// (unique_violation), SQLite SQLITE_CONSTRAINT_PRIMARYKEY (1555) and
// SQLITE_CONSTRAINT_UNIQUE (2067).
func duplicateKey(err error) bool {
	e, ok := classify(err)
	return ok && (e.mysql == 1062 || e.pg == "23505" || e.sqlite == 1555 || e.sqlite == 2067)
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
	case e.mysql == 1213 || e.mysql == 1205:
		return true
	case tidbConflict(e):
		return true
	case e.pg == "40001" || e.pg == "40P01" || e.pg == "55P03":
		return true
	case e.sqlite != 0 && (e.sqlite&0xff == 5 || e.sqlite&0xff == 6):
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
	switch e.mysql {
	case 1105:
		return strings.Contains(e.text, "pessimistic lock retry limit reached")
	case 8002, 8005, 9007, 8022, 8028:
		return true
	}
	return false
}

// serialization: PostgreSQL 40001, a REPEATABLE READ or SERIALIZABLE
// default that makes a single UPDATE fail under concurrency.
func serialization(err error) bool {
	e, ok := classify(err)
	return ok && e.pg == "40001"
}

// answered reports whether the server answered with an error of its own: the
// statement did not take effect. When it is false (the connection broke, or
// the context ended while the statement ran), it may have.
func answered(err error) bool {
	_, ok := classify(err)
	return ok
}

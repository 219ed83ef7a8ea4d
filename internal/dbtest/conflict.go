package dbtest

import (
	"database/sql"
	"fmt"
	"strconv"
	"testing"

	"entgo.io/ent/dialect"

	"github.com/entflake/entflake/schema"
)

// Forced serialization failures on PostgreSQL. CockroachDB and YugabyteDB
// run SERIALIZABLE by default and answer SQLSTATE 40001 (serialization
// failure) whenever they cannot order a transaction, on a statement or at
// COMMIT; the client is expected to run the transaction again. PostgreSQL
// under READ COMMITTED never raises 40001 for an UPDATE, so these tests
// make it: a trigger raises 40001 for its first n rows, then lets rows
// pass. It counts calls on a sequence, which does not roll back with the
// failed transaction, so the count proves how many failures happened.

// FailAt says where a forced failure strikes.
type FailAt int

const (
	// AtStatement: a BEFORE INSERT OR UPDATE row trigger; the statement
	// fails.
	AtStatement FailAt = iota
	// AtCommit: a deferred constraint trigger (AFTER INSERT OR UPDATE, FOR
	// EACH ROW, DEFERRABLE INITIALLY DEFERRED); the statement succeeds and
	// COMMIT fails (the implicit one of an autocommit statement included).
	AtCommit
)

// String names where the failure strikes.
func (a FailAt) String() string {
	if a == AtCommit {
		return "commit"
	}
	return "statement"
}

// Failer is a forced failure installed by ForceSerializationFailures.
type Failer struct {
	db    *sql.DB
	name  string
	table string // "" for an event trigger
}

// ForceSerializationFailures installs, in db (a database of Postgres), a
// row trigger named name on table that raises SQLSTATE 40001 for the first
// n rows it sees at at, when the condition when (a trigger WHEN expression
// on NEW, or "") holds.
func ForceSerializationFailures(t testing.TB, db *sql.DB, name, table string, at FailAt, n int64, when string) *Failer {
	t.Helper()
	f := &Failer{db: db, name: name, table: table}
	f.function(t, "trigger", n, "RETURN NEW;")
	cond := ""
	if when != "" {
		cond = "WHEN (" + when + ") "
	}
	stmt := fmt.Sprintf("CREATE TRIGGER %s BEFORE INSERT OR UPDATE ON %s FOR EACH ROW %sEXECUTE FUNCTION %s()", name, table, cond, name)
	if at == AtCommit {
		stmt = fmt.Sprintf("CREATE CONSTRAINT TRIGGER %s AFTER INSERT OR UPDATE ON %s DEFERRABLE INITIALLY DEFERRED "+
			"FOR EACH ROW %sEXECUTE FUNCTION %s()", name, table, cond, name)
	}
	f.exec(t, stmt)
	return f
}

// ForceDDLSerializationFailures installs, in db (a database of Postgres),
// an event trigger named name that makes the first n DDL commands (CREATE
// TABLE, CREATE INDEX, ...) fail with SQLSTATE 40001. It needs a superuser.
func ForceDDLSerializationFailures(t testing.TB, db *sql.DB, name string, n int64) *Failer {
	t.Helper()
	f := &Failer{db: db, name: name}
	f.function(t, "event_trigger", n, "")
	f.exec(t, fmt.Sprintf("CREATE EVENT TRIGGER %s ON ddl_command_end EXECUTE FUNCTION %s()", name, name))
	return f
}

func (f *Failer) function(t testing.TB, returns string, n int64, end string) {
	t.Helper()
	f.exec(t, "CREATE SEQUENCE "+f.name)
	f.exec(t, fmt.Sprintf(`CREATE FUNCTION %[1]s() RETURNS %[2]s LANGUAGE plpgsql AS $f$
BEGIN
	IF nextval('%[1]s') <= %[3]s THEN
		RAISE EXCEPTION 'forced serialization failure (%[1]s)' USING ERRCODE = '40001';
	END IF;
	%[4]s
END
$f$`, f.name, returns, strconv.FormatInt(n, 10), end))
}

func (f *Failer) exec(t testing.TB, stmt string) {
	t.Helper()
	if _, err := f.db.Exec(stmt); err != nil {
		t.Fatalf("force serialization failures: %s: %v", stmt, err)
	}
}

// Calls is how many times the trigger ran: the failures it raised, then
// the rows it let pass.
func (f *Failer) Calls(t testing.TB) int64 {
	t.Helper()
	var n int64
	if err := f.db.QueryRow("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM " + f.name).Scan(&n); err != nil {
		t.Fatalf("read %s: %v", f.name, err)
	}
	return n
}

// Remove drops the trigger (the sequence stays, for Calls).
func (f *Failer) Remove(t testing.TB) {
	t.Helper()
	if f.table == "" {
		f.exec(t, "DROP EVENT TRIGGER "+f.name)
		return
	}
	f.exec(t, fmt.Sprintf("DROP TRIGGER %s ON %s", f.name, f.table))
}

// PostgresLeaseTables is a fresh PostgreSQL database with the lease's
// tables (schema.DDL: the tables and the counter row, as a first take
// leaves them) and no slot.
func PostgresLeaseTables(t testing.TB) *DB {
	t.Helper()
	db := Postgres(t)
	stmts, err := schema.DDL(dialect.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return db
}

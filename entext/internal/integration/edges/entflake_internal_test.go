package edges

import (
	"testing"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/sqlgraph"
)

// TestEntflakeMariaDBReturning: the bulk upsert's one statement with
// RETURNING (entflakeBulkPath) is chosen for MariaDB 10.5 and later only,
// by the server's VERSION(); MySQL and TiDB, whose VERSION() looks like an
// old MySQL's, have no RETURNING.
func TestEntflakeMariaDBReturning(t *testing.T) {
	for v, want := range map[string]bool{
		"10.11.19-MariaDB-0+deb12u1": true,
		"10.5.0-MariaDB":             true,
		"11.4.2-MariaDB-ubu2404":     true,
		"5.5.5-10.6.12-MariaDB-log":  true, // the prefix some proxies add
		"10.4.32-MariaDB":            false,
		"10.3.39-MariaDB-0+deb10u1":  false,
		"8.0.36":                     false,
		"8.4.0-commercial":           false,
		"8.0.11-TiDB-v7.5.0":         false,
		"5.7.44-log":                 false,
		"":                           false,
	} {
		if got := entflakeMariaDBReturning(v); got != want {
			t.Errorf("entflakeMariaDBReturning(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestEntflakeKeysKept: the SELECT after a MySQL or TiDB bulk upsert finds
// a stored row by the unique key it was met on, so an update that may
// write a key column with anything but its stored value or the row's own
// sends the batch per row (entflakeBulkSelect). Columns read inside the
// expressions of other columns do not count.
func TestEntflakeKeysKept(t *testing.T) {
	node := &sqlgraph.CreateSpec{Table: "users", ID: &sqlgraph.FieldSpec{Column: "id"},
		Fields: []*sqlgraph.FieldSpec{{Column: "name"}, {Column: "age"}}}
	keys := [][]string{{"name"}}
	guard := entflakeKeepBatchID(dialect.MySQL, "id", true)
	for name, c := range map[string]struct {
		opts []sql.ConflictOption
		kept bool
	}{
		"UpdateNewValues": {[]sql.ConflictOption{sql.ResolveWithNewValues()}, true},
		"Ignore":          {[]sql.ConflictOption{sql.ResolveWithIgnore()}, true},
		"age only": {[]sql.ConflictOption{sql.ResolveWith(func(s *sql.UpdateSet) {
			s.Set("age", sql.Expr("CHAR_LENGTH(`users`.`name`) = 1"))
		})}, true},
		"a new name": {[]sql.ConflictOption{sql.ResolveWith(func(s *sql.UpdateSet) { s.Set("name", "x") })}, false},
		"the new name and more": {[]sql.ConflictOption{sql.ResolveWith(func(s *sql.UpdateSet) {
			s.Set("name", sql.Expr("CONCAT(VALUES(`name`), 'x')"))
		})}, false},
		"the new name, then more": {[]sql.ConflictOption{sql.ResolveWith(func(s *sql.UpdateSet) {
			s.Set("name", sql.Expr("VALUES(`name`) + 1"))
		})}, false},
	} {
		col, kept := entflakeKeysKept(node, append(c.opts, guard), keys)
		if kept != c.kept {
			t.Errorf("%s: kept %v (%q), want %v", name, kept, col, c.kept)
		}
	}
}

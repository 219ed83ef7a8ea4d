// Package adopt makes the id column of an existing table what the
// SnowflakeID mixin declares: a plain BIGINT primary key that numbers no
// rows itself. A table that ent made before the mixin was added has
// MySQL's AUTO_INCREMENT (MySQL, MariaDB, TiDB), PostgreSQL's IDENTITY, or
// on SQLite an INTEGER PRIMARY KEY AUTOINCREMENT (an alias of the rowid).
// Left so, a build that sets no id (the previous release, a script, a
// rollback) inserts max+1 beside the generator, an ID the generator may
// issue next; once adopted, the same INSERT fails with the server's own
// error (MySQL 1364, PostgreSQL 23502, SQLite's NOT NULL constraint).
//
// ent's migration does not make the change by itself: Atlas's MySQL diff
// compares no column's AUTO_INCREMENT, its SQLite diff sees INTEGER and
// BIGINT as one type affinity, and its PostgreSQL planner fails on an
// IDENTITY to drop ("unexpected attribute change (expect IDENTITY)"). The
// package finds the columns from the inspected and the desired schema and
// adds the changes that Atlas's planners render (Merge): MODIFY COLUMN on
// MySQL, the table rebuild on SQLite, and on PostgreSQL the DROP IDENTITY
// carried in the column's type change. So the change is in every plan
// ent writes: Schema.Create's, WriteTo's, Diff's and NamedDiff's.
package adopt

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"ariga.io/atlas/sql/mysql"
	"ariga.io/atlas/sql/postgres"
	atlas "ariga.io/atlas/sql/schema"
	"ariga.io/atlas/sql/sqlite"
	"entgo.io/ent/dialect"
)

// What numbers a column's rows, as Numbering names it.
const (
	AutoIncrement = "AUTO_INCREMENT"                              // MySQL, MariaDB, TiDB
	Identity      = "IDENTITY"                                    // PostgreSQL
	Serial        = "serial (a DEFAULT nextval of its sequence)"  // PostgreSQL, before IDENTITY
	Default       = "a DEFAULT"                                   // any dialect: a sequence's next value, an expression
	Rowid         = "INTEGER PRIMARY KEY (an alias of the rowid)" // SQLite
)

// Column is an id column that numbers rows by itself, and that adoption
// changes.
type Column struct {
	Table, Column string
	// Numbering is what numbers its rows: AutoIncrement, Identity or Rowid.
	Numbering string
}

func (c Column) String() string {
	return fmt.Sprintf("%s.%s (%s)", c.Table, c.Column, c.Numbering)
}

// Found is a Column with what the change is made from: the inspected
// table and column, and the desired ones (the ent schema's, or for Strip
// the inspected ones without their numbering).
type Found struct {
	Column
	From, To   *atlas.Table
	FromC, ToC *atlas.Column
}

// Numbering names what makes column c of the inspected table t number rows
// when an INSERT gives it none, "" if nothing does. An inspected SQLite
// table is told by the CREATE statement that Atlas's inspection keeps.
func Numbering(t *atlas.Table, c *atlas.Column) string {
	return numbering(t, c, has[*sqlite.CreateStmt](t.Attrs))
}

// numbering is Numbering of a table of SQLite or not: a desired (ent)
// table says nothing of its dialect, and is judged as the inspected table
// of the same name is.
func numbering(t *atlas.Table, c *atlas.Column, onSQLite bool) string {
	if _, ok := c.Type.Type.(*postgres.SerialType); ok {
		return Serial
	}
	for _, a := range c.Attrs {
		switch a.(type) {
		case *mysql.AutoIncrement:
			return AutoIncrement
		case *postgres.Identity:
			return Identity
		case *sqlite.AutoIncrement:
			return Rowid
		}
	}
	// SQLite: a lone INTEGER PRIMARY KEY is the rowid, AUTOINCREMENT or
	// not (https://www.sqlite.org/lang_createtable.html#rowid); only that
	// type name, in any case, makes the alias ("BIGINT" does not), and
	// not in a WITHOUT ROWID table.
	if onSQLite && soleKey(t, c) && strings.EqualFold(typeName(c), "integer") && !has[*sqlite.WithoutRowID](t.Attrs) {
		return Rowid
	}
	// A default numbers rows too when it is a sequence's next value (a
	// PostgreSQL sequence Atlas does not take for the column's serial,
	// MariaDB's NEXT VALUE FOR): any default of the id is dropped.
	if c.Default != nil {
		return Default
	}
	return ""
}

// typeName is the column's declared type: as inspected (Raw), or as
// desired (the integer type's name).
func typeName(c *atlas.Column) string {
	if c.Type == nil {
		return ""
	}
	if c.Type.Raw != "" {
		return c.Type.Raw
	}
	if it, ok := c.Type.Type.(*atlas.IntegerType); ok {
		return it.T
	}
	return ""
}

// has reports whether attrs holds an attribute of type T.
func has[T atlas.Attr](attrs []atlas.Attr) bool {
	for _, a := range attrs {
		if _, ok := a.(T); ok {
			return true
		}
	}
	return false
}

// soleKey reports whether c is t's primary key on its own.
func soleKey(t *atlas.Table, c *atlas.Column) bool {
	pk := t.PrimaryKey
	return pk != nil && len(pk.Parts) == 1 && pk.Parts[0].C != nil && pk.Parts[0].C.Name == c.Name
}

// Find returns, in desired's order, the tables of desired that current
// holds whose primary key is one integer column that numbers rows in
// current and does not in desired: an ent type given the mixin after its
// table was made. A table whose desired id numbers rows (a type without
// the mixin) is not among them, whatever current says.
func Find(current, desired *atlas.Schema) []Found {
	var found []Found
	for _, dt := range desired.Tables {
		ct, ok := current.Table(dt.Name)
		if !ok || dt.PrimaryKey == nil || len(dt.PrimaryKey.Parts) != 1 || dt.PrimaryKey.Parts[0].C == nil {
			continue
		}
		dc := dt.PrimaryKey.Parts[0].C
		cc, ok := ct.Column(dc.Name)
		if !ok || !soleKey(ct, cc) || !integer(dc) || !integer(cc) {
			continue
		}
		onSQLite := has[*sqlite.CreateStmt](ct.Attrs)
		if n := numbering(ct, cc, onSQLite); n != "" && numbering(dt, dc, onSQLite) == "" {
			found = append(found, Found{Column: Column{Table: dt.Name, Column: dc.Name, Numbering: n},
				From: ct, To: dt, FromC: cc, ToC: dc})
		}
	}
	return found
}

// integer reports whether c's type is an integer one (PostgreSQL's serial
// types, as Atlas inspects them, among them).
func integer(c *atlas.Column) bool {
	switch c.Type.Type.(type) {
	case *atlas.IntegerType, *postgres.SerialType:
		return true
	}
	return false
}

// Merge returns changes with each found column's change in its table's
// ModifyTable (made if changes has none for the table), in place of any
// change of that column already there, whose other parts it keeps.
//
//   - MySQL: a ModifyColumn, which Atlas renders as MODIFY COLUMN with the
//     desired column's whole definition, without AUTO_INCREMENT (InnoDB
//     keeps the foreign keys that reference it; the type is unchanged).
//   - SQLite: a ModifyColumn of the type, which makes Atlas rebuild the
//     table from the desired definition (new table, copy, drop, rename),
//     with PRAGMA foreign_keys off around it. That PRAGMA does nothing
//     inside a transaction, where the DROP TABLE's implicit DELETE would
//     fire the ON DELETE actions of the tables that reference it (ent's
//     M2M join tables cascade): ent's SQLite migration turns foreign keys
//     off before its transaction and checks them before its commit, and
//     AdoptTables on one connection does the same.
//   - PostgreSQL: Atlas's open-source planner has no DROP IDENTITY (it
//     fails on the ChangeAttr its own diff reports). The column's type
//     change carries it: "ALTER COLUMN id TYPE bigint USING id, ALTER
//     COLUMN id DROP IDENTITY IF EXISTS", one ALTER TABLE. The same type
//     with USING the column itself rewrites nothing (PostgreSQL keeps the
//     table's file, its indexes and the foreign keys that reference it);
//     the sequence the identity owned is dropped with it.
func Merge(changes []atlas.Change, found []Found) []atlas.Change {
	for _, f := range found {
		var mt *atlas.ModifyTable
		for _, c := range changes {
			if m, ok := c.(*atlas.ModifyTable); ok && m.T != nil && m.T.Name == f.Table {
				mt = m
				break
			}
		}
		if mt == nil {
			mt = &atlas.ModifyTable{T: f.To}
			changes = append(changes, mt)
		}
		var kind atlas.ChangeKind
		kept := mt.Changes[:0:0]
		for _, c := range mt.Changes {
			if m, ok := c.(*atlas.ModifyColumn); ok && m.From != nil && m.From.Name == f.Column.Column {
				kind |= m.Change
				continue
			}
			kept = append(kept, c)
		}
		mc := &atlas.ModifyColumn{From: f.FromC, To: f.ToC}
		switch f.Numbering {
		case Identity:
			id := `"` + strings.ReplaceAll(f.ToC.Name, `"`, `""`) + `"`
			mc.Change = kind&^atlas.ChangeAttr | atlas.ChangeType
			mc.Extra = []atlas.Clause{&postgres.ConvertUsing{X: id + ", ALTER COLUMN " + id + " DROP IDENTITY IF EXISTS"}}
		case Rowid, Serial:
			// SQLite: the rebuild. PostgreSQL's serial: Atlas drops the
			// default and the sequence the column owned.
			mc.Change = kind | atlas.ChangeType
		case Default:
			mc.Change = kind | atlas.ChangeDefault
		default:
			mc.Change = kind | atlas.ChangeAttr
		}
		mt.Changes = append(kept, mc)
	}
	return changes
}

// Strip returns Found for the named tables of current (inspected) whose
// id numbers rows, each with a desired table that is the inspected one
// without the numbering: for a database with no ent schema at hand (the
// CLI). A table that is missing, or whose primary key is not one integer
// column, is an error naming it; one already adopted is left out.
func Strip(current *atlas.Schema, tables []string) ([]Found, error) {
	var found []Found
	for _, name := range tables {
		ct, ok := current.Table(name)
		if !ok {
			return nil, fmt.Errorf("%w: no table %q", ErrTable, name)
		}
		pk := ct.PrimaryKey
		if pk == nil || len(pk.Parts) != 1 || pk.Parts[0].C == nil || !integer(pk.Parts[0].C) {
			return nil, fmt.Errorf("%w: table %q: its primary key is not one integer column", ErrTable, name)
		}
		cc := pk.Parts[0].C
		n := Numbering(ct, cc)
		if n == "" {
			continue
		}
		tc := *cc
		tc.Attrs, tc.Default = without(cc.Attrs), nil
		switch st, _ := cc.Type.Type.(*postgres.SerialType); {
		case n == Rowid:
			tc.Type = &atlas.ColumnType{Type: &atlas.IntegerType{T: "bigint"}, Raw: "bigint"}
		case st != nil:
			it := st.IntegerType()
			tc.Type = &atlas.ColumnType{Type: it, Raw: it.T}
		}
		dt := *ct
		dt.Attrs = without(ct.Attrs)
		dt.Columns = make([]*atlas.Column, len(ct.Columns))
		for i, c := range ct.Columns {
			if c == cc {
				c = &tc
			}
			dt.Columns[i] = c
		}
		dpk := *pk
		dpk.Attrs = without(pk.Attrs)
		dpk.Parts = []*atlas.IndexPart{{SeqNo: pk.Parts[0].SeqNo, C: &tc, Desc: pk.Parts[0].Desc}}
		dpk.Table = &dt
		dt.PrimaryKey = &dpk
		found = append(found, Found{Column: Column{Table: name, Column: cc.Name, Numbering: n},
			From: ct, To: &dt, FromC: cc, ToC: &tc})
	}
	return found, nil
}

// without returns attrs without the ones that number rows, and without
// SQLite's inspected CREATE statement (the rebuild writes its own).
func without(attrs []atlas.Attr) []atlas.Attr {
	var out []atlas.Attr
	for _, a := range attrs {
		switch a.(type) {
		case *mysql.AutoIncrement, *postgres.Identity, *sqlite.AutoIncrement, *sqlite.CreateStmt:
			continue
		}
		out = append(out, a)
	}
	return out
}

// PlainIdentity returns cmd, a statement Atlas planned, as a plain
// "ALTER TABLE t ALTER COLUMN id DROP IDENTITY IF EXISTS" when it is the
// change Merge made for a found column whose type stays (the DROP
// IDENTITY carried in a same-type TYPE change): the type change, although
// it rewrites nothing, is refused on a column that a view uses or that is
// part of a partition key, where the plain statement is not. A statement
// with more to it (the type changes too, or ent changes more of the
// column) is returned as it is.
func PlainIdentity(cmd string, found []Found) string {
	for _, f := range found {
		if f.Numbering != Identity {
			continue
		}
		from, err1 := postgres.FormatType(f.FromC.Type.Type)
		to, err2 := postgres.FormatType(f.ToC.Type.Type)
		if err1 != nil || err2 != nil || from != to {
			continue
		}
		id := Quote(dialect.Postgres, f.ToC.Name)
		carried := " ALTER COLUMN " + id + " TYPE " + to + " USING " + id + ", ALTER COLUMN " + id + " DROP IDENTITY IF EXISTS"
		if table, ok := strings.CutSuffix(cmd, carried); ok && strings.HasPrefix(table, "ALTER TABLE ") &&
			strings.HasSuffix(table, Quote(dialect.Postgres, f.Table)) {
			return table + " ALTER COLUMN " + id + " DROP IDENTITY IF EXISTS"
		}
	}
	return cmd
}

// SQLiteRebuildable refuses, naming the table and why, a SQLite table that
// the rebuild would change in more than its id: the rebuild makes the
// table again from what Atlas's inspection reads of it, which has no
// triggers (they are dropped with the table), no COLLATE of a column (a
// unique NOCASE column would then take 'A' beside 'a'), no DEFERRABLE of
// a foreign key and no STRICT; and a view that names the table stops the
// DROP TABLE. ent makes none of these; such a table is changed by hand
// (docs/ent.md, "Adopting in an existing project").
func SQLiteRebuildable(ctx context.Context, q Querier, cols []Column) error {
	for _, c := range cols {
		if c.Numbering != Rowid {
			continue
		}
		name := "'" + strings.ReplaceAll(c.Table, "'", "''") + "'"
		for _, check := range []struct{ what, query string }{
			{"it has triggers, which the rebuild would drop",
				"SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = " + name},
			{"a view names it, which stops the rebuild's DROP TABLE",
				"SELECT COUNT(*) FROM sqlite_master WHERE type = 'view' AND instr(lower(sql), lower(" + name + ")) > 0"},
			{"its CREATE TABLE has COLLATE, DEFERRABLE or STRICT, which the rebuild would not keep",
				"SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = " + name +
					" AND (instr(upper(sql), 'COLLATE') > 0 OR instr(upper(sql), 'DEFERRABLE') > 0 OR instr(upper(sql), 'STRICT') > 0)"},
		} {
			n, err := q(ctx, check.query)
			if err != nil {
				return fmt.Errorf("entflake: adopt: read the schema of %q: %w", c.Table, err)
			}
			if n.Int64 > 0 {
				return fmt.Errorf("%w: table %q: %s: change its id by hand (docs/ent.md, \"Adopting in an existing project\")",
					ErrTable, c.Table, check.what)
			}
		}
	}
	return nil
}

// ErrTable: a table named for adoption is missing or has no single integer
// primary key.
var ErrTable = errors.New("entflake: adopt")

// ErrIDsAhead: a table to adopt already holds an id at or above the first
// one the generator can issue.
var ErrIDsAhead = errors.New("entflake: adopt: a table holds ids the generator can issue")

// ErrForeignKeysOn: on SQLite, foreign keys are on inside the migration's
// transaction, where the rebuild's DROP TABLE would fire the ON DELETE
// actions of the tables that reference the table (ent's M2M join tables
// cascade) and PRAGMA foreign_keys cannot turn them off. ent's SQLite
// migration turns them off before its transaction, on a connection of the
// pool: with more than one connection open, the transaction may be on
// another.
var ErrForeignKeysOn = errors.New("entflake: adopt: foreign keys are on inside the migration's transaction (SQLite)")

// Querier runs a query that answers one integer (NULL: Valid false).
type Querier func(ctx context.Context, query string) (sql.NullInt64, error)

// Check refuses, naming the table, any found column whose table holds an
// id at or above first, the lowest ID a generator issues from now on: the
// generator's IDs would not sort above it, and could be it. ids above it
// can only have come from an earlier generator or by hand.
func Check(ctx context.Context, q Querier, d string, cols []Column, first int64) error {
	for _, c := range cols {
		max, err := q(ctx, "SELECT MAX("+Quote(d, c.Column)+") FROM "+Quote(d, c.Table))
		if err != nil {
			return fmt.Errorf("entflake: adopt: read the largest id of %q: %w", c.Table, err)
		}
		if max.Valid && max.Int64 >= first {
			return fmt.Errorf("%w: %q holds id %d, at or above %d, the first id the generator issues now: "+
				"its new ids would not sort above the old ones, and could be one of them; renumber those rows, "+
				"or give the generator an epoch whose ids start above them", ErrIDsAhead, c.Table, max.Int64, first)
		}
	}
	return nil
}

// Quote quotes an identifier for dialect d.
func Quote(d, name string) string {
	if d == dialect.MySQL {
		return "`" + strings.ReplaceAll(name, "`", "``") + "`"
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// TiDBAllow and TiDBRestore go around TiDB's statements: TiDB refuses to
// remove AUTO_INCREMENT (error 8200, "can't remove auto_increment without
// @@tidb_allow_remove_auto_inc enabled") unless the session allows it; the
// session's value goes back to the server's default after.
const (
	TiDBAllow   = "SET SESSION tidb_allow_remove_auto_inc = 1"
	TiDBRestore = "SET SESSION tidb_allow_remove_auto_inc = DEFAULT"
)

// IsTiDB reports whether a VERSION() answer is TiDB's ("8.0.11-TiDB-v8.4.0").
func IsTiDB(version string) bool { return strings.Contains(version, "TiDB") }

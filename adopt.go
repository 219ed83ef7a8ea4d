package entflake

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	atlasmigrate "ariga.io/atlas/sql/migrate"
	"ariga.io/atlas/sql/mysql"
	"ariga.io/atlas/sql/postgres"
	atlas "ariga.io/atlas/sql/schema"
	"ariga.io/atlas/sql/sqlite"
	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	entschema "entgo.io/ent/dialect/sql/schema"

	"github.com/entflake/entflake/internal/adopt"
	"github.com/entflake/entflake/internal/redact"
	"github.com/entflake/entflake/internal/snowflake"
	"github.com/entflake/entflake/schema"
)

var (
	// ErrAdoptIDsAhead is the error of an adoption whose table already
	// holds an id at or above the first one the generator issues now: the
	// new ids would not sort above the old ones, and could be one of them.
	// The error names the table and the id.
	ErrAdoptIDsAhead = adopt.ErrIDsAhead
	// ErrAdoptTable is the error naming a table that is not there, whose
	// primary key is not one integer column, or (SQLite) that the rebuild
	// would change in more than its id (triggers, a view that names it,
	// COLLATE, DEFERRABLE, STRICT).
	ErrAdoptTable = adopt.ErrTable
	// ErrAdoptForeignKeys is the error of Schema.Create given Adopt on
	// SQLite when foreign keys are on inside ent's migration transaction:
	// the rebuild's DROP TABLE would then delete the rows of ent's M2M join
	// tables (ON DELETE CASCADE), and the check before the commit, finding
	// nothing dangling, would let it commit. ent turns them off before its
	// transaction, on a connection of the pool, which is not always the
	// transaction's: run the migration on a pool of one connection
	// (db.SetMaxOpenConns(1)), or adopt with AdoptTables first.
	ErrAdoptForeignKeys = adopt.ErrForeignKeysOn
)

// Adopt is the ent migration option that makes the tables of an existing
// ent project the SnowflakeID mixin's once the mixin is added to their
// types: an id column that ent made AUTO_INCREMENT (MySQL, MariaDB, TiDB),
// IDENTITY (PostgreSQL) or an INTEGER PRIMARY KEY AUTOINCREMENT rowid
// (SQLite) loses it, its values and the foreign keys that reference it
// kept. Give it to each of the generated migrate package's calls:
//
//	err := client.Schema.Create(ctx, entflake.Adopt(opts...))       // migrate
//	err := client.Schema.WriteTo(ctx, os.Stdout, entflake.Adopt())  // the plan, first
//	err := migrate.NamedDiff(ctx, url, "adopt", entflake.Adopt())   // a versioned migration file
//
// Without it, ent's migration leaves the columns as they are on MySQL and
// SQLite (so a build that sets no id still inserts, with max+1, an ID the
// generator may issue), and fails on PostgreSQL ("unexpected attribute
// change (expect IDENTITY)"). Once adopted, an INSERT without an id fails
// with the server's error: MySQL's 1364, PostgreSQL's 23502, SQLite's NOT
// NULL constraint.
//
// Which columns: those the ent schema declares with no numbering (the
// mixin's id) and the database has with one; a type without the mixin is
// left as it is. The change is part of the plan (Atlas renders it:
// MODIFY COLUMN on MySQL, DROP IDENTITY on PostgreSQL, a table rebuild on
// SQLite), so WriteTo and NamedDiff show it.
//
// Before Schema.Create or WriteTo change anything, Adopt reads each such
// table's largest id and refuses (ErrAdoptIDsAhead, naming the table) one
// at or above the first ID the generator issues now, and logs each column
// it changes (at INFO, before the change runs). opts are those given to Open; Adopt reads WithEpoch,
// WithClock and WithLogger from them and ignores the rest. On TiDB it
// allows the change for its session (tidb_allow_remove_auto_inc). On
// SQLite the rebuild runs as ent's SQLite migration runs every rebuild:
// foreign keys off before its transaction (PRAGMA foreign_keys does
// nothing inside one), PRAGMA foreign_key_check before the commit, which
// fails on any row that lost what it references. NamedDiff makes no data check
// (a migration file is applied elsewhere): run AdoptTables without apply,
// or "entflake adopt", on the database first. See docs/ent.md "Adopting in
// an existing project".
func Adopt(opts ...Option) entschema.MigrateOption {
	c := newConfig(opts)
	return func(a *entschema.Atlas) {
		var found []adopt.Found // this migration's; each Create makes its own Atlas
		entschema.WithDiffHook(func(next entschema.Differ) entschema.Differ {
			return entschema.DiffFunc(func(current, desired *atlas.Schema) ([]atlas.Change, error) {
				if _, err := c.firstID(); err != nil {
					return nil, fmt.Errorf("entflake: Adopt: %w", err)
				}
				changes, err := next.Diff(current, desired)
				if err != nil {
					return nil, err
				}
				found = adopt.Find(current, desired)
				return adopt.Merge(changes, found), nil
			})
		})(a)
		entschema.WithApplyHook(func(next entschema.Applier) entschema.Applier {
			return entschema.ApplyFunc(func(ctx context.Context, conn dialect.ExecQuerier, plan *atlasmigrate.Plan) error {
				if len(found) == 0 {
					return next.Apply(ctx, conn, plan)
				}
				cols := columns(found)
				d := dialectOf(found)
				q := entQuerier(conn)
				first, err := c.firstID()
				if err != nil {
					return err
				}
				if err := adopt.Check(ctx, q, d, cols, first); err != nil {
					return err
				}
				tidb := false
				switch d {
				case dialect.SQLite:
					if err := adopt.SQLiteRebuildable(ctx, q, cols); err != nil {
						return err
					}
					if writesOnly(conn) {
						break // WriteTo's: it runs nothing, and its queries go to the pool
					}
					on, err := q(ctx, "PRAGMA foreign_keys")
					if err != nil {
						return fmt.Errorf("entflake: Adopt: read PRAGMA foreign_keys: %w", err)
					}
					if on.Int64 != 0 {
						return fmt.Errorf("%w: the rebuild would delete the rows that reference the tables; run the "+
							"migration on a pool of one connection (db.SetMaxOpenConns(1)), or adopt with AdoptTables first",
							ErrAdoptForeignKeys)
					}
				case dialect.Postgres:
					for _, ch := range plan.Changes {
						ch.Cmd = adopt.PlainIdentity(ch.Cmd, found)
					}
				case dialect.MySQL:
					if tidb, err = isTiDB(ctx, conn); err != nil {
						return err
					}
					if tidb {
						plan.Changes = append(append([]*atlasmigrate.Change{{Cmd: adopt.TiDBAllow}}, plan.Changes...),
							&atlasmigrate.Change{Cmd: adopt.TiDBRestore})
					}
				}
				// Before the plan runs, so that a failure is logged beside
				// what it was doing; WriteTo's "apply" writes the plan.
				for _, col := range cols {
					c.logger.Info("entflake: Adopt: the migration drops the id column's numbering; "+
						"an INSERT without an id fails from then on",
						"table", col.Table, "column", col.Column, "dropped", col.Numbering)
				}
				err = next.Apply(ctx, conn, plan)
				if err != nil && tidb {
					// The plan's own restore did not run: the session, a
					// connection of the pool, gets the server's default back.
					if rerr := conn.Exec(context.WithoutCancel(ctx), adopt.TiDBRestore, []any{}, nil); rerr != nil {
						err = errors.Join(err, fmt.Errorf("entflake: Adopt: %s: %w", adopt.TiDBRestore, rerr))
					}
				}
				return err
			})
		})(a)
	}
}

// writesOnly reports whether conn, the migration's transaction, is a
// driver posing as one (dialect.NopTx), as ent's WriteTo gives the plan:
// it can open transactions itself, which no transaction can. ent's SQLite
// migration wraps it (schema.SQLiteTx).
func writesOnly(conn dialect.ExecQuerier) bool {
	if st, ok := conn.(*entschema.SQLiteTx); ok {
		conn = st.Tx
	}
	_, ok := conn.(interface {
		Tx(context.Context) (dialect.Tx, error)
	})
	return ok
}

// firstID is the lowest ID a generator with c's epoch issues from now on.
func (c *config) firstID() (int64, error) {
	now := time.Now()
	if c.clock != nil {
		now = c.clock.Now()
	}
	if err := snowflake.ValidateEpoch(c.epoch.UnixMilli(), now); err != nil {
		return 0, err
	}
	return (now.UnixMilli() - c.epoch.UnixMilli()) << snowflake.TimeShift, nil
}

func columns(found []adopt.Found) []adopt.Column {
	cols := make([]adopt.Column, len(found))
	for i, f := range found {
		cols[i] = f.Column
	}
	return cols
}

// dialectOf is the dialect the found columns' numbering belongs to.
func dialectOf(found []adopt.Found) string {
	switch found[0].Numbering {
	case adopt.Identity, adopt.Serial:
		return dialect.Postgres
	case adopt.Rowid:
		return dialect.SQLite
	}
	return dialect.MySQL
}

// entQuerier answers one integer through ent's ExecQuerier.
func entQuerier(conn dialect.ExecQuerier) adopt.Querier {
	return func(ctx context.Context, query string) (sql.NullInt64, error) {
		var (
			rows entsql.Rows
			v    sql.NullInt64
		)
		if err := conn.Query(ctx, query, []any{}, &rows); err != nil {
			return v, err
		}
		defer rows.Close()
		if rows.Next() {
			if err := rows.Scan(&v); err != nil {
				return v, err
			}
		}
		return v, rows.Err()
	}
}

func isTiDB(ctx context.Context, conn dialect.ExecQuerier) (bool, error) {
	var rows entsql.Rows
	if err := conn.Query(ctx, "SELECT VERSION()", []any{}, &rows); err != nil {
		return false, fmt.Errorf("entflake: adopt: read the server's version: %w", err)
	}
	defer rows.Close()
	var v string
	if rows.Next() {
		if err := rows.Scan(&v); err != nil {
			return false, err
		}
	}
	return adopt.IsTiDB(v), rows.Err()
}

// AdoptedColumn is an id column that AdoptTables changes.
type AdoptedColumn struct {
	Table, Column string
	// Numbering is what numbered the column's rows: "AUTO_INCREMENT",
	// "IDENTITY", PostgreSQL's serial, or SQLite's "INTEGER PRIMARY KEY
	// (an alias of the rowid)".
	Numbering string
	// MaxID is the largest id the table holds (0: no rows).
	MaxID int64
}

// Adoption is what AdoptTables found, and the statements that make (or,
// with apply, made) the change.
type Adoption struct {
	// Columns are the id columns to change, in the order asked; a table
	// already adopted is not among them.
	Columns []AdoptedColumn
	// FirstID is the first ID the generator issues now; every MaxID is
	// below it.
	FirstID int64
	// Statements are the change, in the order they run: one statement
	// each, as a migration file would hold them.
	Statements []string
	// Applied: the statements ran, and the change is committed.
	Applied bool
}

// AdoptTables makes the id columns of the named tables the SnowflakeID
// mixin's, as Adopt does within ent's migration, for a database with no
// ent schema at hand: the CLI's "entflake adopt", a migration job, the
// statements of a versioned migration file. Without apply it changes
// nothing and returns the plan.
//
// A table that is missing, or whose primary key is not one integer
// column, is ErrAdoptTable; one that holds an id at or above the first ID
// the generator issues now is ErrAdoptIDsAhead; both before anything
// changes. A table already adopted is skipped. opts as for Adopt.
//
// How each dialect runs it: MySQL and MariaDB one MODIFY COLUMN per table
// (DDL commits by itself); TiDB the same, with the session's
// tidb_allow_remove_auto_inc set around it; PostgreSQL one ALTER TABLE per
// table, in one transaction; SQLite, on one connection, foreign keys off,
// the rebuild in one transaction, PRAGMA foreign_key_check (any dangling
// reference rolls it back), foreign keys on again.
func AdoptTables(ctx context.Context, db *sql.DB, dialectName string, tables []string, apply bool, opts ...Option) (Adoption, error) {
	out, err := adoptTables(ctx, db, dialectName, tables, apply, opts)
	return out, redact.Error(err)
}

func adoptTables(ctx context.Context, db *sql.DB, d string, tables []string, apply bool, opts []Option) (Adoption, error) {
	var out Adoption
	if err := schema.CheckDialect(d); err != nil {
		return out, err
	}
	if db == nil {
		return out, fmt.Errorf("entflake: AdoptTables: %w: no database", ErrInvalidOption)
	}
	if len(tables) == 0 {
		return out, fmt.Errorf("%w: no tables named", ErrAdoptTable)
	}
	c := newConfig(opts)
	first, err := c.firstID()
	if err != nil {
		return out, fmt.Errorf("entflake: AdoptTables: %w", err)
	}
	out.FirstID = first
	conn, err := db.Conn(ctx) // one session: TiDB's setting and SQLite's PRAGMA are per connection
	if err != nil {
		return out, fmt.Errorf("entflake: adopt: connect: %w", err)
	}
	defer conn.Close()
	var drv atlasmigrate.Driver
	switch d {
	case dialect.MySQL:
		drv, err = mysql.Open(conn)
	case dialect.Postgres:
		drv, err = postgres.Open(conn)
	default:
		drv, err = sqlite.Open(conn)
	}
	if err != nil {
		return out, fmt.Errorf("entflake: adopt: open the schema inspector: %w", err)
	}
	current, err := drv.InspectSchema(ctx, "", &atlas.InspectOptions{Tables: tables})
	if err != nil {
		return out, fmt.Errorf("entflake: adopt: inspect the tables: %w", err)
	}
	found, err := adopt.Strip(current, tables)
	if err != nil {
		return out, err
	}
	cols := columns(found)
	q := func(ctx context.Context, query string) (sql.NullInt64, error) {
		var v sql.NullInt64
		return v, conn.QueryRowContext(ctx, query).Scan(&v)
	}
	for _, col := range cols {
		max, err := q(ctx, "SELECT MAX("+adopt.Quote(d, col.Column)+") FROM "+adopt.Quote(d, col.Table))
		if err != nil {
			return out, fmt.Errorf("entflake: adopt: read the largest id of %q: %w", col.Table, err)
		}
		out.Columns = append(out.Columns, AdoptedColumn{Table: col.Table, Column: col.Column, Numbering: col.Numbering, MaxID: max.Int64})
	}
	if err := adopt.Check(ctx, q, d, cols, first); err != nil {
		return out, err
	}
	if len(found) == 0 {
		return out, nil
	}
	if d == dialect.SQLite {
		if err := adopt.SQLiteRebuildable(ctx, q, cols); err != nil {
			return out, err
		}
		// The check after the rebuild must find only what the rebuild
		// did: rows that already reference missing rows are refused first.
		var table, parent string
		var rowid sql.NullInt64
		var fkid int64
		switch err := conn.QueryRowContext(ctx, "PRAGMA foreign_key_check").Scan(&table, &rowid, &parent, &fkid); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return out, fmt.Errorf("entflake: adopt: PRAGMA foreign_key_check: %w", err)
		default:
			return out, fmt.Errorf("%w: a row of %q already references a missing row of %q (PRAGMA foreign_key_check): "+
				"the rebuild's check would fail on it; fix those rows first", ErrAdoptTable, table, parent)
		}
	}
	// No schema qualifier, as ent's own plans: the statements run in the
	// connection's schema (a migration file's too).
	plan, err := drv.PlanChanges(ctx, "adopt", adopt.Merge(nil, found), func(o *atlasmigrate.PlanOptions) {
		o.SchemaQualifier = new(string)
	})
	if err != nil {
		return out, fmt.Errorf("entflake: adopt: plan the change: %w", err)
	}
	var stmts []string
	for _, ch := range plan.Changes {
		if d == dialect.SQLite && strings.HasPrefix(ch.Cmd, "PRAGMA foreign_keys") {
			continue // turned off and on around the transaction, below
		}
		stmts = append(stmts, adopt.PlainIdentity(ch.Cmd, found))
	}
	tidb := false
	if d == dialect.MySQL {
		var v string
		if err := conn.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
			return out, fmt.Errorf("entflake: adopt: read the server's version: %w", err)
		}
		tidb = adopt.IsTiDB(v)
	}
	switch {
	case tidb:
		out.Statements = append(append([]string{adopt.TiDBAllow}, stmts...), adopt.TiDBRestore)
	case d == dialect.SQLite:
		out.Statements = append(append([]string{"PRAGMA foreign_keys = off", "BEGIN"}, stmts...),
			"PRAGMA foreign_key_check", "COMMIT", "PRAGMA foreign_keys = on")
	case d == dialect.Postgres:
		out.Statements = append(append([]string{"BEGIN"}, stmts...), "COMMIT")
	default:
		out.Statements = stmts
	}
	if !apply {
		return out, nil
	}
	if err := runAdoption(ctx, conn, d, out.Statements); err != nil {
		return out, err
	}
	out.Applied = true
	for _, col := range cols {
		c.logger.Info("entflake: AdoptTables: the id column numbers no rows now; an INSERT without an id fails",
			"table", col.Table, "column", col.Column, "dropped", col.Numbering)
	}
	return out, nil
}

// runAdoption runs the statements on conn, stopping at the first error;
// what an open transaction did is rolled back, SQLite's foreign keys are
// turned on again and TiDB's session setting restored, whatever happened.
// On MySQL, MariaDB and TiDB each DDL statement commits by itself: the
// error says which statements ran, and running the adoption again does
// the rest (a table already adopted is skipped).
func runAdoption(ctx context.Context, conn *sql.Conn, d string, stmts []string) (err error) {
	inTx, allowed, ran := false, false, 0
	defer func() {
		if err == nil {
			return
		}
		undo := context.WithoutCancel(ctx)
		var rerr, ferr, terr error
		if inTx {
			_, rerr = conn.ExecContext(undo, "ROLLBACK")
		}
		if d == dialect.SQLite {
			_, ferr = conn.ExecContext(undo, "PRAGMA foreign_keys = on")
		}
		if allowed {
			_, terr = conn.ExecContext(undo, adopt.TiDBRestore)
		}
		if cleanup := errors.Join(rerr, ferr, terr); cleanup != nil {
			err = errors.Join(err, cleanup)
			if d != dialect.SQLite {
				// Dropped, not pooled inside the transaction or with the
				// session setting on (database/sql drops a connection only
				// for driver.ErrBadConn). A SQLite connection is kept: an
				// in-memory database is its connection.
				_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}
		if d == dialect.MySQL && ran > 0 {
			err = fmt.Errorf("%w (%d statements before it ran, and committed: running the adoption again does the rest)", err, ran)
		}
	}()
	for _, s := range stmts {
		if s == "PRAGMA foreign_key_check" {
			// Any row that references a missing row: the rebuild lost or
			// changed one. One row of the answer names the table.
			var (
				table, parent string
				rowid         sql.NullInt64
				fkid          int64
			)
			switch qerr := conn.QueryRowContext(ctx, s).Scan(&table, &rowid, &parent, &fkid); {
			case errors.Is(qerr, sql.ErrNoRows):
			case qerr != nil:
				return fmt.Errorf("entflake: adopt: %s: %w", s, qerr)
			default:
				return fmt.Errorf("entflake: adopt: after the rebuild, a row of %q references a missing row of %q: rolled back", table, parent)
			}
			continue
		}
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("entflake: adopt: %s: %w", s, err)
		}
		switch s {
		case "BEGIN":
			inTx = true
		case "COMMIT":
			inTx = false
		case adopt.TiDBAllow:
			allowed = true
		case adopt.TiDBRestore:
			allowed = false
		default:
			ran++
		}
	}
	return nil
}

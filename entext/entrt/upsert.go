package entrt

import (
	"context"
	"fmt"
	"math"
	"strings"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/sqlgraph"
)

// UpsertOne returns the conflict options of the upsert of the row of spec
// (spec.OnConflict are the caller's), and the driver to run it on in place
// of the client's: the caller's options (DoNothing made ResolveWithIgnore on
// MySQL, see callerOptions), then keepID's, which keep the stored row's
// primary key and report its id. generated reports whether the create's id
// is the one the hook generated (IDState.Generated): only such an id gets
// the guard.
//
// On MySQL the driver is an insertDriver that tells an insert from an
// update by the INSERT's affected rows (oneInsert), since the OK packet's
// insert id is not always the id: elsewhere it is the client's own.
//
// Options that make no statement on their own (OnConflictColumns with no
// resolution) are returned as they are on PostgreSQL and SQLite, so that
// ent's statement fails as it does without entflake, writing nothing. On
// MySQL ent adds an update of its own to them (id = LAST_INSERT_ID(id), for
// an AUTO_INCREMENT id), which makes them Ignore: entflake's update of the
// id does the same.
func (c *Client) UpsertOne(spec *sqlgraph.CreateSpec, generated bool) ([]sql.ConflictOption, dialect.Driver) {
	d := c.dialect()
	caller := readClause(d, spec, spec.OnConflict)
	if d != dialect.MySQL && !caller.renders {
		return spec.OnConflict, c.Driver
	}
	inserted := new(int64)
	opts := append(caller.options(), keepID(d, spec, generated, inserted))
	if d != dialect.MySQL {
		return opts, c.Driver
	}
	drv := c.Driver
	if r, ok := drv.(*insertDriver); ok {
		drv = r.Driver // the builder saved again: its driver is the last Save's
	}
	return opts, &insertDriver{Driver: drv, insert: c.oneInsert(spec, inserted, c.InTx)}
}

// oneInsert runs the INSERT of a single upsert on MySQL (spec, whose id is
// inserted as LAST_INSERT_ID(<id>) and updated as LAST_INSERT_ID(id):
// keepID) and makes the insert id of its result the stored row's id, which
// sqlgraph reads and writes the edges with. MySQL, MariaDB and TiDB put
// into the OK packet's insert id the value of an AUTO_INCREMENT column the
// statement generated, if the table has one besides the id (an inserted
// row generates it), before LAST_INSERT_ID(expr)'s: so the id comes from
// the affected rows, which INSERT ... ON DUPLICATE KEY UPDATE counts as 1
// for an inserted row, 2 for an updated one and 0 for an update that
// changed nothing. Checked on MariaDB 10.11 and TiDB: with a column
// seq BIGINT AUTO_INCREMENT UNIQUE, an insert says 1 row and insert id 1
// (seq), an update 2 rows and the stored id, a no-op update 0 rows and
// the stored id. With the client flag CLIENT_FOUND_ROWS (go-sql-driver's
// clientFoundRows=true) a no-op update counts 1 too; so 1 row and an insert
// id other than the inserted one is settled by asking whether the
// inserted id is now a stored row's (on the statement's connection and
// transaction): if it is, the row was inserted.
//
// On a table with a trigger, MariaDB's OK packet carries no insert id for
// an updated row (0: checked on 10.11 with a BEFORE UPDATE trigger), while
// the session's LAST_INSERT_ID() holds the stored id: it is read on the
// statement's own connection, which pinned says the INSERT ran on (a
// transaction: the caller's, the batch's, or sqlgraph's for edges). A
// single upsert outside one, into a table with triggers (Server.Table),
// runs in a transaction of its own for that; no id is ever reported as 0.
func (c *Client) oneInsert(spec *sqlgraph.CreateSpec, inserted *int64, pinned bool) insertFunc {
	return func(ctx context.Context, drv dialect.ExecQuerier, query string, args, v any) error {
		if _, tx := drv.(dialect.Tx); !pinned && !tx {
			t, err := c.Server.Table(ctx, c.Driver, spec.Schema, spec.Table)
			if err != nil {
				return err
			}
			if t.Triggers > 0 {
				return c.batchTx(ctx, func(tx dialect.Driver) error { return c.runOne(ctx, tx, spec, inserted, query, args, v) })
			}
		}
		return c.runOne(ctx, drv, spec, inserted, query, args, v)
	}
}

// runOne runs the INSERT of oneInsert on drv, and reads the stored row's id
// (see oneInsert).
func (c *Client) runOne(ctx context.Context, drv dialect.ExecQuerier, spec *sqlgraph.CreateSpec, inserted *int64, query string, args, v any) error {
	var res sql.Result
	if err := drv.Exec(ctx, query, args, &res); err != nil {
		return err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	switch {
	case n == 1 && id != *inserted:
		stored, err := holds(ctx, drv, spec, *inserted)
		if err != nil {
			return err
		}
		if stored {
			id = *inserted
		}
	case id == 0:
		rows := &sql.Rows{}
		if err := drv.Query(ctx, "SELECT LAST_INSERT_ID()", []any{}, rows); err != nil {
			return fmt.Errorf("entflake: upsert into %s: the id of the row it updated: %w", spec.Table, err)
		}
		id, err = sql.ScanInt64(rows)
		rows.Close()
		if err != nil || id == 0 {
			return fmt.Errorf("entflake: upsert into %s: the server told no id for the row it updated (%v)", spec.Table, err)
		}
	}
	if r, ok := v.(*sql.Result); ok {
		*r = result{id: id, rows: n}
	}
	return nil
}

// holds reports whether the table of spec has a row with the id id.
func holds(ctx context.Context, drv dialect.ExecQuerier, spec *sqlgraph.CreateSpec, id int64) (bool, error) {
	from := quote(spec.Table)
	if spec.Schema != "" {
		from = quote(spec.Schema) + "." + from
	}
	rows := &sql.Rows{}
	if err := drv.Query(ctx, "SELECT COUNT(*) FROM "+from+" WHERE "+quote(spec.ID.Column)+" = ?", []any{id}, rows); err != nil {
		return false, fmt.Errorf("entflake: upsert into %s: %w", spec.Table, err)
	}
	defer rows.Close()
	n, err := sql.ScanInt64(rows)
	return n > 0, err
}

// result is the result of an INSERT as entflake read it.
type result struct{ id, rows int64 }

// LastInsertId implements sql.Result.
func (r result) LastInsertId() (int64, error) { return r.id, nil }

// RowsAffected implements sql.Result.
func (r result) RowsAffected() (int64, error) { return r.rows, nil }

// keepID is the conflict option added to every upsert of an entity type
// with the SnowflakeID mixin, for the row of spec: the row an upsert
// updates keeps its primary key (the ID of the create was assigned before
// the INSERT, and sql.ResolveWithNewValues would write it over the stored
// one), the ID reported is the stored row's, and a row that holds an id the
// hook generated is never updated.
//
// On PostgreSQL and SQLite the id keeps its stored value in DO UPDATE SET,
// and RETURNING gives the stored id. MySQL has no RETURNING: sqlgraph takes
// the id from the OK packet's last insert id, and writes the edges' keys
// with it before any hook sees it. Only LAST_INSERT_ID(expr) sets that
// value for an id that is not AUTO_INCREMENT, so the id is inserted as
// LAST_INSERT_ID(<id>) (sqlgraph applies the conflict options just before
// it adds the id to the INSERT, and renders a value that is an sql.Querier
// as SQL) and the update sets id = LAST_INSERT_ID(id): the OK packet then
// carries the inserted id, or the updated row's. (A table with an
// AUTO_INCREMENT column besides the id puts that column's value in the OK
// packet of an insert instead: see Client.oneInsert.)
//
// A row that already holds the id the hook just generated is another
// instance's (a worker id held twice). MySQL's ON DUPLICATE KEY UPDATE
// fires on the primary key whatever the target, and PostgreSQL and SQLite
// reach the update for it when the conflict target is the id
// (OnConflictColumns("id"), a helper that upserts by an id it may lack):
// the update would overwrite that row. For a generated id the update of the
// id column is therefore a guard, CASE WHEN id = <id> THEN <an error> ELSE
// id END, whose error stops the statement before it writes: an integer
// overflow (overflow). The tripwire (Client.InsertFailed,
// entflake.Insert.Upsert) then finds the row with that id and reports the
// collision. An id the caller set may update the row it names, and so may
// an id a later hook set in place of the generated one.
//
// The id inserted is written to inserted, once sqlgraph applies the option.
func keepID(d string, spec *sqlgraph.CreateSpec, generated bool, inserted *int64) sql.ConflictOption {
	var (
		column = spec.ID.Column
		id     int64 // the id inserted, once sqlgraph applies the option
	)
	keep := sql.ResolveWith(func(s *sql.UpdateSet) {
		c := s.Table().C(column)
		if d != dialect.MySQL {
			id, _ = spec.ID.Value.(int64) // set by now: the statement is being rendered
			*inserted = id
		}
		s.Set(column, sql.ExprFunc(func(b *sql.Builder) {
			stored := c
			if d == dialect.MySQL {
				stored = "LAST_INSERT_ID(" + c + ")"
			}
			if !generated {
				b.WriteString(stored)
				return
			}
			b.WriteString("CASE WHEN ").WriteString(c).WriteString(" = ").Arg(id).
				WriteString(" THEN ").WriteString(overflow(d, c)).
				WriteString(" ELSE ").WriteString(stored).WriteString(" END")
		}))
	})
	if d != dialect.MySQL {
		return keep
	}
	return before(keep, func() {
		if v, ok := spec.ID.Value.(int64); ok {
			id, *inserted = v, v
			spec.ID.Value = sql.Expr("LAST_INSERT_ID(?)", v)
		}
	})
}

// callerClause is what the caller's conflict options of a create or a
// batch make, read from one rendering of them under PostgreSQL's dialect on
// a scratch INSERT of the row's table and columns (readClause). Once per
// batch: an option renders ent's generated code, which for UpdateNewValues
// visits every builder of the batch, a thousand at a thousand rows.
type callerClause struct {
	// opts are the caller's options as they are put before entflake's own:
	// a new slice, with DoNothing made ResolveWithIgnore on MySQL (see
	// readClause).
	opts []sql.ConflictOption
	// renders is set when they make a statement on the client's dialect:
	// options with no resolution for the update (OnConflictColumns alone),
	// or with a value the builder refuses (Refused), make none.
	renders bool
	// nothing is set for DO NOTHING, and skips for DO UPDATE ... WHERE:
	// on PostgreSQL and SQLite, which return no row for a row they skip.
	nothing, skips bool
}

// readClause renders the conflict options opts of the create node on
// dialect d once (callerClause). Whether they make a statement, DO NOTHING
// and DO UPDATE ... WHERE are read from PostgreSQL's rendering, where DO
// NOTHING is a clause of its own (MySQL renders it as an update of every
// column to itself, as Ignore does). A MySQL statement is made by every
// option PostgreSQL renders, and by DO NOTHING too, which ent turns into
// Ignore there; only where PostgreSQL's rendering fails are they rendered
// again as MySQL, whose conflict clause names no target to be refused.
// What a MySQL statement's update writes is read from the statement itself
// when it is sent (keysKept): a rendering of another dialect need not mean
// the same (a DO NOTHING renders no update at all, and an option may
// render by dialect).
//
// On MySQL, the DoNothing options give way to one ResolveWithIgnore after
// the caller's other options, which is what ent makes of them there (MySQL
// has no DO NOTHING: ent appends Ignore after every option, so an update
// the caller added is overridden), but before the option that sets the
// id: ent's own substitution comes last, and would set id = id over it,
// leaving the OK packet with an id no row has. The options are rendered
// one by one only when all of them together render DO NOTHING.
func readClause(d string, node *sqlgraph.CreateSpec, opts []sql.ConflictOption) callerClause {
	columns := []string{node.ID.Column}
	for _, f := range node.Fields {
		columns = append(columns, f.Column)
	}
	scratch := func(d string) (string, error) {
		q, _, err := sql.Dialect(d).Insert(node.Table).Columns(columns...).Values(make([]any, len(columns))...).
			OnConflict(opts...).QueryErr()
		return q, err
	}
	q, err := scratch(dialect.Postgres)
	cc := callerClause{
		opts:    append(make([]sql.ConflictOption, 0, len(opts)+1), opts...),
		renders: err == nil,
		nothing: strings.HasSuffix(q, " DO NOTHING"),
	}
	if _, update, found := strings.Cut(q, " DO UPDATE SET "); found {
		cc.skips = strings.Contains(update, " WHERE ")
	}
	if !cc.renders && d == dialect.MySQL {
		_, err = scratch(dialect.MySQL)
		cc.renders = err == nil
	}
	if d == dialect.MySQL && cc.nothing {
		cc.opts = cc.opts[:0]
		for _, o := range opts {
			if !strings.HasSuffix(clause(dialect.Postgres, o), " DO NOTHING") {
				cc.opts = append(cc.opts, o)
			}
		}
		cc.opts = append(cc.opts, sql.ResolveWithIgnore())
	}
	return cc
}

// options returns a copy of the caller's options as they are put before
// entflake's own, with room for one more.
func (cc callerClause) options() []sql.ConflictOption {
	return append(make([]sql.ConflictOption, 0, len(cc.opts)+1), cc.opts...)
}

// clause renders conflict options on a scratch INSERT of dialect d, to see
// which clause they make.
func clause(d string, opts ...sql.ConflictOption) string {
	q, _ := sql.Dialect(d).Insert("t").Columns("c").Values(1).OnConflict(opts...).Query()
	return q
}

// keepBatchID is keepID for a bulk upsert that runs as one statement
// (PostgreSQL and SQLite, MariaDB with RETURNING, and MySQL's and TiDB's
// INSERT before its SELECT): the id keeps its stored value, and if the hook
// generated every row's id (guard), a row that already holds the id
// proposed for it (excluded.id; VALUES(id) on MySQL, the value the batch row
// that met it would have inserted) stops the statement, as keepID does for
// one row.
func keepBatchID(d, column string, guard bool) sql.ConflictOption {
	return sql.ResolveWith(func(s *sql.UpdateSet) {
		if !guard {
			s.SetIgnore(column)
			return
		}
		c, proposed := s.Table().C(column), sql.Dialect(d).Table("excluded").C(column)
		if d == dialect.MySQL {
			proposed = "VALUES(" + c + ")"
		}
		s.Set(column, sql.Expr(fmt.Sprintf("CASE WHEN %s = %s THEN %s ELSE %s END", c, proposed, overflow(d, c), c)))
	})
}

// overflow is the guard's error (keepID): an expression on column c that
// overflows a 64-bit integer whatever the row, which MySQL, MariaDB and
// TiDB (1690) and PostgreSQL (22003) refuse in every mode; SQLite turns an
// overflowing sum into a float, but refuses abs() of the smallest int64.
func overflow(d, c string) string {
	if d == dialect.SQLite {
		return fmt.Sprintf("abs(-%d - 1 + 0 * %s)", math.MaxInt64, c)
	}
	return fmt.Sprintf("%s + %d", c, math.MaxInt64)
}

// before returns the option o that runs f first. Its type parameter
// stands for ent's unexported conflict type.
func before[C any](o func(C), f func()) func(C) {
	return func(c C) {
		f()
		o(c)
	}
}

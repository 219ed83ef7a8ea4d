package entrt

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/sqlgraph"
	"entgo.io/ent/schema/field"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/internal/dberr"
)

// The ways a bulk upsert runs (Client.bulkPath).
const (
	// oneStatement: ent's own multi-row INSERT, whose RETURNING
	// (PostgreSQL, SQLite) gives every row's stored id, in order.
	oneStatement = iota
	// returning: MariaDB's multi-row INSERT ... ON DUPLICATE KEY UPDATE
	// ... RETURNING (Client.bulkReturning).
	returning
	// perRow: one upsert per row (Client.upsertEach).
	perRow
	// selectPath: MySQL's and TiDB's multi-row INSERT, then one SELECT that
	// finds each row's stored row (Client.bulkSelect), or, where that
	// cannot be certain, one upsert per row.
	selectPath
)

// BulkUpsert runs the bulk upsert spec of the builders of batch, or
// prepares it for ent's own statement, so that every row and its edges get
// the id of the row as stored and the table gets what ent's statement
// would write. The generated code calls it just before
// sqlgraph.BatchCreate: where it ran the batch itself, it empties
// spec.Nodes, which BatchCreate then takes as nothing to do, and every
// spec of the batch holds its row's stored id (nil for a row the database
// skipped); ent's code after BatchCreate copies it into an entity whose ID
// is 0. An error is the batch's, as BatchCreate's would be.
func (c *Client) BulkUpsert(ctx context.Context, spec *sqlgraph.BatchCreateSpec, batch *Batch) error {
	if len(spec.Nodes) == 0 {
		return nil
	}
	caller := readClause(c.dialect(), spec.Nodes[0], spec.OnConflict)
	if !caller.renders {
		// No statement (OnConflictColumns with no resolution): ent's fails,
		// as it does without entflake, since ent adds no update of its own
		// to a batch's options.
		return nil
	}
	generated := batch.Generated()
	path, why, err := c.bulkPath(ctx, caller, generated)
	if err != nil {
		return err
	}
	switch path {
	case oneStatement:
		n := len(spec.OnConflict)
		spec.OnConflict = append(spec.OnConflict[:n:n], keepBatchID(c.dialect(), spec.Nodes[0].ID.Column, !slices.Contains(generated, false)))
		return nil
	case returning:
		err = c.bulkReturning(ctx, spec, caller, generated)
	case selectPath:
		var fallback bool
		if fallback, why, err = c.bulkSelect(ctx, spec, caller, generated); err == nil && fallback {
			path = perRow
		}
	}
	if path == perRow {
		c.logf("entflake: bulk upsert into %s runs one upsert per row: %s", spec.Nodes[0].Table, why)
		err = c.upsertEach(ctx, spec, caller, generated)
	}
	if err != nil {
		return err
	}
	spec.Nodes = nil
	return nil
}

// bulkPath returns how a bulk upsert with the caller's conflict clause runs,
// and, for the per-row path, why. One multi-row INSERT numbers its rows
// only where the database returns every row, in order:
//
//   - PostgreSQL and SQLite return a row for each row inserted or updated,
//     but none for a row that DO NOTHING, or DO UPDATE ... WHERE, skipped;
//     sqlgraph numbers the returned rows by position, so it would give a
//     skipped row's id and edges to the next row: such a batch runs per row.
//   - MariaDB 10.5 and later accept RETURNING on INSERT ... ON DUPLICATE KEY
//     UPDATE and return one row per VALUES row, in order, with the stored
//     id of a row that was updated (also by an update that changes nothing,
//     and for two batch rows that meet one stored row): one statement.
//   - MySQL and TiDB have no RETURNING, and the OK packet holds one id: the
//     INSERT, then a SELECT of the stored rows by the table's unique keys
//     (Client.bulkSelect), in one transaction; per row where the SELECT
//     cannot tell. The server is asked once per client (Server).
//   - A batch that mixes ids the hook generated with ids the caller set runs
//     per row, each row with its own guard (keepID).
func (c *Client) bulkPath(ctx context.Context, caller callerClause, generated []bool) (path int, why string, err error) {
	d := c.dialect()
	if slices.Contains(generated, true) && slices.Contains(generated, false) {
		// Only the generated ids get the guard, and the tripwire looks up
		// the ids of a refused statement (entflake.Insert.Upsert) only when
		// all of them are generated: an id the caller set may update its row.
		return perRow, "the batch mixes generated ids with ids the caller set", nil
	}
	if d == dialect.MySQL {
		ok, err := c.Server.Returning(ctx, c.Driver)
		switch {
		case err != nil:
			return 0, "", err
		case !ok:
			return selectPath, "", nil
		}
		return returning, "", nil
	}
	switch {
	case caller.nothing:
		return perRow, "DO NOTHING returns no row for a row it skips", nil
	case caller.skips:
		return perRow, "DO UPDATE ... WHERE returns no row for a row it skips", nil
	}
	return oneStatement, "", nil
}

// sameColumns gives every row of a bulk upsert that runs per row the
// columns of the batch: ent's one statement (sqlgraph.BatchCreate) lists
// every column that any row sets, and a row that does not set one inserts
// NULL there (not the column's default), which an update of new values
// (UpdateNewValues, ResolveWithNewValues) then writes over the stored row.
// An upsert of the row alone would name only its own columns and leave the
// stored values: different data. The columns are the fields' and the
// foreign keys of M2O and inverse O2O edges (the edge columns on the row's
// own table), as sqlgraph's setTableColumns takes them. A column a row
// lacks gets a NULL of no type: a NULL of type JSON would be marshalled
// into the text null.
func sameColumns(spec *sqlgraph.BatchCreateSpec) {
	var all []string
	for _, node := range spec.Nodes {
		ownColumns(node, func(c string) {
			if !slices.Contains(all, c) {
				all = append(all, c)
			}
		})
	}
	for _, node := range spec.Nodes {
		var has []string
		ownColumns(node, func(c string) { has = append(has, c) })
		for _, c := range all {
			if !slices.Contains(has, c) {
				node.Fields = append(node.Fields, &sqlgraph.FieldSpec{Column: c})
			}
		}
	}
}

// ownColumns calls f with each column that the INSERT of node writes
// besides the id: its fields', and the foreign keys of its M2O and inverse
// O2O edges.
func ownColumns(node *sqlgraph.CreateSpec, f func(string)) {
	for _, fs := range node.Fields {
		f(fs.Column)
	}
	for _, e := range node.Edges {
		if ownTable(e) {
			f(e.Columns[0])
		}
	}
}

// ownTable reports whether an edge of a created row is a column of the
// row's own table (M2O, inverse O2O), which its INSERT writes; the others
// (M2M, O2M, O2O from this side) are rows of other tables, written after.
func ownTable(e *sqlgraph.EdgeSpec) bool {
	return e.Rel == sqlgraph.M2O || e.Rel == sqlgraph.O2O && (e.Inverse || e.Bidi)
}

// externalEdges reports whether a batch adds edges whose rows are in other
// tables (M2M, O2M, O2O from this side), written after the INSERT.
func externalEdges(spec *sqlgraph.BatchCreateSpec) bool {
	for _, node := range spec.Nodes {
		for _, e := range node.Edges {
			if !ownTable(e) {
				return true
			}
		}
	}
	return false
}

// bulkReturning runs a bulk upsert on MariaDB as ent's one multi-row
// INSERT, with RETURNING added, in the same transaction as its edges:
// sqlgraph.BatchCreate assembles the statement and writes the edges, on a
// driver (insertDriver, Client.returningInsert) that runs the INSERT, the first
// statement BatchCreate sends, as a query with RETURNING and gives each row
// the id returned for it before BatchCreate writes the edges. The id
// column's update is the batch guard (keepBatchID): MariaDB's ON DUPLICATE
// KEY UPDATE fires on the primary key whatever else conflicts, and
// VALUES(id) is the id proposed by the batch row that met the stored one.
func (c *Client) bulkReturning(ctx context.Context, spec *sqlgraph.BatchCreateSpec, caller callerClause, generated []bool) error {
	d := c.dialect()
	column := spec.Nodes[0].ID.Column
	spec.OnConflict = append(caller.options(), keepBatchID(d, column, !slices.Contains(generated, false)))
	// sqlgraph reads a batch's ids from LAST_INSERT_ID only for a numeric
	// id type: these come from RETURNING.
	KeepBatchIDs(d, spec)
	return c.runBatch(ctx, spec, c.returningInsert(spec, column), false)
}

// runBatch runs the batch spec as ent's statement (sqlgraph.BatchCreate,
// which writes the edges after the INSERT) with its INSERT run by insert,
// and reports an INSERT that was not run. It runs in a transaction of its
// own (batchTx) when tx is set, for statements after the INSERT that must
// see the rows as the INSERT left them, and when the caller's transaction
// holds a batch with edges in other tables: BatchCreate's transaction is
// then the caller's, which it cannot roll back, and an edge it refuses
// would leave the rows. Otherwise BatchCreate opens a transaction for such
// edges itself, and the INSERT alone is one statement: all or nothing.
func (c *Client) runBatch(ctx context.Context, spec *sqlgraph.BatchCreateSpec, insert insertFunc, tx bool) error {
	run := func(drv dialect.Driver) error {
		r := &insertDriver{Driver: drv, insert: insert}
		err := sqlgraph.BatchCreate(ctx, r, spec)
		if err == nil && !r.done {
			err = c.errorf("bulk upsert into %s: the INSERT was not run", spec.Nodes[0].Table)
		}
		return c.constraint(err)
	}
	if !tx && (!c.InTx || !externalEdges(spec)) {
		return run(c.Driver)
	}
	return c.batchTx(ctx, run)
}

// returningInsert runs the batch's INSERT with RETURNING of its id column.
// MariaDB returns one row per VALUES row, in order.
func (c *Client) returningInsert(spec *sqlgraph.BatchCreateSpec, column string) insertFunc {
	return func(ctx context.Context, drv dialect.ExecQuerier, query string, args, v any) error {
		rows := &sql.Rows{}
		if err := drv.Query(ctx, query+" RETURNING "+quote(column), args, rows); err != nil {
			return err
		}
		defer rows.Close()
		n := 0
		for ; rows.Next(); n++ {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			if n < len(spec.Nodes) {
				spec.Nodes[n].ID.Value = id
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if n != len(spec.Nodes) {
			return c.errorf("bulk upsert into %s: RETURNING gave %d rows for %d", spec.Nodes[0].Table, n, len(spec.Nodes))
		}
		if res, ok := v.(*sql.Result); ok {
			*res = result{rows: int64(n)}
		}
		return nil
	}
}

// upsertEach runs a bulk upsert (perRow, see Client.bulkPath) as one
// upsert per row, each with its edges, in one transaction (in the caller's,
// within a savepoint, so that a failed row leaves none of the batch): every
// row and its edges get the stored row's id, as a single upsert does, and
// every row names the columns of the batch, as ent's one statement does
// (sameColumns). A row the database skipped (DO NOTHING, or a false DO
// UPDATE ... WHERE, on PostgreSQL and SQLite) is left without an id
// (spec.ID.Value nil, the entity's ID 0); one that also had edges to add to
// other rows fails the batch with entflake.ErrSkippedEdges, since the row
// they name was not written. generated[j] reports whether the hook
// generated the id of row j.
func (c *Client) upsertEach(ctx context.Context, spec *sqlgraph.BatchCreateSpec, caller callerClause, generated []bool) error {
	return c.batchTx(ctx, func(drv dialect.Driver) error {
		d := drv.Dialect()
		sameColumns(spec)
		opts := caller.opts
		n := len(opts)
		for j, node := range spec.Nodes {
			id, _ := node.ID.Value.(int64)
			var (
				inserted = new(int64)
				on       = drv
			)
			node.OnConflict = append(opts[:n:n], keepID(d, node, generated[j], inserted))
			if d == dialect.MySQL {
				on = &insertDriver{Driver: drv, insert: c.oneInsert(node, inserted, true)} // the batch's transaction
			}
			err := sqlgraph.CreateNode(ctx, on, node)
			switch {
			case err == nil:
				continue
			case d != dialect.MySQL && errors.Is(err, stdsql.ErrNoRows):
				// RETURNING gave no row: the database skipped this one.
				for _, e := range node.Edges {
					if !ownTable(e) {
						return c.errorf("bulk upsert into %s: %w: row %d (id %d) conflicted and was skipped, so its %s edge "+
							"names no stored row; use an update resolution (UpdateNewValues, Ignore), or add the edges afterwards",
							node.Table, entflake.ErrSkippedEdges, j, id, e.Table)
					}
				}
				node.ID.Value = nil
			default:
				in := entflake.Insert{Table: node.Table, Schema: node.Schema, Column: node.ID.Column, IDs: []int64{id}, Upsert: generated[j]}
				return c.InsertFailed(ctx, in, c.constraint(err))
			}
		}
		return nil
	})
}

// batchTx runs f, which writes a batch, in one transaction: a new one, or
// the caller's within a savepoint, so that a batch that fails leaves none of
// its rows in it, as one multi-row INSERT would. f gets the transaction as
// a driver (txDriver).
//
// A batch that fails in the caller's transaction leaves it as ent's one
// statement would: without the batch's rows, and usable on MySQL and
// SQLite, where a failed statement ends nothing; on PostgreSQL, which
// aborts the transaction at a statement that fails, aborted when the
// database refused one of the batch's statements (its commit then rolls
// back, as after ent's statement), and rolled back to the savepoint only
// when entflake refused the batch itself (entflake.ErrSkippedEdges, a
// fallback), which ent's statement would not have done.
func (c *Client) batchTx(ctx context.Context, f func(dialect.Driver) error) (err error) {
	var tx dialect.Tx = dialect.NopTx(c.Driver)
	if !c.InTx {
		if tx, err = c.Driver.Tx(ctx); err != nil {
			return err
		}
	} else if err := tx.Exec(ctx, "SAVEPOINT entflake_batch", []any{}, nil); err != nil {
		return err
	}
	defer func() {
		switch {
		case err == nil && c.InTx:
			err = tx.Exec(ctx, "RELEASE SAVEPOINT entflake_batch", []any{}, nil)
		case err == nil:
			err = tx.Commit()
		case c.InTx && c.dialect() == dialect.Postgres && refusedByDatabase(err):
			// Aborted by PostgreSQL, as ent's statement would leave it.
		case c.InTx:
			if rerr := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT entflake_batch", []any{}, nil); rerr != nil {
				err = fmt.Errorf("%w (rollback to savepoint: %v)", err, rerr)
			}
		default:
			if rerr := tx.Rollback(); rerr != nil {
				err = fmt.Errorf("%w (rollback: %v)", err, rerr)
			}
		}
	}()
	return f(txDriver{tx: tx, dialect: c.dialect()})
}

// refusedByDatabase reports whether err is a database's error (a driver's,
// as internal/dberr reads them), not entflake's.
func refusedByDatabase(err error) bool {
	_, ok := dberr.Read(err)
	return ok
}

// txDriver is a transaction as a driver, for sqlgraph.CreateNode and
// BatchCreate, which open a transaction of their own for a row with edges:
// within this one, they get one that commits nothing.
type txDriver struct {
	tx      dialect.ExecQuerier
	dialect string
}

// Exec implements dialect.Driver.
func (t txDriver) Exec(ctx context.Context, query string, args, v any) error {
	return t.tx.Exec(ctx, query, args, v)
}

// Query implements dialect.Driver.
func (t txDriver) Query(ctx context.Context, query string, args, v any) error {
	return t.tx.Query(ctx, query, args, v)
}

// Dialect implements dialect.Driver.
func (t txDriver) Dialect() string { return t.dialect }

// Tx implements dialect.Driver.
func (t txDriver) Tx(context.Context) (dialect.Tx, error) { return dialect.NopTx(t), nil }

// Close implements dialect.Driver; the transaction ends with its batch.
func (txDriver) Close() error { return nil }

// KeepBatchIDs keeps the ids of a batch INSERT on MySQL (d): there sqlgraph
// numbers the rows from LAST_INSERT_ID, which is right only for
// AUTO_INCREMENT ids, and writes the foreign keys of edges with those
// numbers; these ids were given before the INSERT. sqlgraph reads
// LAST_INSERT_ID only for a numeric id type.
func KeepBatchIDs(d string, batch *sqlgraph.BatchCreateSpec) {
	if d != dialect.MySQL {
		return
	}
	for _, n := range batch.Nodes {
		if n.ID != nil && n.ID.Value != nil {
			n.ID.Type = field.TypeOther
		}
	}
}

// quote quotes a MySQL identifier.
func quote(c string) string { return "`" + strings.ReplaceAll(c, "`", "``") + "`" }

package entrt

import (
	"context"
	"strings"

	"entgo.io/ent/dialect"
)

// insertFunc runs the INSERT of a create or a batch (query, args) on drv
// and fills v, its *sql.Result, as the driver's Exec would.
type insertFunc func(ctx context.Context, drv dialect.ExecQuerier, query string, args, v any) error

// insertDriver is the driver sqlgraph runs a create or a batch on where
// entflake needs more of its INSERT than sqlgraph reads: the first INSERT
// it is sent, directly or in a transaction it opens (sqlgraph opens one for
// edges in other tables), runs as insert says; every other statement, the
// edges' included, passes through. Which INSERT it is depends on the path:
// with RETURNING (returningInsert), followed by the SELECT that finds the
// stored rows (selectInsert), or with its insert id read from its affected
// rows (Client.UpsertOne).
type insertDriver struct {
	dialect.Driver
	insert insertFunc
	done   bool
}

// Exec implements dialect.Driver.
func (r *insertDriver) Exec(ctx context.Context, query string, args, v any) error {
	return r.exec(ctx, r.Driver, query, args, v)
}

// Tx implements dialect.Driver.
func (r *insertDriver) Tx(ctx context.Context) (dialect.Tx, error) {
	tx, err := r.Driver.Tx(ctx)
	if err != nil {
		return nil, err
	}
	return insertTx{Tx: tx, r: r}, nil
}

// exec runs the first INSERT on drv with r.insert, and every other
// statement as it is.
func (r *insertDriver) exec(ctx context.Context, drv dialect.ExecQuerier, query string, args, v any) error {
	if r.done || !strings.HasPrefix(query, "INSERT INTO ") {
		return drv.Exec(ctx, query, args, v)
	}
	r.done = true
	return r.insert(ctx, drv, query, args, v)
}

// insertTx is a transaction of an insertDriver.
type insertTx struct {
	dialect.Tx
	r *insertDriver
}

// Exec implements dialect.Tx.
func (t insertTx) Exec(ctx context.Context, query string, args, v any) error {
	return t.r.exec(ctx, t.Tx, query, args, v)
}

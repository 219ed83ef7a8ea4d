package lease

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"entgo.io/ent/dialect"
)

// tx is a transaction whose every statement, its COMMIT and its ROLLBACK
// included, ends when its context does.
//
// database/sql's Tx.Commit and Tx.Rollback take no context, and
// go-sql-driver/mysql runs them without watching one (it watches the
// context only in BeginTx and the Exec and Query calls): on a connection
// whose packets stop arriving without a reset (a blackholed network, a
// failover that took the server's address away), a COMMIT waits until TCP
// gives up, minutes later, or for ever behind a proxy that keeps the
// connection open. A renewal stuck there holds the keeper, and Close waits
// for it. So on MySQL the transaction is run as statements on a pinned
// connection (START TRANSACTION, ..., COMMIT), each through ExecContext,
// which the driver ends by closing the connection when the context ends;
// the server then rolls back what it had not committed. pgx's stdlib
// commits with the context given to BeginTx, and SQLite is in-process:
// they keep database/sql's Tx.
type tx struct {
	ctx  context.Context
	conn *sql.Conn // MySQL
	sqlx *sql.Tx   // PostgreSQL, SQLite
	done bool
}

// beginTx starts a transaction on a connection of db. opts is used on
// PostgreSQL and SQLite only: on MySQL the session's default isolation
// applies (READ COMMITTED is refused for writes under
// binlog_format=STATEMENT).
func beginTx(ctx context.Context, db *sql.DB, dialectName string, opts *sql.TxOptions) (*tx, error) {
	if dialectName != dialect.MySQL {
		t, err := db.BeginTx(ctx, opts)
		if err != nil {
			return nil, err
		}
		return &tx{ctx: ctx, sqlx: t}, nil
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, "START TRANSACTION"); err != nil {
		discard(conn)
		conn.Close()
		return nil, err
	}
	return &tx{ctx: ctx, conn: conn}, nil
}

// ExecContext runs a statement in the transaction.
func (t *tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if t.sqlx != nil {
		return t.sqlx.ExecContext(ctx, query, args...)
	}
	return t.conn.ExecContext(ctx, query, args...)
}

// QueryRowContext runs a query in the transaction.
func (t *tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if t.sqlx != nil {
		return t.sqlx.QueryRowContext(ctx, query, args...)
	}
	return t.conn.QueryRowContext(ctx, query, args...)
}

// Commit commits, within the transaction's context.
func (t *tx) Commit() error {
	if t.done {
		return sql.ErrTxDone
	}
	t.done = true
	if t.sqlx != nil {
		return t.sqlx.Commit()
	}
	defer t.conn.Close()
	if _, err := t.conn.ExecContext(t.ctx, "COMMIT"); err != nil {
		// Whether it committed is unknown without the server's answer;
		// the connection is not reused either way.
		discard(t.conn)
		return err
	}
	return nil
}

// Rollback rolls back, if Commit did not end the transaction; it waits at
// most a second (the context may have ended already), and drops the
// connection when the ROLLBACK did not get through.
func (t *tx) Rollback() {
	if t.done {
		return
	}
	t.done = true
	if t.sqlx != nil {
		_ = t.sqlx.Rollback()
		return
	}
	defer t.conn.Close()
	_ = rollbackConn(t.ctx, t.conn)
}

// rollbackConn ends the transaction open on conn, whatever ctx's state: the
// ROLLBACK waits at most a second, not on ctx, which may have ended (a
// statement refused unsent for it leaves the transaction open, on a
// connection the driver keeps as good). When the ROLLBACK fails too, conn
// is dropped, not pooled inside the transaction: the server ends it when
// the connection goes.
func rollbackConn(ctx context.Context, conn *sql.Conn) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_, err := conn.ExecContext(rctx, "ROLLBACK")
	if err != nil {
		discard(conn)
	}
	return err
}

// inTx runs f in a transaction of its own and commits it.
func inTx(ctx context.Context, db *sql.DB, dialectName string, opts *sql.TxOptions, f func(*tx) error) error {
	t, err := beginTx(ctx, db, dialectName, opts)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer t.Rollback()
	if err := f(t); err != nil {
		return err
	}
	return t.Commit()
}

// readTx runs f, which only reads, in a transaction of its own that it then
// rolls back. A bare SELECT would do on its own, except with autocommit off
// in the DSN: then it would leave a transaction open, and its snapshot, on a
// pooled connection.
func readTx(ctx context.Context, db *sql.DB, dialectName string, f func(*tx) error) error {
	t, err := beginTx(ctx, db, dialectName, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer t.Rollback()
	return f(t)
}

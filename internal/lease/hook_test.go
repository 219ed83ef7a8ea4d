package lease

// A database/sql driver wrapper that lets a test act at a chosen
// statement of the code under test (run a callback before it, hold a
// COMMIT), to pick an interleaving without touching that code.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
)

// hooks are called by the wrapped connections.
type hooks struct {
	mu sync.Mutex
	// before is called with every statement's text before it is sent
	// (Exec and Query alike).
	before func(query string)
	// commit is called before a driver Tx's Commit (PostgreSQL, SQLite;
	// the lease runs MySQL transactions as statements: see before).
	commit func()
	// drop, when it answers true for a statement, cuts the connection
	// instead of sending it: the connection is closed (the server rolls
	// back its transaction), dropped is called, and the statement fails
	// with driver.ErrBadConn, unanswered.
	drop    func(query string) bool
	dropped func()
}

// setDrop sets drop and dropped (nil, nil: none).
func (h *hooks) setDrop(drop func(string) bool, dropped func()) {
	h.mu.Lock()
	h.drop, h.dropped = drop, dropped
	h.mu.Unlock()
}

// onDrop reports whether q is to be dropped, and what to run once the
// connection is closed.
func (h *hooks) onDrop(q string) (bool, func()) {
	h.mu.Lock()
	f, after := h.drop, h.dropped
	h.mu.Unlock()
	return f != nil && f(q), after
}

func (h *hooks) onBefore(q string) {
	h.mu.Lock()
	f := h.before
	h.mu.Unlock()
	if f != nil {
		f(q)
	}
}

func (h *hooks) onCommit() {
	h.mu.Lock()
	f := h.commit
	h.mu.Unlock()
	if f != nil {
		f()
	}
}

func (h *hooks) set(before func(string), commit func()) {
	h.mu.Lock()
	h.before, h.commit = before, commit
	h.mu.Unlock()
}

// hooked opens a pool on dsn of driverName ("mysql", "pgx", "sqlite")
// whose connections call h.
func hooked(t testing.TB, driverName, dsn string) (*sql.DB, *hooks) {
	t.Helper()
	var d driver.Driver
	switch driverName {
	case "mysql":
		d = &mysql.MySQLDriver{}
	case "pgx":
		d = stdlib.GetDefaultDriver()
	default:
		d = &sqlite.Driver{}
	}
	h := &hooks{}
	db := sql.OpenDB(&hookConnector{d: d, dsn: dsn, h: h})
	t.Cleanup(func() { db.Close() })
	return db, h
}

type hookConnector struct {
	d   driver.Driver
	dsn string
	h   *hooks
}

func (c *hookConnector) Connect(ctx context.Context) (driver.Conn, error) {
	var (
		inner driver.Conn
		err   error
	)
	if dc, ok := c.d.(driver.DriverContext); ok {
		var conn driver.Connector
		if conn, err = dc.OpenConnector(c.dsn); err != nil {
			return nil, err
		}
		inner, err = conn.Connect(ctx)
	} else {
		inner, err = c.d.Open(c.dsn)
	}
	if err != nil {
		return nil, err
	}
	return &hookConn{Conn: inner, h: c.h}, nil
}

func (c *hookConnector) Driver() driver.Driver { return c.d }

type hookConn struct {
	driver.Conn
	h    *hooks
	dead bool // cut by drop
}

// cut closes the connection if drop asks for q.
func (c *hookConn) cut(q string) bool {
	drop, after := c.h.onDrop(q)
	if !drop {
		return false
	}
	c.Conn.Close()
	c.dead = true
	if after != nil {
		after()
	}
	return true
}

func (c *hookConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.h.onBefore(q)
	if c.cut(q) {
		return nil, driver.ErrBadConn
	}
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c *hookConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.h.onBefore(q)
	if c.cut(q) {
		return nil, driver.ErrBadConn
	}
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c *hookConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	c.h.onBefore(q)
	if c.cut(q) {
		return nil, driver.ErrBadConn
	}
	if p, ok := c.Conn.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, q)
	}
	return c.Conn.Prepare(q)
}

func (c *hookConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &hookTx{Tx: tx, h: c.h}, nil
}

func (c *hookConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *hookConn) ResetSession(ctx context.Context) error {
	if c.dead {
		return driver.ErrBadConn
	}
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *hookConn) IsValid() bool {
	if c.dead {
		return false
	}
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *hookConn) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := c.Conn.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

type hookTx struct {
	driver.Tx
	h *hooks
}

func (t *hookTx) Commit() error {
	t.h.onCommit()
	return t.Tx.Commit()
}

// isStmt reports whether q starts like prefix (after spaces).
func isStmt(q, prefix string) bool { return strings.HasPrefix(strings.TrimSpace(q), prefix) }

package holddriver

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"reflect"
	"sync"
	"time"
)

// lateTimeout bounds a statement sent in the background after its caller
// gave up (see conn.giveUp): long enough for any statement of the suite,
// short enough that a server that never answers does not keep the
// connection for ever.
const lateTimeout = 30 * time.Second

// outcome is the inner driver's answer to one statement.
type outcome struct {
	res  driver.Result
	rows driver.Rows
	err  error
}

// discard closes the rows of an answer nobody will read.
func (o outcome) discard() {
	if o.rows != nil {
		_ = o.rows.Close()
	}
}

// conn wraps one connection of the inner driver. database/sql uses it from
// one goroutine at a time; the only other user is the goroutine that sends
// a given-up statement late (giveUp), and the state under mu keeps the two
// apart: once given up, nothing but that goroutine touches inner.
type conn struct {
	inner driver.Conn
	ctl   *Control

	mu sync.Mutex
	// bad: a held statement's caller gave up, so the connection is in a
	// state no caller knows; database/sql must drop it, and every
	// statement on it fails with driver.ErrBadConn without touching inner.
	bad bool
	// pending counts given-up statements still to be sent late; while it
	// is above 0, only that goroutine may use inner, so Close and
	// stmt.Close leave inner to it.
	pending int
	// innerClosed: inner (and its statements) are closed.
	innerClosed bool
	// stmts are the prepared statements whose inner statement is open.
	// They are closed before inner: modernc.org/sqlite closes a connection
	// with open statements only once they are finalized (it becomes a
	// "zombie" until then), keeping its transaction, and so its write
	// lock, until that happens.
	stmts map[*stmt]struct{}
}

var (
	_ driver.Conn               = (*conn)(nil)
	_ driver.ExecerContext      = (*conn)(nil)
	_ driver.QueryerContext     = (*conn)(nil)
	_ driver.ConnPrepareContext = (*conn)(nil)
	_ driver.ConnBeginTx        = (*conn)(nil)
	_ driver.Pinger             = (*conn)(nil)
	_ driver.SessionResetter    = (*conn)(nil)
	_ driver.Validator          = (*conn)(nil)
	_ driver.NamedValueChecker  = (*conn)(nil)
)

// Unwrap returns the inner driver's connection, for a caller of
// database/sql's Conn.Raw that needs the driver's own type. Statements sent
// on it are not matched.
func (c *conn) Unwrap() driver.Conn { return c.inner }

// check returns driver.ErrBadConn once the connection was given up.
func (c *conn) check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bad {
		return driver.ErrBadConn
	}
	return nil
}

// run sends one statement of text query through the hold point. send sends
// it on inner with the given context; late, when not nil, is sent instead
// when a caller who gave up while it was held Before is released (see
// tx.Commit). Every matched statement goes through here exactly once.
func (c *conn) run(ctx context.Context, query string, send, late func(context.Context) outcome) outcome {
	if err := c.check(); err != nil {
		return outcome{err: err}
	}
	h := c.ctl.match(query)
	if h == nil {
		return send(ctx)
	}
	if late == nil {
		late = send
	}
	switch h.Phase {
	case Before:
		c.ctl.enter(h, query)
		if wait(ctx, h) {
			c.giveUp(h, late)
			return outcome{err: ctx.Err()}
		}
		return send(ctx)
	case Drop:
		c.ctl.enter(h, query)
		gone := wait(ctx, h)
		if gone {
			c.ctl.leave(h) // cut now: nothing is left to release
		}
		_ = c.closeInner()
		if gone {
			return outcome{err: ctx.Err()}
		}
		return outcome{err: ErrCut}
	}
	o := send(ctx)
	c.ctl.enter(h, query)
	if wait(ctx, h) {
		// The answer came, the caller did not wait for it: as when the
		// network fails on its way back, the connection goes, and with
		// it the session's open transaction, which the server rolls back.
		c.ctl.leave(h)
		o.discard()
		_ = c.closeInner()
		return outcome{err: ctx.Err()}
	}
	return o
}

// giveUp marks the connection bad for a caller who gave up on a statement
// held Before, and sends the statement once h is released, as a request
// that was on its way still reaches the server: with a context of its own
// (the caller's has ended), its answer thrown away. Then it closes inner,
// which nobody else uses meanwhile.
func (c *conn) giveUp(h *hold, late func(context.Context) outcome) {
	c.mu.Lock()
	c.bad = true
	c.pending++
	c.mu.Unlock()
	go func() {
		<-h.release
		ctx, cancel := context.WithTimeout(context.Background(), lateTimeout)
		o := late(ctx)
		o.discard()
		cancel()
		c.mu.Lock()
		c.pending--
		c.mu.Unlock()
		_ = c.closeInner()
	}()
}

// closeInner closes inner and its open statements, once, unless a late
// statement is still to be sent (its goroutine closes inner afterwards).
// The connection is bad from then on.
func (c *conn) closeInner() error {
	c.mu.Lock()
	c.bad = true
	if c.innerClosed || c.pending > 0 {
		c.mu.Unlock()
		return nil
	}
	c.innerClosed = true
	stmts := c.stmts
	c.stmts = nil
	c.mu.Unlock()
	for s := range stmts {
		_ = s.inner.Close()
	}
	return c.inner.Close()
}

// Close closes the connection: at once, or, while a given-up statement is
// still to be sent late, once it has been.
func (c *conn) Close() error { return c.closeInner() }

// ExecContext sends a statement through the hold point.
func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	o := c.run(ctx, query, func(ctx context.Context) outcome {
		res, err := c.exec(ctx, query, args)
		return outcome{res: res, err: err}
	}, nil)
	return o.res, o.err
}

// QueryContext sends a query through the hold point.
func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	o := c.run(ctx, query, func(ctx context.Context) outcome {
		rows, err := c.query(ctx, query, args)
		return outcome{rows: rows, err: err}
	}, nil)
	return o.rows, o.err
}

// exec sends a statement on inner. When inner declines it (driver.ErrSkip:
// go-sql-driver/mysql with arguments and no interpolateParams), it prepares
// and executes it itself, as database/sql would: had it passed ErrSkip on,
// database/sql would send the statement again through Prepare and the
// statement's Exec, and a hold would match it twice.
func (c *conn) exec(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if e, ok := c.inner.(driver.ExecerContext); ok {
		res, err := e.ExecContext(ctx, query, args)
		if !errors.Is(err, driver.ErrSkip) {
			return res, err
		}
	}
	s, err := c.prepareInner(ctx, query)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return stmtExec(ctx, s, args)
}

// query is exec for a query. The prepared statement stays open with its
// rows, and closes with them.
func (c *conn) query(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if q, ok := c.inner.(driver.QueryerContext); ok {
		rows, err := q.QueryContext(ctx, query, args)
		if !errors.Is(err, driver.ErrSkip) {
			return rows, err
		}
	}
	s, err := c.prepareInner(ctx, query)
	if err != nil {
		return nil, err
	}
	rows, err := stmtQuery(ctx, s, args)
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	return &stmtRows{Rows: rows, stmt: s}, nil
}

func (c *conn) prepareInner(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := c.inner.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	return c.inner.Prepare(query)
}

// PrepareContext prepares a statement on inner (never held); its Exec and
// Query go through the hold point.
func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	si, err := c.prepareInner(ctx, query)
	if err != nil {
		return nil, err
	}
	s := &stmt{c: c, inner: si, query: query}
	c.mu.Lock()
	c.stmts[s] = struct{}{}
	c.mu.Unlock()
	return s, nil
}

// Prepare is PrepareContext without a context.
func (c *conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// BeginTx starts a transaction on inner (never held); its Commit goes
// through the hold point.
func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	var (
		ti  driver.Tx
		err error
	)
	if b, ok := c.inner.(driver.ConnBeginTx); ok {
		ti, err = b.BeginTx(ctx, opts)
	} else {
		if opts.Isolation != driver.IsolationLevel(0) || opts.ReadOnly {
			return nil, errors.New("holddriver: the driver supports only default transactions")
		}
		//lint:ignore SA1019 a wrapper passes through to a driver that has only the pre-Go 1.8 interface
		ti, err = c.inner.Begin() // the driver has nothing else
	}
	if err != nil {
		return nil, err
	}
	return &tx{c: c, inner: ti, ctx: ctx}, nil
}

// Begin is BeginTx with a background context and default options.
func (c *conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// Ping pings through inner (never held).
func (c *conn) Ping(ctx context.Context) error {
	if err := c.check(); err != nil {
		return err
	}
	if p, ok := c.inner.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// ResetSession reports a given-up connection bad, so that database/sql
// drops it before reuse, and asks inner otherwise.
func (c *conn) ResetSession(ctx context.Context) error {
	if err := c.check(); err != nil {
		return err
	}
	if r, ok := c.inner.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

// IsValid reports a given-up connection invalid, so that database/sql
// closes it instead of putting it back in its pool, and asks inner
// otherwise.
func (c *conn) IsValid() bool {
	if c.check() != nil {
		return false
	}
	if v, ok := c.inner.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// CheckNamedValue converts arguments as inner does; driver.ErrSkip when
// inner has no converter of its own lets database/sql apply its default.
func (c *conn) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := c.inner.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// stmt wraps a prepared statement of inner, so that its executions go
// through the hold point with its text.
type stmt struct {
	c     *conn
	inner driver.Stmt
	query string
}

var (
	_ driver.Stmt              = (*stmt)(nil)
	_ driver.StmtExecContext   = (*stmt)(nil)
	_ driver.StmtQueryContext  = (*stmt)(nil)
	_ driver.NamedValueChecker = (*stmt)(nil)
)

// Close closes the inner statement, unless a given-up statement is still to
// be sent late on the connection (it may be this one): then closeInner
// closes it with the connection.
func (s *stmt) Close() error {
	c := s.c
	c.mu.Lock()
	if _, open := c.stmts[s]; !open || c.pending > 0 {
		c.mu.Unlock()
		return nil
	}
	delete(c.stmts, s)
	c.mu.Unlock()
	return s.inner.Close()
}

// NumInput is the inner statement's.
func (s *stmt) NumInput() int { return s.inner.NumInput() }

// ExecContext executes the statement through the hold point.
func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	o := s.c.run(ctx, s.query, func(ctx context.Context) outcome {
		res, err := stmtExec(ctx, s.inner, args)
		return outcome{res: res, err: err}
	}, nil)
	return o.res, o.err
}

// QueryContext runs the query through the hold point.
func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	o := s.c.run(ctx, s.query, func(ctx context.Context) outcome {
		rows, err := stmtQuery(ctx, s.inner, args)
		return outcome{rows: rows, err: err}
	}, nil)
	return o.rows, o.err
}

// Exec is ExecContext without a context (database/sql does not call it).
func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

// Query is QueryContext without a context (database/sql does not call it).
func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

// CheckNamedValue converts arguments as the inner statement does, or its
// connection when the statement has no converter.
func (s *stmt) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := s.inner.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return s.c.CheckNamedValue(nv)
}

func stmtExec(ctx context.Context, s driver.Stmt, args []driver.NamedValue) (driver.Result, error) {
	if e, ok := s.(driver.StmtExecContext); ok {
		return e.ExecContext(ctx, args)
	}
	vals, err := values(args)
	if err != nil {
		return nil, err
	}
	//lint:ignore SA1019 a wrapper passes through to a driver that has only the pre-Go 1.8 interface
	return s.Exec(vals) // the driver has nothing else
}

func stmtQuery(ctx context.Context, s driver.Stmt, args []driver.NamedValue) (driver.Rows, error) {
	if q, ok := s.(driver.StmtQueryContext); ok {
		return q.QueryContext(ctx, args)
	}
	vals, err := values(args)
	if err != nil {
		return nil, err
	}
	//lint:ignore SA1019 a wrapper passes through to a driver that has only the pre-Go 1.8 interface
	return s.Query(vals) // the driver has nothing else
}

func named(args []driver.Value) []driver.NamedValue {
	nv := make([]driver.NamedValue, len(args))
	for i, v := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return nv
}

func values(args []driver.NamedValue) ([]driver.Value, error) {
	vals := make([]driver.Value, len(args))
	for i, a := range args {
		if a.Name != "" {
			return nil, errors.New("holddriver: the driver does not support named arguments")
		}
		vals[i] = a.Value
	}
	return vals, nil
}

// tx wraps a transaction of inner, so that its Commit goes through the
// hold point as the statement "COMMIT".
type tx struct {
	c     *conn
	inner driver.Tx
	// ctx is the context BeginTx was given. A Commit held waits on it:
	// driver.Tx.Commit has no context of its own, and pgx and
	// modernc.org/sqlite commit with this one, so it is the one whose end
	// means the caller gave up. (database/sql cancels the Tx's own context
	// when Commit starts, not this one.)
	ctx context.Context
}

// Commit commits through the hold point. A caller who gives up while the
// COMMIT is held Before still has it sent late, as the text COMMIT on the
// inner connection rather than the inner Tx's Commit: pgx and
// modernc.org/sqlite would commit with the BeginTx context, which has
// ended by then, and so send nothing.
func (t *tx) Commit() error {
	return t.c.run(t.ctx, "COMMIT", func(context.Context) outcome {
		return outcome{err: t.inner.Commit()}
	}, func(ctx context.Context) outcome {
		res, err := t.c.exec(ctx, "COMMIT", nil)
		return outcome{res: res, err: err}
	}).err
}

// Rollback rolls back on inner; it is never held. On a given-up connection
// it returns driver.ErrBadConn without touching inner (a late statement may
// be using it, or it is closed, which rolled the transaction back), so that
// database/sql drops the connection.
func (t *tx) Rollback() error {
	if err := t.c.check(); err != nil {
		return err
	}
	return t.inner.Rollback()
}

// stmtRows are the rows of a query that exec prepared itself (see
// conn.query): closing them closes the statement too. The optional
// column-type and result-set methods are passed on when the driver's rows
// have them, and answer as database/sql does for rows without them when
// they do not.
type stmtRows struct {
	driver.Rows
	stmt driver.Stmt
}

func (r *stmtRows) Close() error {
	err := r.Rows.Close()
	if serr := r.stmt.Close(); err == nil {
		err = serr
	}
	return err
}

func (r *stmtRows) HasNextResultSet() bool {
	if n, ok := r.Rows.(driver.RowsNextResultSet); ok {
		return n.HasNextResultSet()
	}
	return false
}

func (r *stmtRows) NextResultSet() error {
	if n, ok := r.Rows.(driver.RowsNextResultSet); ok {
		return n.NextResultSet()
	}
	return io.EOF
}

func (r *stmtRows) ColumnTypeScanType(i int) reflect.Type {
	if c, ok := r.Rows.(driver.RowsColumnTypeScanType); ok {
		return c.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}

func (r *stmtRows) ColumnTypeDatabaseTypeName(i int) string {
	if c, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return c.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *stmtRows) ColumnTypeLength(i int) (int64, bool) {
	if c, ok := r.Rows.(driver.RowsColumnTypeLength); ok {
		return c.ColumnTypeLength(i)
	}
	return 0, false
}

func (r *stmtRows) ColumnTypeNullable(i int) (nullable, ok bool) {
	if c, ok := r.Rows.(driver.RowsColumnTypeNullable); ok {
		return c.ColumnTypeNullable(i)
	}
	return false, false
}

func (r *stmtRows) ColumnTypePrecisionScale(i int) (precision, scale int64, ok bool) {
	if c, ok := r.Rows.(driver.RowsColumnTypePrecisionScale); ok {
		return c.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}

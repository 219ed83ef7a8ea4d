// Package lease takes a worker id from the sys_sequence pool: one atomic
// statement on the pool row ('__global__') hands every starter of every
// service a distinct value, modulo the layout's worker range.
//
// The lease is for life: nothing is returned and nothing is renewed; a
// restart takes a new number. The pool wraps to 0 after 2^workerBits takes,
// after which a value may equal a live old instance's id; Lease.Wrapped says
// so and the caller warns.
//
// Every server-side wait is bounded by the context's deadline, on the server
// as well as in the client, so a take that the client abandoned cannot commit
// later and silently use up a worker id.
package lease

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"entgo.io/ent/dialect"

	"github.com/entflake/entflake/schema"
)

// Request says what to lease and from where.
type Request struct {
	// DB holds the sys_sequence table. The lease pins one of its connections.
	DB *sql.DB
	// Dialect is ent's dialect name: dialect.MySQL, dialect.Postgres or dialect.SQLite.
	Dialect string
	// Service names the audit row; see schema.ValidateService.
	Service string
	// Instance is the tag recorded with the take, at most schema.InstanceSize characters.
	Instance string
	// Workers is the size of the worker range (2^workerBits); the pool row
	// stays in 0..Workers-1. Services that share a pool must share it.
	Workers int64
	// Now is the local clock compared with the database's; nil means time.Now.
	Now func() time.Time
}

// Lease is the outcome of a take.
type Lease struct {
	// WorkerID is the value handed out, in 0..Workers-1.
	WorkerID int64
	// Wrapped reports that the pool passed its last value and restarted at 0
	// with this take: from now on an id may equal that of a live old instance.
	Wrapped bool
	// Created reports that the table was missing and this call created it (on
	// a database that had a pool before, the pool restarted).
	Created bool
	// Reseeded reports that the table existed without its pool row, and the
	// row was put back at 0 (the pool restarted).
	Reseeded bool
	// DBTime is the database's clock, read in the same round trip as the take
	// (MySQL: as the read-back of the taken value).
	DBTime time.Time
	// Skew is the local clock minus the database clock at the middle of that
	// round trip; it is uncertain by half of RoundTrip.
	Skew time.Duration
	// RoundTrip is how long that round trip took.
	RoundTrip time.Duration
	// AuditErr is set when the take succeeded but the service's audit row
	// could not be written. The worker id is still valid.
	AuditErr error
	// CommitRecovered reports that the answer to the take's COMMIT was lost
	// (the connection broke), and the pool row, read afresh, showed that the
	// take had committed.
	CommitRecovered bool
}

// commitUnknown is a COMMIT of a take that was sent but whose answer never
// came: the server may or may not have committed it.
type commitUnknown struct {
	lease Lease // as it would be, had the commit succeeded
	err   error
}

func (e *commitUnknown) Error() string { return e.err.Error() }
func (e *commitUnknown) Unwrap() error { return e.err }

// ErrNoPoolRow is returned when the pool row is still missing after the
// lease re-seeded it (something deletes it as fast as it is written).
var ErrNoPoolRow = errors.New("pool row missing after re-seeding")

// Take leases a worker id. The context's deadline bounds everything:
// getting a connection, every statement, and each server-side lock wait.
//
// It looks for the table first and creates it only when it is missing, so
// a user without CREATE privilege can still lease from an existing table;
// and many starters at once on a fresh database all succeed. If the pool
// row is missing, the take matches no row: Take re-seeds the row and takes
// again, and never reports a stale value.
func Take(ctx context.Context, r Request) (Lease, error) {
	if err := r.validate(); err != nil {
		return Lease{}, err
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	var (
		l   Lease
		err error
	)
	switch r.Dialect {
	case dialect.MySQL:
		l, err = takeMySQL(ctx, r)
	case dialect.Postgres:
		l, err = takePostgres(ctx, r)
	default:
		l, err = takeSQLite(ctx, r)
	}
	if cu := (*commitUnknown)(nil); errors.As(err, &cu) {
		l, err = recoverCommit(ctx, r, cu)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("lease from %s (%s): %w", schema.TableName, r.Dialect, err)
	}
	if l.WorkerID < 0 || l.WorkerID >= r.Workers {
		// The statement keeps the row in range; a value outside it means
		// someone wrote the row by hand (or a negative value was stored).
		return Lease{}, fmt.Errorf("lease from %s (%s): pool row gave worker id %d, outside 0..%d; fix the %q row",
			schema.TableName, r.Dialect, l.WorkerID, r.Workers-1, schema.PoolService)
	}
	l.Wrapped = l.WorkerID == 0
	return l, nil
}

func (r Request) validate() error {
	if r.DB == nil {
		return errors.New("lease: no database")
	}
	if err := schema.CheckDialect(r.Dialect); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	if err := schema.ValidateService(r.Service); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	if r.Instance == "" || utf8.RuneCountInString(r.Instance) > schema.InstanceSize {
		return fmt.Errorf("lease: instance tag must have 1 to %d characters, got %d",
			schema.InstanceSize, utf8.RuneCountInString(r.Instance))
	}
	if r.Workers < 2 || r.Workers > 1<<21 {
		return fmt.Errorf("lease: worker range %d is not 2..2^21", r.Workers)
	}
	return nil
}

// Bounds of server-side waits: when the context has no deadline, and at
// most (PostgreSQL's lock_timeout and SQLite's busy_timeout are 32-bit
// milliseconds, about 24.8 days).
const (
	defaultServerBound = 10 * time.Second
	maxServerBound     = time.Hour
)

// remaining is what is left of the context's deadline, at least lo and at
// most maxServerBound.
func remaining(ctx context.Context, lo time.Duration) time.Duration {
	d := defaultServerBound
	if dl, ok := ctx.Deadline(); ok {
		d = time.Until(dl)
	}
	return min(max(d, lo), maxServerBound)
}

// readClock runs a query whose last column is the database clock in
// microseconds since 1970 and records the skew against the local clock.
func readClock(l *Lease, now func() time.Time, run func(dbMicros *int64) error) error {
	var dbMicros int64
	t0 := now()
	if err := run(&dbMicros); err != nil {
		return err
	}
	t1 := now()
	l.DBTime = time.UnixMicro(dbMicros)
	l.RoundTrip = t1.Sub(t0)
	l.Skew = t0.Add(l.RoundTrip / 2).Sub(l.DBTime)
	return nil
}

// discard closes a pinned connection instead of returning it to the pool:
// database/sql drops a connection whose Raw callback reports ErrBadConn.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
}

func takeMySQL(ctx context.Context, r Request) (l Lease, err error) {
	// One connection for everything: LAST_INSERT_ID() is session state, and
	// reading it on any other connection returns that session's last value.
	conn, err := r.DB.Conn(ctx)
	if err != nil {
		return l, fmt.Errorf("get a connection: %w", err)
	}
	// The session now carries our settings and LAST_INSERT_ID: do not hand
	// it back to the application's pool.
	defer discard(conn)

	secs := int64((remaining(ctx, time.Second) + time.Second - 1) / time.Second)
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(mysqlSession, secs, secs)); err != nil {
		return l, fmt.Errorf("set up the session: %w", err)
	}
	var n int
	if err := conn.QueryRowContext(ctx, mysqlExists, schema.TableName).Scan(&n); err != nil {
		return l, fmt.Errorf("look for the table: %w", err)
	}
	if n == 0 {
		if err := create(ctx, conn, dialect.MySQL, mysqlSeed); err != nil {
			return l, err
		}
		l.Created = true
	}
	for attempt := 0; ; attempt++ {
		took, err := takeMySQLTx(ctx, conn, r, &l)
		if err != nil {
			return l, err
		}
		if took {
			break
		}
		// No pool row: LAST_INSERT_ID() would have returned whatever this
		// session held before. Put the row back, outside the transaction,
		// and take again.
		if attempt > 0 {
			return l, ErrNoPoolRow
		}
		if _, err := conn.ExecContext(ctx, mysqlSeed, schema.PoolService, schema.PoolInstance); err != nil {
			return l, fmt.Errorf("re-seed the pool row: %w", err)
		}
		l.Reseeded = true
	}
	// The audit row is written after the commit (autocommit is on), so that
	// a failure there cannot undo the take.
	_, l.AuditErr = conn.ExecContext(ctx, mysqlAudit, r.Service, l.WorkerID, r.Instance, l.WorkerID, r.Instance)
	return l, nil
}

// takeMySQLTx runs the take and its read-back in one transaction and
// commits it; took is false, and nothing is committed, when there is no
// pool row.
func takeMySQLTx(ctx context.Context, conn *sql.Conn, r Request, l *Lease) (took bool, err error) {
	// READ COMMITTED: under REPEATABLE READ an UPDATE that finds no pool row
	// locks the gap where it would be, and starters that then re-seed it
	// deadlock on each other's gap locks.
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if !took || err != nil {
			_ = tx.Rollback()
		}
	}()
	res, err := tx.ExecContext(ctx, mysqlTake, r.Workers, r.Instance, schema.PoolService)
	if err != nil {
		return false, fmt.Errorf("take: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("take: %w", err)
	}
	if n == 0 {
		return false, nil
	}
	err = readClock(l, r.Now, func(dbMicros *int64) error {
		return tx.QueryRowContext(ctx, mysqlRead).Scan(&l.WorkerID, dbMicros)
	})
	if err != nil {
		return true, fmt.Errorf("read the taken value: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return true, &commitUnknown{lease: *l, err: fmt.Errorf("commit the take: %w", err)}
	}
	return true, nil
}

// recoverCommit settles a take whose COMMIT went unanswered by reading the
// pool row on another connection: if it still holds this take's instance
// tag and worker id, the take committed and nobody has taken since, and the
// id is ours. Otherwise the take did not commit, or others took after it and
// there is no telling: the lease fails (and the ladder falls back), which at
// worst leaves one id unused. It runs in an explicit transaction, so that a
// DSN with autocommit off cannot leave one open on a pooled connection.
func recoverCommit(ctx context.Context, r Request, cu *commitUnknown) (Lease, error) {
	tx, err := r.DB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return Lease{}, fmt.Errorf("%w (and could not check whether it committed: %v)", cu.err, err)
	}
	defer tx.Rollback()
	confirm, audit, args := mysqlConfirm, mysqlAudit, []any{r.Service, cu.lease.WorkerID, r.Instance, cu.lease.WorkerID, r.Instance}
	if r.Dialect == dialect.Postgres {
		confirm, audit, args = pgConfirm, pgAudit, []any{r.Service, cu.lease.WorkerID, r.Instance}
	}
	var (
		worker   int64
		instance sql.NullString
	)
	if err := tx.QueryRowContext(ctx, confirm, schema.PoolService).Scan(&worker, &instance); err != nil {
		return Lease{}, fmt.Errorf("%w (and could not check whether it committed: %v)", cu.err, err)
	}
	if worker != cu.lease.WorkerID || instance.String != r.Instance {
		return Lease{}, fmt.Errorf("%w (the pool row does not show this take: it did not commit, or others took since)", cu.err)
	}
	l := cu.lease
	l.CommitRecovered = true
	if _, l.AuditErr = tx.ExecContext(ctx, audit, args...); l.AuditErr == nil {
		l.AuditErr = tx.Commit()
	}
	return l, nil
}

// execer is what create needs of a *sql.Conn or *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// queryExecer is what takeReturning needs of a *sql.Conn or *sql.Tx.
type queryExecer interface {
	execer
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// takeReturning runs a take that returns the new value and the database
// clock in one statement (UPDATE ... RETURNING). A missing pool row returns
// no row: it is re-seeded once and the take runs again.
func takeReturning(ctx context.Context, x queryExecer, take, seed string, r Request, l *Lease) error {
	for attempt := 0; ; attempt++ {
		err := readClock(l, r.Now, func(dbMicros *int64) error {
			return x.QueryRowContext(ctx, take, r.Workers, r.Instance, schema.PoolService).Scan(&l.WorkerID, dbMicros)
		})
		if err == nil {
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("take: %w", err)
		}
		if attempt > 0 {
			return ErrNoPoolRow
		}
		if _, err := x.ExecContext(ctx, seed, schema.PoolService, schema.PoolInstance); err != nil {
			return fmt.Errorf("re-seed the pool row: %w", err)
		}
		l.Reseeded = true
	}
}

// create makes the table from the one definition and seeds the pool row.
func create(ctx context.Context, x execer, d, seed string) error {
	stmts, err := schema.CreateStatements(d)
	if err != nil {
		return err
	}
	for _, ddl := range stmts {
		if _, err := x.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("create the tables: %w", err)
		}
	}
	if _, err := x.ExecContext(ctx, seed, schema.PoolService, schema.PoolInstance); err != nil {
		return fmt.Errorf("seed the pool row: %w", err)
	}
	return nil
}

func takePostgres(ctx context.Context, r Request) (l Lease, err error) {
	// One transaction: SET LOCAL-style bounds that end with it, and the
	// advisory lock that serialises creation is released at its end.
	// READ COMMITTED whatever the database's default: under REPEATABLE READ
	// or SERIALIZABLE, concurrent starters' UPDATEs of the one pool row fail
	// with serialization errors, and the look after the advisory lock would
	// not see a table committed meanwhile.
	tx, err := r.DB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return l, fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	bound := fmt.Sprintf("%dms", remaining(ctx, time.Millisecond).Milliseconds())
	if _, err = tx.ExecContext(ctx, pgLockWait, bound); err != nil {
		return l, fmt.Errorf("bound lock waits: %w", err)
	}
	var exists bool
	if err = tx.QueryRowContext(ctx, pgExists).Scan(&exists); err != nil {
		return l, fmt.Errorf("look for the table: %w", err)
	}
	if !exists {
		if _, err = tx.ExecContext(ctx, pgCreateLock); err != nil {
			return l, fmt.Errorf("lock table creation: %w", err)
		}
		// Another starter may have created it while we waited for the lock;
		// in READ COMMITTED this statement sees its commit.
		if err = tx.QueryRowContext(ctx, pgExists).Scan(&exists); err != nil {
			return l, fmt.Errorf("look for the table: %w", err)
		}
		if !exists {
			if err = create(ctx, tx, dialect.Postgres, pgSeed); err != nil {
				return l, err
			}
			l.Created = true
		}
	}
	if err = takeReturning(ctx, tx, pgTake, pgSeed, r, &l); err != nil {
		return l, err
	}
	if err = tx.Commit(); err != nil {
		return l, &commitUnknown{lease: l, err: fmt.Errorf("commit the take: %w", err)}
	}
	// The audit row is written after the commit, so that a failure there
	// cannot undo the take; a server-side wait on it ends with the context
	// (pgx cancels the query on the server).
	_, l.AuditErr = r.DB.ExecContext(ctx, pgAudit, r.Service, l.WorkerID, r.Instance)
	return l, nil
}

func takeSQLite(ctx context.Context, r Request) (l Lease, err error) {
	// A pinned connection: busy_timeout is per connection. The connection
	// goes back to the pool afterwards (dropping it would destroy a shared
	// in-memory database), with its old busy_timeout restored.
	conn, err := r.DB.Conn(ctx)
	if err != nil {
		return l, fmt.Errorf("get a connection: %w", err)
	}
	defer conn.Close()
	var prev int64
	if err := conn.QueryRowContext(ctx, sqliteBusyRead).Scan(&prev); err != nil {
		return l, fmt.Errorf("read busy_timeout: %w", err)
	}
	bound := remaining(ctx, time.Millisecond).Milliseconds()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(sqliteBusySet, bound)); err != nil {
		return l, fmt.Errorf("bound lock waits: %w", err)
	}
	defer func() {
		// The context may have ended; this is a local call that does not wait.
		if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf(sqliteBusySet, prev)); rerr != nil {
			discard(conn)
		}
	}()
	var n int
	if err := conn.QueryRowContext(ctx, sqliteExists, schema.TableName).Scan(&n); err != nil {
		return l, fmt.Errorf("look for the table: %w", err)
	}
	if n == 0 {
		// SQLite's DDL is transactional: others see the table with its pool
		// row, or not at all.
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return l, fmt.Errorf("begin: %w", err)
		}
		if err := create(ctx, tx, dialect.SQLite, sqliteSeed); err != nil {
			_ = tx.Rollback()
			return l, err
		}
		if err := tx.Commit(); err != nil {
			return l, fmt.Errorf("commit the new table: %w", err)
		}
		l.Created = true
	}
	if err := takeReturning(ctx, conn, sqliteTake, sqliteSeed, r, &l); err != nil {
		return l, err
	}
	_, l.AuditErr = conn.ExecContext(ctx, sqliteAudit, r.Service, l.WorkerID, r.Instance)
	return l, nil
}

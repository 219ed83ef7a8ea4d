package lease

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"entgo.io/ent/dialect"

	"github.com/entflake/entflake/schema"
)

// session is a take's pinned connection with the lease's settings on it.
type session struct {
	r       *Request
	conn    *sql.Conn
	q       *sqlText
	nowMs   string
	restore func(context.Context) error
	// x runs the session's statements: conn, or the transaction of the
	// locked take while it runs (locked is then true).
	x       runner
	locked  bool
	pool    pool      // the pool's own rows as the last read found them
	tidb    bool      // the server is TiDB (from the first read)
	deleted []Deleted // rows found deleted by the locked take, told once it commits
	// ranged is the pool's range the locked take moved from, told once it
	// commits (nil: none moved).
	ranged   *string
	reached  bool // a slot was read: the database answered this take
	reseeded bool
	pending  int64 // a counter value not yet probed, or -1
	// conflicts counts the claims and inserts the server refused for a
	// conflict during this take (see settle).
	conflicts    int
	lastConflict error
	// seen is what an earlier try of this take learnt of the pool, kept
	// past that try's rollback (see lockedOnce).
	seen seen
}

// seen is what a try of the locked take learnt of the pool that a later
// try must not forget when the first is rolled back: that the pool was in
// use (slot rows, or pool rows with what a take writes), the longest TTL
// its holders used, and the floor the try decided for rows made (its
// worst case, where a pool row was lost). A later try that finds no trace
// of the pool (every row deleted since) takes it at its worst (rule 2 of
// statements.go), not as new.
type seen struct {
	inUse      bool
	ttl, until int64
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

// open pins a connection and puts the lease's settings on it.
func open(ctx context.Context, r *Request) (*session, error) {
	conn, err := r.DB.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("get a connection: %w", err)
	}
	s := &session{r: r, conn: conn, x: conn, q: textFor(r.Dialect), pending: -1, restore: func(context.Context) error { return nil }}
	switch r.Dialect {
	case dialect.MySQL:
		s.nowMs = mysqlNowMs
		secs := int64((remaining(ctx, time.Second) + time.Second - 1) / time.Second)
		if _, err := conn.ExecContext(ctx, fmt.Sprintf(mysqlSessionSave, secs, secs)); err != nil {
			discard(conn)
			return nil, fmt.Errorf("set up the session: %w", err)
		}
		s.restore = func(ctx context.Context) error {
			_, err := conn.ExecContext(ctx, mysqlSessionRestore)
			return err
		}
	case dialect.Postgres:
		// Nothing to set: every statement runs on its own, and pgx ends a
		// statement on the server when its context ends.
		s.nowMs = pgNowMs
	default:
		s.nowMs = sqliteNowMs
		var prev int64
		if err := conn.QueryRowContext(ctx, sqliteBusyRead).Scan(&prev); err != nil {
			conn.Close()
			return nil, fmt.Errorf("read busy_timeout: %w", err)
		}
		bound := remaining(ctx, time.Millisecond).Milliseconds()
		if _, err := conn.ExecContext(ctx, fmt.Sprintf(sqliteBusySet, bound)); err != nil {
			conn.Close()
			return nil, fmt.Errorf("bound lock waits: %w", err)
		}
		s.restore = func(ctx context.Context) error {
			_, err := conn.ExecContext(ctx, fmt.Sprintf(sqliteBusySet, prev))
			return err
		}
	}
	return s, nil
}

// close puts the session's settings back and returns the connection to the
// pool, or drops it if that fails (the context may have ended, and a
// connection whose statement was cut off is broken anyway).
func (s *session) close(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := s.restore(rctx); err != nil {
		discard(s.conn)
	}
	s.conn.Close()
}

// discard drops a pinned connection instead of returning it to the pool:
// database/sql drops a connection whose Raw callback reports ErrBadConn.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
}

// counter moves the '__global__' counter and returns its new value. A
// missing row is put back once.
func (s *session) counter(ctx context.Context) (int64, error) {
	v, err := s.move(ctx, s.q.counter)
	lo, _ := s.bounds()
	return lo + v, err
}

// durableCounter is counter with a durable commit: the lifetime lease
// hands out its value as the worker id.
func (s *session) durableCounter(ctx context.Context) (int64, error) {
	format := s.q.counter
	if s.q.counterDurable != "" {
		format = s.q.counterDurable
	}
	v, err := s.move(ctx, format)
	return s.r.lo() + v, err
}

// move moves the counter modulo the size of the request's worker range:
// its value is an offset in the range.
func (s *session) move(ctx context.Context, format string) (int64, error) {
	lo, hi := s.bounds()
	stmt := fmt.Sprintf(format, hi-lo+1)
	for attempt := 0; ; attempt++ {
		var (
			v     int64
			found bool
		)
		// A deadlock (1213) or a lock wait that timed out (1205) on the
		// counter row, a serialization failure (40001, on the statement
		// or, in count's transaction, on COMMIT), SQLITE_BUSY: the move did
		// not take effect; try again within the deadline.
		err := retryConflicts(ctx, func() (err error) {
			v, found, err = s.count(ctx, stmt)
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("move the counter: %w", err)
		}
		if found {
			return v, nil
		}
		// No counter row (MySQL: LAST_INSERT_ID would be whatever this
		// session held before; the rows-affected check catches it).
		if attempt > 0 {
			return 0, ErrNoPoolRow
		}
		settingUp, err := s.settingUp(ctx)
		if err != nil {
			return 0, err
		}
		var inserted int64
		if err := retryConflicts(ctx, func() error {
			res, err := s.conn.ExecContext(ctx, s.q.seed)
			if err == nil {
				inserted, err = res.RowsAffected()
			}
			return err
		}); err != nil {
			return 0, fmt.Errorf("re-seed the pool row: %w", err)
		}
		// Put back by this seed, not by another starter since the move.
		s.reseeded = s.reseeded || inserted == 1 && !settingUp
	}
}

// settingUp reports, when the counter row is missing, whether another
// starter may be creating the tables right now, rather than the row having
// gone missing. MySQL's DDL commits statement by statement: between another
// starter's CREATE TABLE sys_sequence and its seed, this one's counter
// finds the table and no row (seen in up to 7 of 16 starters on a fresh
// MariaDB database). ensure seeds the row before it creates the slot table,
// so while the slot table is absent the tables are being set up; once it is
// there, the creator's seed has committed, and a seed of this session's
// that still inserts a row (affected rows 1; an existing row gives 0, or 1
// under the DSN option clientFoundRows) puts back one that was lost, or
// that tables made by another tool never had. Where DDL is transactional
// the tables appear with the row, and a row this session inserts is always
// one that was missing.
func (s *session) settingUp(ctx context.Context) (bool, error) {
	if s.r.Dialect != dialect.MySQL {
		return false, nil
	}
	exists, err := tableExists(ctx, s.conn, s.q, schema.SlotTableName)
	return !exists, err
}

func (s *session) count(ctx context.Context, stmt string) (v int64, found bool, err error) {
	if s.r.Dialect == dialect.MySQL {
		res, err := s.conn.ExecContext(ctx, stmt)
		if err != nil {
			return 0, false, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return 0, false, err
		}
		v, err := res.LastInsertId()
		return v, err == nil, err
	}
	err = s.conn.QueryRowContext(ctx, stmt).Scan(&v)
	if serialization(err) {
		// A REPEATABLE READ or SERIALIZABLE default: once more, in a READ
		// COMMITTED transaction, where the UPDATE waits for the row
		// instead of failing.
		var tx *sql.Tx
		if tx, err = s.conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}); err != nil {
			return 0, false, err
		}
		defer tx.Rollback()
		// A 40001 at COMMIT means the move was rolled back: move runs
		// count again.
		if err = tx.QueryRowContext(ctx, stmt).Scan(&v); err == nil {
			err = tx.Commit()
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return v, err == nil, err
}

// row is a slot as read.
type row struct {
	workerID  int64
	exists    bool
	fence     int64
	beats     int64
	expiresMs int64
	promiseMs int64
	service   string
	instance  string
	layout    string
	nowMs     int64 // the database's clock when read (readSlot only)
	pool      pool  // the pool's own rows, as read with the slot (readSlot only)
	// While the pool widens (crossCheck): shared says why the slot may not
	// be taken (a live slot of the other layout issues its IDs), and cross
	// is the highest promise of the other layout's rows that share its
	// IDs, which its floor is above.
	shared string
	cross  int64
}

// floor is the lowest ID time (Unix ms) a take of the slot may issue: one
// above its promise, and above those of the other layout's rows that
// share its IDs while the pool widens.
func (w row) floor() int64 { return max(w.promiseMs, w.cross) + 1 }

// live reports whether the slot was held when read: not expired on the
// database's clock, and not released (a released slot's expiry is 0).
func (w row) live() bool { return w.exists && w.expiresMs >= w.nowMs }

// read reads a slot with the database's clock and the pool's own rows.
func (s *session) read(ctx context.Context, workerID int64, c *Clock) (row, error) {
	w := row{workerID: workerID}
	var (
		fence, beats, expires, promise, made, layoutTTL sql.NullInt64
		service, instance, layout                       sql.NullString
		layoutRow, layoutText, slotsRow                 sql.NullString
		slotsText                                       sql.NullString
		version                                         string
	)
	run := func(dbMs *int64) error {
		stmt, args := s.q.with(s.q.readSlot, workerID)
		return s.x.QueryRowContext(ctx, stmt, args...).Scan(&fence, &beats, &expires, &promise, &service, &instance, &layout,
			dbMs, &layoutRow, &layoutText, &layoutTTL, &slotsRow, &made, &slotsText, &version)
	}
	var err error
	if c != nil {
		err = readClock(c, s.r.Now, run)
		w.nowMs = c.DBTime.UnixMilli()
	} else {
		err = run(&w.nowMs)
	}
	if err != nil {
		return w, fmt.Errorf("read slot %d: %w", workerID, err)
	}
	w.exists = fence.Valid
	w.fence, w.beats, w.expiresMs, w.promiseMs = fence.Int64, beats.Int64, expires.Int64, promise.Int64
	w.service, w.instance, w.layout = service.String, instance.String, layout.String
	w.pool = pool{hasLayout: layoutRow.Valid, layoutText: layoutText.String, layoutTTL: layoutTTL.Int64, hasSlots: slotsRow.Valid,
		made: made.Int64, slotsText: slotsText.String, tidb: strings.Contains(version, "TiDB")}
	s.pool, s.tidb, s.reached = w.pool, w.pool.tidb, true
	return w, nil
}

// claim is the compare-and-set of a take on a slot read as w, with the
// pool's layout row as the take read it. took is false when someone wrote
// the slot since, it is live (and takeover is false), the promise is past
// the database's clock + TTL, or the pool's layout changed.
func (s *session) claim(ctx context.Context, w row, promise int64, takeover bool) (took bool, err error) {
	flag := 0
	if takeover {
		flag = 1
	}
	stmt := s.q.claim
	if s.locked {
		stmt = s.q.claimLocked
	}
	ttl := s.r.ttlMs()
	res, err := s.x.ExecContext(ctx, stmt, s.r.Service, s.r.Instance, s.r.Layout,
		ttl, promise, w.workerID, w.beats, w.promiseMs, flag, promise, ttl, w.pool.layoutText)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// candidates lists up to 8 free slots: those whose floor is at most near
// first, then in counter order from start.
func (s *session) candidates(ctx context.Context, start, near int64) ([]row, error) {
	lo, hi := s.bounds()
	rows, err := s.x.QueryContext(ctx, fmt.Sprintf(s.q.candidates, hi-lo+1, start, near, lo, hi, s.sharedFilter()))
	if err != nil {
		return nil, fmt.Errorf("look for free slots: %w", err)
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		// Listed as free: its expiry had passed on the database's clock.
		// Its pool rows are those the last read saw: a claim that finds them
		// changed matches nothing, and the next read sees the change.
		w := row{exists: true, pool: s.pool}
		if err := rows.Scan(&w.workerID, &w.fence, &w.beats, &w.promiseMs, &w.nowMs); err != nil {
			return nil, fmt.Errorf("look for free slots: %w", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look for free slots: %w", err)
	}
	return out, nil
}

// census counts the live slots of the request's range and finds a worker
// id of it that has no row yet (-1 if every one has).
func (s *session) census(ctx context.Context) (live, missing int64, err error) {
	var (
		rows, zero int64
		gap        sql.NullInt64
	)
	lo, hi := s.bounds()
	err = s.x.QueryRowContext(ctx, fmt.Sprintf(s.q.census, lo, hi)).Scan(&live, &rows, &gap, &zero)
	switch {
	case err != nil:
		return 0, 0, fmt.Errorf("count the slots: %w", err)
	case rows >= hi-lo+1:
		return live, -1, nil
	case zero == 0:
		return live, lo, nil
	case gap.Valid:
		return live, gap.Int64, nil
	}
	return live, -1, nil
}

// holder describes who holds a slot, for an error message.
func (s *session) holder(ctx context.Context, workerID int64) string {
	return describe(ctx, s.x, s.q, workerID)
}

// querier is what describe needs of a *sql.Conn, *sql.DB or *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func describe(ctx context.Context, x querier, q *sqlText, workerID int64) string {
	var (
		fence, expires, promise, now int64
		service, instance, layout    sql.NullString
	)
	err := x.QueryRowContext(ctx, q.holder, workerID).Scan(&fence, &service, &instance, &expires, &promise, &layout, &now)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Sprintf("slot %d has no row", workerID)
	case err != nil:
		return fmt.Sprintf("slot %d could not be read: %v", workerID, err)
	}
	state := fmt.Sprintf("live for %v more", time.Duration(expires-now)*time.Millisecond)
	switch {
	case expires == 0:
		state = "released"
	case expires < now:
		state = fmt.Sprintf("expired %v ago", time.Duration(now-expires)*time.Millisecond)
	}
	return fmt.Sprintf("slot %d: fence %d, service %q, instance %q, layout %q, %s, promise %s",
		workerID, fence, service.String, instance.String, layout.String, state,
		time.UnixMilli(promise).UTC().Format(time.RFC3339Nano))
}

// ensure creates the tables that are missing, and the counter row. It looks
// for each table first, so that a user without CREATE privilege can lease
// from existing ones.
func (s *session) ensure(ctx context.Context) (created []string, err error) {
	// Look before creating, outside any transaction.
	missing, err := s.missing(ctx, s.conn)
	if err != nil || len(missing) == 0 {
		return nil, err
	}
	x, commit, rollback, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer rollback()
	if s.r.Dialect != dialect.MySQL {
		// Another starter may have created them since the look: this
		// transaction (after PostgreSQL's advisory lock, or holding
		// SQLite's write lock) sees its commit.
		if missing, err = s.missing(ctx, x); err != nil {
			return nil, err
		}
	}
	seeded := false
	seed := func() error {
		if _, err := x.ExecContext(ctx, s.q.seed); err != nil {
			return fmt.Errorf("seed the pool row: %w", err)
		}
		seeded = true
		return nil
	}
	for _, t := range missing {
		// Seed the pool row before the slot table exists. On MySQL each
		// DDL statement commits by itself, and another starter that finds
		// both tables skips ensure: if the row came after the slot table,
		// such a starter could move a counter that is not there yet and
		// log "counter row restored" on a database that is merely new.
		// With the row first, "both tables exist" implies "the row was
		// seeded" (missing lists sys_sequence before the slot table).
		if t == schema.SlotTableName {
			if err := seed(); err != nil {
				return nil, err
			}
		}
		stmts, err := schema.TableStatements(s.r.Dialect, t)
		if err != nil {
			return nil, err
		}
		for _, ddl := range stmts {
			if _, err := x.ExecContext(ctx, ddl); err != nil {
				return nil, fmt.Errorf("create table %s: %w", t, err)
			}
		}
		created = append(created, t)
	}
	if !seeded {
		// Only sys_sequence was missing, or it came from another tool
		// without the row: seeding is idempotent.
		if err := seed(); err != nil {
			return nil, err
		}
	}
	if err := commit(); err != nil {
		return nil, fmt.Errorf("commit the new tables: %w", err)
	}
	return created, nil
}

// ensureRetried runs ensure again after a conflict (a serialization failure
// of the DDL or of its COMMIT, a deadlock): on PostgreSQL the whole
// transaction was rolled back, and ensure looks again for what is missing
// (on MySQL, a table created before the conflict stays, and is not created
// again).
func (s *session) ensureRetried(ctx context.Context) (created []string, err error) {
	err = retryConflicts(ctx, func() (err error) {
		var c []string
		c, err = s.ensure(ctx)
		created = append(created, c...)
		return err
	})
	return created, err
}

// withTables runs op, a take, creating the lease tables when op finds one
// missing, and returns the tables it created. A table can still be missing
// after ensure found it or made it: on TiDB, a CREATE TABLE IF NOT EXISTS
// that meets another session's CREATE of the same table returns at once
// (TiDB turns the "table exists" of its DDL job into a note) without
// waiting for the server to load the schema version that has the table,
// and until it does, statements answer 1146 (on one tidb-server, seen in
// 1 of 150 fresh databases with 16 starters each, and in 2 of 90 with 32).
// The statement that meets it may be op's, or ensure's own seed of the
// counter row right after its CREATE of sys_sequence. So a missing table
// is waited for: ensure, then op, run again after pause's short sleeps,
// until the context's deadline (or, without one, maxConflicts tries).
// Where CREATE waits for the other session's (MySQL and MariaDB hold the
// table name's metadata lock) or DDL is transactional (PostgreSQL,
// SQLite), the tables are there after the first ensure.
func (s *session) withTables(ctx context.Context, op func() error) (created []string, err error) {
	err = op()
	for n := 0; missingTable(err); n++ {
		if n > 0 && !pause(ctx, n-1) {
			return created, fmt.Errorf("%w (a lease table still missing; tries to create or find the tables: %d; "+
				"the server did not show it to this session in time)", err, n)
		}
		var made []string
		if made, err = s.ensureRetried(ctx); err == nil {
			err = op()
		}
		for _, t := range made {
			// On TiDB a later try may create a table again (see above).
			if !slices.Contains(created, t) {
				created = append(created, t)
			}
		}
	}
	return created, err
}

// begin starts what ensure runs in. PostgreSQL and SQLite have
// transactional DDL: the tables and the counter row appear together, or
// not at all. On PostgreSQL, concurrent creators serialise on an advisory
// lock. On SQLite the transaction takes the write lock at once (BEGIN
// IMMEDIATE, which waits out busy_timeout): a deferred one that read first
// could not wait for it, and would fail with SQLITE_BUSY when another
// starter wrote since. MySQL's DDL commits by itself: its statements run on
// their own.
func (s *session) begin(ctx context.Context) (x interface {
	execer
	querier
}, commit func() error, rollback func(), err error) {
	switch s.r.Dialect {
	case dialect.MySQL:
		return s.conn, func() error { return nil }, func() {}, nil
	case dialect.SQLite:
		if _, err := s.conn.ExecContext(ctx, sqliteBegin); err != nil {
			return nil, nil, nil, fmt.Errorf("begin: %w", err)
		}
		done := false
		return s.conn, func() error {
				_, err := s.conn.ExecContext(ctx, sqliteCommit)
				done = err == nil
				return err
			}, func() {
				if !done {
					// Also after a COMMIT the ended context kept from
					// running, which leaves the transaction open.
					_ = rollbackConn(ctx, s.conn)
				}
			}, nil
	}
	tx, err := s.conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("begin: %w", err)
	}
	bound := fmt.Sprintf("%dms", remaining(ctx, time.Millisecond).Milliseconds())
	if _, err := tx.ExecContext(ctx, pgLockWait, bound); err != nil {
		_ = tx.Rollback()
		return nil, nil, nil, fmt.Errorf("bound lock waits: %w", err)
	}
	if _, err := tx.ExecContext(ctx, pgCreateLock); err != nil {
		_ = tx.Rollback()
		return nil, nil, nil, fmt.Errorf("lock table creation: %w", err)
	}
	return tx, tx.Commit, func() { _ = tx.Rollback() }, nil
}

// missing lists the tables that are not there.
func (s *session) missing(ctx context.Context, x querier) ([]string, error) {
	var out []string
	for _, t := range []string{schema.TableName, schema.SlotTableName} {
		exists, err := tableExists(ctx, x, s.q, t)
		if err != nil {
			return nil, err
		}
		if !exists {
			out = append(out, t)
		}
	}
	return out, nil
}

// tableExists reports whether table is there, as x sees it.
func tableExists(ctx context.Context, x querier, q *sqlText, table string) (bool, error) {
	var exists bool
	if err := x.QueryRowContext(ctx, q.exists, table).Scan(&exists); err != nil {
		return false, fmt.Errorf("look for table %s: %w", table, err)
	}
	return exists, nil
}

// runner is what a take needs of a *sql.Conn or *sql.Tx.
type runner interface {
	execer
	querier
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// execer is what ensure needs of a *sql.Conn or *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

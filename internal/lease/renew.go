package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"entgo.io/ent/dialect"
)

// Holding names a slot held by Take.
type Holding struct {
	DB       *sql.DB
	Dialect  string
	WorkerID int64
	Fence    int64
	Instance string // the holder's tag, as Request.Instance
}

// Holding names the slot s, taken by r.
func (r Request) Holding(s Slot) Holding {
	return Holding{DB: r.DB, Dialect: r.Dialect, WorkerID: s.WorkerID, Fence: s.Fence, Instance: s.Instance}
}

// Renew keeps the slot live for ttl more on the database's clock and raises
// its promise to promiseMs (never lowering it). A nil error means the
// database acknowledged both: only then may the holder issue up to
// promiseMs. ErrLost means the slot was taken (its fence or instance
// changed) or its row or table is gone: the holder must stop issuing under
// this worker id.
//
// The UPDATE runs in an explicit transaction, so that it commits whatever
// the DSN's autocommit, and so that a renewal the client gave up on (its
// deadline ended, the connection broke) is rolled back on the server when
// it notices the client has gone, instead of committing unseen. Its COMMIT
// ends with ctx too (see tx). The
// transaction has the session's default isolation on MySQL (READ COMMITTED
// is refused for writes under binlog_format=STATEMENT) and READ COMMITTED on
// PostgreSQL (under REPEATABLE READ a concurrent take would make it fail
// with a serialization error rather than find the new fence). It takes a
// connection from the pool for its own duration only, so a pool of one
// connection held by a long transaction delays it, without a connection
// being kept from the application. A transaction refused for a conflict
// (a deadlock, a serialization failure, at the UPDATE or at COMMIT) runs
// again, from its beginning, until ctx's deadline. An engine may run it
// SERIALIZABLE whatever was asked (CockroachDB does when its cluster
// setting sql.txn.read_committed_isolation.enabled is false): then a
// concurrent take makes it fail with 40001, and the next try finds the new
// fence (ErrLost).
func Renew(ctx context.Context, h Holding, ttlMs, promiseMs int64) error {
	return retryConflicts(ctx, func() error { return h.renewOnce(ctx, ttlMs, promiseMs) })
}

// ErrCapped: a renewal kept the slot live, but the database refused the
// promise it asked for, which was past the database's clock + TTL: the
// holder's clock runs ahead of the database's by more than its Margin. The
// slot keeps its old promise. See CapError.
var ErrCapped = errors.New("promise past the database's clock + TTL refused")

// CapError is ErrCapped with its figures.
type CapError struct {
	// Asked is the promise asked for, Unix ms in the holder's clock.
	Asked int64
	// Kept is the promise the slot keeps.
	Kept int64
	// DBTime is the database's clock as the renewal read it.
	DBTime time.Time
	// Skew is how far the promise asked for was past the database's clock
	// + TTL: at least how far the holder's clock runs ahead of the
	// database's, beyond its Margin.
	Skew time.Duration
}

func (e *CapError) Error() string {
	return fmt.Sprintf("%v: asked %s, %v past the database's clock (%s) + TTL; the slot stays live with its promise %s",
		ErrCapped, time.UnixMilli(e.Asked).UTC().Format(time.RFC3339Nano), e.Skew,
		e.DBTime.UTC().Format(time.RFC3339Nano), time.UnixMilli(e.Kept).UTC().Format(time.RFC3339Nano))
}

// Unwrap makes errors.Is(err, ErrCapped) hold.
func (e *CapError) Unwrap() error { return ErrCapped }

// renewOnce is one renewal. When the UPDATE matches nothing, the slot is
// read again to say why: taken, gone, expired (ErrLost), or ours and live,
// which leaves the cap (ErrCapped, after keeping the slot live). When its
// answer is lost, the slot is read back, and the renewal counts as done
// only if the slot shows this holder, live, with at least the promise
// asked.
//
// The rules of statements.go, branch by branch: the UPDATE names the fence
// and the instance tag, which no other holder and no row made again share
// (rule 1), and the database's clock decides the expiry inside it; the
// reads that follow decide nothing that the write did not (rule 3): a
// read-back counts only what the slot shows of this very renewal (its
// promise), so a renewal the server rolled back while the slot still
// reads as ours and live fails (the matrix's renew-commit/drop×cut-off
// cell, mutant 08).
func (h Holding) renewOnce(ctx context.Context, ttlMs, promiseMs int64) error {
	q := textFor(h.Dialect)
	err := h.writeOnce(ctx, "renew", q.renew, ttlMs, promiseMs, h.WorkerID, h.Fence, h.Instance, promiseMs, ttlMs)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errNoMatch):
		s, rerr := h.read(ctx)
		switch {
		case rerr != nil:
			return fmt.Errorf("%w: renew slot %d with fence %d matched nothing, and reading it failed: %v",
				ErrLost, h.WorkerID, h.Fence, rerr)
		case !s.ours(h):
			return &LostError{WorkerID: h.WorkerID, Fence: h.Fence, Service: s.service, Instance: s.instance,
				detail: fmt.Sprintf("renew slot %d with fence %d found %s", h.WorkerID, h.Fence, s)}
		case s.expiresMs < s.nowMs:
			return fmt.Errorf("%w: renew slot %d with fence %d: it expired on the database's clock %v ago, and a take may "+
				"have judged it free", ErrLost, h.WorkerID, h.Fence, time.Duration(s.nowMs-s.expiresMs)*time.Millisecond)
		}
		// Ours and live: the cap refused the promise. Keep the slot live.
		if err := h.writeOnce(ctx, "renew", q.renewKeep, ttlMs, h.WorkerID, h.Fence, h.Instance); err != nil {
			if errors.Is(err, errNoMatch) {
				return fmt.Errorf("%w: renew slot %d with fence %d found %s", ErrLost, h.WorkerID, h.Fence, h.describe(ctx))
			}
			return err
		}
		return &CapError{Asked: promiseMs, Kept: s.promiseMs, DBTime: time.UnixMilli(s.nowMs),
			Skew: time.Duration(promiseMs-s.nowMs-ttlMs) * time.Millisecond}
	case errors.Is(err, ErrLost), errors.Is(err, errNotSent), answered(err):
		return err
	}
	// No answer: the renewal may have committed. Read it back on a
	// connection of its own, with a short bound of its own.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	s, rerr := h.read(rctx)
	if rerr == nil && s.ours(h) && s.expiresMs >= s.nowMs && s.promiseMs >= promiseMs {
		return nil
	}
	return err
}

// LostError is ErrLost from a renewal that found the slot held by another
// holder (Instance; empty when the row is gone).
type LostError struct {
	WorkerID, Fence   int64
	Service, Instance string // the holder found, if any
	detail            string
}

func (e *LostError) Error() string { return ErrLost.Error() + ": " + e.detail }

// Unwrap makes errors.Is(err, ErrLost) hold.
func (e *LostError) Unwrap() error { return ErrLost }

// heldSlot is a slot as a holder reads it back.
type heldSlot struct {
	exists                      bool
	fence                       int64
	service, instance, layout   string
	expiresMs, promiseMs, nowMs int64
	workerID                    int64
}

// ours reports whether the slot still shows the holding.
func (s heldSlot) ours(h Holding) bool {
	return s.exists && s.fence == h.Fence && s.instance == h.Instance
}

func (s heldSlot) String() string {
	if !s.exists {
		return fmt.Sprintf("slot %d has no row", s.workerID)
	}
	return fmt.Sprintf("slot %d: fence %d, service %q, instance %q", s.workerID, s.fence, s.service, s.instance)
}

// read reads the held slot in a transaction of its own (TiDB's snapshot
// would otherwise be the failed write's).
func (h Holding) read(ctx context.Context) (heldSlot, error) {
	st := heldSlot{workerID: h.WorkerID}
	err := readTx(ctx, h.DB, h.Dialect, func(tx *tx) error {
		var service, instance, layout sql.NullString
		err := tx.QueryRowContext(ctx, textFor(h.Dialect).holder, h.WorkerID).
			Scan(&st.fence, &service, &instance, &st.expiresMs, &st.promiseMs, &layout, &st.nowMs)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		st.exists = err == nil
		st.service, st.instance, st.layout = service.String, instance.String, layout.String
		return err
	})
	if missingTable(err) {
		return st, nil // no table, no row
	}
	return st, err
}

// Release frees the slot now and writes lastMs, the exact last millisecond
// the holder issued in (Unix ms), as its promise: the next holder starts
// above it. The holder must have stopped issuing first. ErrLost as Renew.
func Release(ctx context.Context, h Holding, lastMs int64) error {
	err := h.write(ctx, "release", textFor(h.Dialect).release, lastMs, h.WorkerID, h.Fence, h.Instance)
	if errors.Is(err, errNoMatch) {
		return fmt.Errorf("%w: release slot %d with fence %d found %s", ErrLost, h.WorkerID, h.Fence, h.describe(ctx))
	}
	return err
}

// errNoMatch: a renewal or release matched no row (see writeOnce).
var errNoMatch = errors.New("matched no row")

// errNotSent: a renewal or release failed before its write was sent (no
// connection, or its transaction did not begin): it cannot have committed.
var errNotSent = errors.New("not sent")

// write runs stmt in a transaction of its own, and runs the whole
// transaction again after a conflict, as long as the context's deadline
// allows (see retryConflicts): CockroachDB and YugabyteDB may answer 40001
// to the UPDATE or to its COMMIT, and so may PostgreSQL under a deferred
// check. Running it again is safe: the UPDATE names the fence and the
// instance, which the server compares anew, and its values (the expiry on
// the database's clock, the promise raised with GREATEST, the release's
// last millisecond) are the same whether the first try happened or not,
// and it did not (a conflict is an answer: the transaction was rolled
// back).
func (h Holding) write(ctx context.Context, what, stmt string, args ...any) error {
	return retryConflicts(ctx, func() error { return h.writeOnce(ctx, what, stmt, args...) })
}

func (h Holding) writeOnce(ctx context.Context, what, stmt string, args ...any) error {
	var opts *sql.TxOptions
	if h.Dialect == dialect.Postgres {
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	tx, err := beginTx(ctx, h.DB, h.Dialect, opts)
	if err != nil {
		return fmt.Errorf("%s slot %d: begin: %w: %w", what, h.WorkerID, errNotSent, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, stmt, args...)
	if missingTable(err) {
		return fmt.Errorf("%w: %s slot %d: the table is gone: %v", ErrLost, what, h.WorkerID, err)
	}
	if err != nil {
		return fmt.Errorf("%s slot %d: %w", what, h.WorkerID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s slot %d: %w", what, h.WorkerID, err)
	}
	if n == 0 {
		// Nothing matched: every write moves beats, so a matched row always
		// counts as changed. The caller says why, from a read in a
		// transaction of its own: TiDB takes a transaction's snapshot at
		// its start, so a read in this one would show the slot as it was
		// before the take that made the UPDATE (which reads the latest
		// rows) match nothing (seen on TiDB: "found slot 1: fence 1" for a
		// slot at fence 2).
		return fmt.Errorf("%w: %s slot %d", errNoMatch, what, h.WorkerID)
	}
	// An error here with the server's answer (40001 from CockroachDB's or
	// YugabyteDB's serializable commit, or from a deferred check) means the
	// transaction was rolled back: write runs it again. Without an answer
	// (the connection broke) it may have committed: the caller sees an
	// error and must not rely on the write, which costs nothing here (a
	// renewal or release that committed unseen only did what was asked).
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s slot %d: commit: %w", what, h.WorkerID, err)
	}
	return nil
}

// describe says who holds the slot now, read in a transaction of its own.
func (h Holding) describe(ctx context.Context) string {
	var d string
	err := readTx(ctx, h.DB, h.Dialect, func(tx *tx) error {
		d = describe(ctx, tx, textFor(h.Dialect), h.WorkerID)
		return nil
	})
	if err != nil {
		return fmt.Sprintf("slot %d could not be read: %v", h.WorkerID, err)
	}
	return d
}

// Audit upserts the service's row in sys_sequence: who started last, and
// which worker id it holds. On PostgreSQL a row another transaction is
// writing is left to it (see the audit statement): of starts at one
// moment, the row keeps one. MySQL's upsert waits for the row's lock,
// which InnoDB holds about a millisecond a writer.
func Audit(ctx context.Context, db *sql.DB, dialectName, service, instance string, workerID int64) error {
	args := []any{service, workerID, instance}
	if dialectName == dialect.MySQL {
		args = append(args, workerID, instance)
	}
	// A transaction, so that it commits whatever the DSN's autocommit; run
	// again after a conflict, as write does (an upsert of the same values).
	return retryConflicts(ctx, func() error {
		return inTx(ctx, db, dialectName, nil, func(tx *tx) error {
			_, err := tx.ExecContext(ctx, textFor(dialectName).audit, args...)
			return err
		})
	})
}

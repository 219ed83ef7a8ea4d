package lease

import (
	"context"
	"database/sql"
	"fmt"

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
	return h.write(ctx, "renew", textFor(h.Dialect).renew, ttlMs, promiseMs, h.WorkerID, h.Fence, h.Instance)
}

// Release frees the slot now and writes lastMs, the exact last millisecond
// the holder issued in (Unix ms), as its promise: the next holder starts
// above it. The holder must have stopped issuing first. ErrLost as Renew.
func Release(ctx context.Context, h Holding, lastMs int64) error {
	return h.write(ctx, "release", textFor(h.Dialect).release, lastMs, h.WorkerID, h.Fence, h.Instance)
}

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
		return fmt.Errorf("%s slot %d: begin: %w", what, h.WorkerID, err)
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
		// counts as changed. Say who holds it now, read in a transaction
		// of its own: TiDB takes a transaction's snapshot at its start, so
		// a read in this one would show the slot as it was before the take
		// that made the UPDATE (which reads the latest rows) match nothing
		// (seen on TiDB: "found slot 1: fence 1" for a slot at fence 2).
		tx.Rollback()
		return fmt.Errorf("%w: %s slot %d with fence %d found %s", ErrLost, what, h.WorkerID, h.Fence,
			h.describe(ctx))
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
// which worker id it holds.
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

// Private reports whether db is a database no other process can reach: a
// SQLite database in memory. Its slots never need renewing.
func Private(ctx context.Context, db *sql.DB, dialectName string) (bool, error) {
	if dialectName != dialect.SQLite {
		return false, nil
	}
	var file string
	if err := db.QueryRowContext(ctx, sqliteDatabase).Scan(&file); err != nil {
		return false, fmt.Errorf("lease: look at the SQLite database: %w", err)
	}
	return file == "", nil
}

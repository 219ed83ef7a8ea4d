package lease

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Conflicts. A database may refuse a statement, or a transaction at its
// COMMIT, because it lost a conflict with another one: MySQL's deadlock
// (1213) and lock wait timeout (1205), PostgreSQL's serialization failure
// (40001), deadlock (40P01) and lock not available (55P03), SQLITE_BUSY.
// CockroachDB and YugabyteDB run SERIALIZABLE by default and answer 40001
// whenever they cannot order a transaction, also at COMMIT, and expect the
// client to run it again. Such an answer means the work did not take
// effect: the server rolled the transaction back (PostgreSQL reports an
// error at COMMIT only for a transaction it then rolls back; a COMMIT that
// fails with 40001 has not committed). So the whole transaction can run
// again, from its beginning, in a new one: a PostgreSQL transaction that
// failed is aborted (every later statement fails with 25P02 until
// ROLLBACK), so retrying one statement inside it would be useless.
//
// An error with no answer of the server's (the connection broke, the
// context ended) is not a conflict: the statement may have committed, and
// each caller deals with that on its own terms (see settle).

// maxConflicts bounds the retries of a context that has no deadline.
const maxConflicts = 100

// pause waits before the try that follows the n-th conflict in a row (n
// from 0): a short, growing, jittered sleep, so that the transactions that
// collided do not meet again in lockstep. It returns false, without
// waiting, when the context's deadline would pass during the sleep (or,
// without a deadline, after maxConflicts), and false if the context ends
// while it waits.
func pause(ctx context.Context, n int) bool {
	d := min(time.Millisecond<<min(n, 5), 32*time.Millisecond)
	d += rand.N(d)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d || !ok && n >= maxConflicts {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// retryConflicts runs op, which must be a whole transaction (or a single
// statement that commits on its own), until it does not fail with a
// conflict or there is no time left for another try. The error of the
// last try is returned, saying how many conflicts came before it.
func retryConflicts(ctx context.Context, op func() error) error {
	var last error
	for n := 0; ; n++ {
		err := op()
		if err == nil {
			return nil
		}
		if !retryable(err) {
			return afterConflicts(ctx, err, n, last)
		}
		if !pause(ctx, n) {
			return fmt.Errorf("%w (a conflict, %d tries: no time left to try again)", err, n+1)
		}
		last = err
	}
}

// afterConflicts adds to err, when the context ended during the try that
// followed n conflicts, what those were: the reason the deadline passed.
// The conflict is named, not wrapped: err alone says whether the last try
// was answered.
func afterConflicts(ctx context.Context, err error, n int, last error) error {
	if n == 0 || last == nil || ctx.Err() == nil {
		return err
	}
	return fmt.Errorf("%w (after %d conflicts, the last: %v)", err, n, last)
}

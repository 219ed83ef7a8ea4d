package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// take runs the search for a slot on the session.
func (s *session) take(ctx context.Context) (Slot, error) {
	r := s.r
	var clock Clock
	// The first read carries the database's clock for the skew check, and
	// the layout guard.
	first, err := s.first(ctx, &clock)
	if err != nil {
		return Slot{}, err
	}
	if r.Explicit {
		return s.takeExplicit(ctx, first, clock)
	}
	var (
		misses int
		far    *row // the free slot whose floor is least ahead, if all are far
		w      = first
		again  bool // the last claim lost a conflict: read the same slot again
	)
	for tries := 0; ; tries++ {
		if err := ctx.Err(); err != nil {
			return Slot{}, err
		}
		if tries > 0 {
			if again {
				// A conflict is no sign that the slot is taken (under
				// SERIALIZABLE, claims of different rows can collide on the
				// layout row they read): try it again, from a new read.
				var err error
				if w, err = s.read(ctx, w.workerID, nil); err != nil {
					return Slot{}, err
				}
			} else if misses < probes {
				v, err := s.counter(ctx)
				if err != nil {
					return Slot{}, err
				}
				if w, err = s.read(ctx, v, nil); err != nil {
					return Slot{}, err
				}
			} else {
				// Enough probing: ask the table.
				slot, ok, err := s.search(ctx, w.workerID, &far, &misses)
				if err != nil || ok {
					slot.Clock, slot.Misses = clock, misses
					return slot, err
				}
				continue
			}
		}
		conflicts := s.conflicts
		slot, ok, err := s.try(ctx, w, &far, false)
		if err != nil {
			return Slot{}, err
		}
		if ok {
			slot.Clock, slot.Misses = clock, misses
			return slot, nil
		}
		if again = s.conflicts > conflicts; !again {
			misses++
		}
	}
}

// first reads the first slot: the counter's next value, or the explicit id.
func (s *session) first(ctx context.Context, c *Clock) (row, error) {
	v := s.r.WorkerID
	if !s.r.Explicit {
		if s.pending >= 0 {
			v = s.pending // moved before the slot table was found missing
		} else {
			var err error
			if v, err = s.counter(ctx); err != nil {
				return row{}, err
			}
		}
	}
	w, err := s.read(ctx, v, c)
	if err != nil {
		if !s.r.Explicit {
			s.pending = v
		}
		return w, err
	}
	s.pending = -1
	return w, nil
}

// try takes the slot w if it is free and its floor is not too far ahead of
// the holder's clock (unless must: then any floor the deadline can wait
// for). ok is false when it did not take it; a free slot skipped for its
// floor is remembered in far.
//
// The rules of statements.go, branch by branch: a slot with no row, or a
// pool whose rows do not confirm this take's layout, range or widening,
// goes to the locked take, which decides under the pool's locks and reads
// a lost pool row as the worst case (rules 2 and 3); a live or shared slot
// read here is only skipped, and a free one is claimed by a compare-and-set
// that re-checks everything read (beats, the promise its floor came from,
// the expiry, the layout row: rules 1 and 3), so that nothing read before
// it decides on its own.
func (s *session) try(ctx context.Context, w row, far **row, must bool) (Slot, bool, error) {
	if !w.exists || !s.conforms(w.pool) {
		return s.lockedTake(ctx, w.workerID, func(w row) (Slot, bool, error) { return s.try(ctx, w, far, must) })
	}
	if w.live() || w.shared != "" || slices.Contains(s.r.Avoid, w.workerID) {
		return Slot{}, false, nil
	}
	ahead := s.r.ahead(w.floor())
	_, _, capOK := s.promiseFor(w, w.floor())
	if (ahead > floorSlack || !capOK) && !must {
		if *far == nil || w.floor() < (*far).floor() {
			c := w
			*far = &c
		}
		return Slot{}, false, nil
	}
	if !canWait(ctx, ahead) || !capOK {
		return Slot{}, false, nil // the deadline would pass before the first ID
	}
	return s.tryClaim(ctx, w, false)
}

func (s *session) tryClaim(ctx context.Context, w row, takeover bool) (Slot, bool, error) {
	floor := w.floor()
	promise, capped, ok := s.promiseFor(w, floor)
	if !ok {
		// The floor is past the database's clock + TTL (its promise was
		// written under a longer TTL, or by a layout change, or the
		// database's clock went back): no promise this take may write
		// covers it yet.
		return Slot{}, false, s.floorAhead(w)
	}
	took, err := s.claim(ctx, w, promise, takeover)
	slot := Slot{WorkerID: w.workerID, Fence: w.fence + 1, Floor: floor, Promise: promise,
		Previous: w.instance, TookOver: takeover && w.live(), Capped: capped}
	return s.settle(ctx, slot, took, err)
}

// promiseFor is the promise a take of slot w writes: Horizon past the
// holder's clock or past the floor, if that is later, but never past the
// database's clock + TTL, which the claim's cap would refuse (see
// sqlText.renew). capped reports that the cap cut a promise whose floor
// was not ahead of the holder's clock: the holder's clock runs ahead of
// the database's by more than its Margin. ok is false when even the floor
// less one is past the cap: the database's clock went back since the
// floor was promised, and this slot cannot be taken now.
func (s *session) promiseFor(w row, floor int64) (promise int64, capped, ok bool) {
	promise = s.r.promiseMs(floor)
	if s.r.Forever {
		return promise, false, true
	}
	if limit := w.nowMs + s.r.ttlMs(); promise > limit {
		capped = floor <= s.r.Now().UnixMilli()
		promise = limit
	}
	return promise, capped, promise >= floor-1
}

// settle turns the outcome of a claim into a result (rule 3: a claim whose
// answer was lost counts only if a read of the slot afterwards shows this
// claim's fence and tag). A conflict the server
// reported (a deadlock, a lock wait that timed out, a serialization failure,
// SQLITE_BUSY) is a miss, after a pause, while the deadline leaves time for
// another try. The claim and the insert each run as one statement that
// commits on its own, so a conflict there, at the statement or at its
// implicit COMMIT (CockroachDB's and YugabyteDB's serializable commit, a
// deferred check), is an answer: nothing was written. The caller reads a
// slot again before the next claim (the next value of the counter, or the
// same explicit id): a compare-and-set on beats is never sent again with the
// values it read before. When the answer was lost (the connection broke, the context ended while
// the statement ran), the slot is read again on another connection: if it
// shows this request's instance tag with the expected fence, the claim
// committed and the slot is ours.
func (s *session) settle(ctx context.Context, slot Slot, took bool, err error) (Slot, bool, error) {
	switch {
	case err == nil:
		return slot, took, nil
	case s.locked:
		// Inside the locked take, any error ends its transaction, which
		// runs again after a conflict (lockedTake); an answer lost there
		// is settled once the COMMIT's is.
		return Slot{}, false, err
	case retryable(err):
		s.conflicts, s.lastConflict = s.conflicts+1, err
		if !pause(ctx, s.conflicts-1) {
			return Slot{}, false, fmt.Errorf("take slot %d: %w (a conflict, %d in this take: no time left to try again)",
				slot.WorkerID, err, s.conflicts)
		}
		return Slot{}, false, nil
	case answered(err):
		return Slot{}, false, fmt.Errorf("take slot %d: %w", slot.WorkerID, err)
	}
	var (
		fence    int64
		instance sql.NullString
	)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(remaining(ctx, 0), time.Second))
	defer cancel()
	rerr := readTx(rctx, s.r.DB, s.r.Dialect, func(tx *tx) error {
		return tx.QueryRowContext(rctx, fmt.Sprintf(s.q.readBack, slot.WorkerID)).Scan(&fence, &instance)
	})
	if rerr != nil {
		return Slot{}, false, fmt.Errorf("take slot %d: %w (and reading it back failed: %v)", slot.WorkerID, err, rerr)
	}
	if fence != slot.Fence || instance.String != s.r.Instance {
		// The claim did not commit (or another take came after it, before
		// this one issued anything). The session's connection is broken:
		// the take starts again on another (Take), and its next read says
		// who holds the slot; an explicit take then finds it held.
		return Slot{}, false, fmt.Errorf("take slot %d: %w (%v)", slot.WorkerID, errRetake, err)
	}
	slot.Recovered = true
	return slot, true, nil
}

// errRetake: a claim's answer was lost and the slot, read back, does not
// show it: the take starts again, on a new connection.
var errRetake = errors.New("the claim's answer was lost and the slot does not show it")

// waitReserve is what a take keeps of its deadline, beyond a wait for the
// clock to pass a floor, for the statements that follow the claim and the
// caller's switch to the slot.
const waitReserve = 100 * time.Millisecond

// canWait reports whether the deadline leaves time to wait ahead for the
// clock, with waitReserve to spare.
func canWait(ctx context.Context, ahead time.Duration) bool {
	return ahead <= 0 || ahead <= remaining(ctx, 0)-waitReserve
}

// floorAhead is the error for a slot whose floor the deadline cannot wait
// for.
func (s *session) floorAhead(w row) error {
	return &FloorError{WorkerID: w.workerID, Floor: w.floor(), Ahead: s.r.ahead(w.floor())}
}

// FloorError is ErrFloorAhead for one worker id: its previous holder may
// have issued IDs up to Floor - 1 (Unix ms, the holder's time frame), so
// nothing may be issued under it below Floor.
type FloorError struct {
	WorkerID int64
	Floor    int64         // Unix ms
	Ahead    time.Duration // how far ahead of the holder's clock (less the burst lead) when found
}

func (e *FloorError) Error() string {
	return fmt.Sprintf("%v: worker id %d may issue only from %s, %v ahead of this clock, beyond the lease timeout",
		ErrFloorAhead, e.WorkerID, time.UnixMilli(e.Floor).UTC().Format(time.RFC3339Nano), e.Ahead.Round(time.Millisecond))
}

// Unwrap makes errors.Is(err, ErrFloorAhead) hold.
func (e *FloorError) Unwrap() error { return ErrFloorAhead }

// search asks the table for free slots once probing the counter has met
// enough live ones.
func (s *session) search(ctx context.Context, start int64, far **row, misses *int) (Slot, bool, error) {
	near := s.r.Now().Add(floorSlack + s.r.Lead).UnixMilli()
	cands, err := s.candidates(ctx, start, near)
	if err != nil {
		return Slot{}, false, err
	}
	for _, c := range cands {
		slot, ok, err := s.try(ctx, c, far, false)
		if err != nil || ok {
			return slot, ok, err
		}
		*misses++
	}
	live, missing, err := s.census(ctx)
	if err != nil {
		return Slot{}, false, err
	}
	if missing >= 0 {
		slot, ok, err := s.try(ctx, row{workerID: missing, pool: s.pool}, far, false)
		if !ok && err == nil {
			*misses++
		}
		return slot, ok, err
	}
	if *far != nil {
		// Every free slot's floor is ahead of the holder's clock: take the
		// least far one, and the caller waits for its clock.
		w, err := s.read(ctx, (*far).workerID, nil)
		if err != nil {
			return Slot{}, false, err
		}
		*far = nil
		slot, ok, err := s.try(ctx, w, far, true)
		if ok || err != nil {
			return slot, ok, err
		}
		if !w.live() && w.exists {
			return Slot{}, false, fmt.Errorf("every free worker id's floor is too far ahead: %w", s.floorAhead(w))
		}
		*misses++
		return Slot{}, false, nil
	}
	if len(cands) == 0 && missing < 0 && s.widensTo() {
		// No free slot of the range but those whose IDs a live slot of the
		// old layout issues (candidates leaves them out).
		lo, hi := s.bounds()
		return Slot{}, false, fmt.Errorf("%w: while the pool widens, every free worker id of %d..%d shares its IDs "+
			"with a live slot of the old layout (%d live)", ErrAllHeld, lo, hi, live)
	}
	if lo, hi := s.bounds(); len(cands) == 0 && live >= hi-lo+1 {
		if lo != 0 || hi != s.r.Workers-1 {
			return Slot{}, false, fmt.Errorf("%w: %d of %d live in the worker range %d..%d", ErrAllHeld, live, hi-lo+1, lo, hi)
		}
		return Slot{}, false, fmt.Errorf("%w: %d of %d live", ErrAllHeld, live, s.r.Workers)
	}
	// Slots changed hands between the queries: look again.
	return Slot{}, false, nil
}

// takeExplicit takes the request's worker id, and no other: a free slot, a
// slot with no row, or, with TakeOver, the live slot of the same pod.
func (s *session) takeExplicit(ctx context.Context, w row, clock Clock) (Slot, error) {
	changed := 0 // misses other than conflicts: the deadline bounds those (settle)
	for tries := 0; ; tries++ {
		if err := ctx.Err(); err != nil {
			return Slot{}, err
		}
		if tries > 0 {
			var err error
			if w, err = s.read(ctx, s.r.WorkerID, nil); err != nil {
				return Slot{}, err
			}
		}
		conflicts := s.conflicts
		var (
			slot Slot
			ok   bool
			err  error
		)
		if !w.exists || !s.conforms(w.pool) {
			slot, ok, err = s.lockedTake(ctx, w.workerID, func(w row) (Slot, bool, error) { return s.tryExplicit(ctx, w) })
		} else {
			slot, ok, err = s.tryExplicit(ctx, w)
		}
		if err != nil {
			return Slot{}, err
		}
		if ok {
			slot.Clock = clock
			return slot, nil
		}
		if s.conflicts == conflicts {
			changed++
		}
		if changed > 100 {
			return Slot{}, errors.New("the slot kept changing under the take")
		}
	}
}

// tryExplicit takes the explicit slot w, which has a row: a free one, or,
// with TakeOver, the live slot of the same pod. A live slot of another
// holder fails with ErrHeld, a floor the deadline cannot wait for with
// ErrFloorAhead.
func (s *session) tryExplicit(ctx context.Context, w row) (Slot, bool, error) {
	if w.live() && (s.r.TakeOver == "" || w.service != s.r.Service || !strings.HasPrefix(w.instance, s.r.TakeOver)) {
		return Slot{}, false, fmt.Errorf("%w: worker id %d: %s", ErrHeld, w.workerID, s.holder(ctx, w.workerID))
	}
	if w.shared != "" {
		return Slot{}, false, fmt.Errorf("%w: %s", ErrHeld, w.shared)
	}
	if _, _, capOK := s.promiseFor(w, w.floor()); !canWait(ctx, s.r.ahead(w.floor())) || !capOK {
		return Slot{}, false, s.floorAhead(w)
	}
	return s.tryClaim(ctx, w, w.live())
}

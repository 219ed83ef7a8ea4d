package entflake

import (
	"errors"
	"sync/atomic"
	"time"
)

// Stats is a snapshot of a generator's statistics, as sql.DB.Stats is of a
// pool: counters since the generator was made, and its worker id now. Every
// counter starts at zero, and zero means the event never happened. The
// fields are read one by one, not as one atomic snapshot.
//
// Reading them costs nothing on the path that issues IDs: each counter is
// bumped only where the generator already leaves that path (a wait, a
// rollback, a borrowed millisecond, an error), or by the lease's background
// work.
type Stats struct {
	// Source is the rung of the ladder the worker id in use came from, as
	// Lease().Source.
	Source Source
	// LeaseState is how the worker id is held now, as Lease().State.
	LeaseState LeaseState
	// WorkerID is the worker id the generator issues under now.
	WorkerID int64

	// Waits counts the waits for the clock because a millisecond's sequence
	// numbers (4096 with the default layout), or a burst's lead, were used
	// up: one per NextID call that had to wait (a NextIDs call may wait
	// several times). A steady rise means the service asks for IDs at the
	// ceiling.
	Waits int64
	// WaitDuration is the total time of those waits, on the generator's
	// clock.
	WaitDuration time.Duration

	// Rollbacks counts the times the clock was found behind the last ID
	// (by more than a burst's lead), whatever the rollback policy then did:
	// clamp, wait, bump or refuse. Readings behind the same last ID count
	// once, so a rollback counts once however many IDs it touches.
	Rollbacks int64
	// LargestRollback is the largest of those rollbacks, to the millisecond:
	// how far the clock was found behind the last ID (beyond a burst's lead).
	LargestRollback time.Duration

	// Borrowed counts the milliseconds a burst (WithBurst) opened ahead of
	// the clock. Zero without WithBurst.
	Borrowed int64

	// Errors counts the errors NextID and NextIDs returned, by kind: one per
	// call that failed.
	Errors ErrorCounts

	// Renewals counts the lease renewals the database acknowledged.
	Renewals int64
	// RenewalFailures counts the renewals that failed: timeouts, database
	// errors, and a slot found taken or gone (which also counts as a
	// fencing).
	RenewalFailures int64
	// Fencings counts the times the generator was fenced: its renewals
	// failed until the clock reached the acknowledged promise, or it lost
	// its worker id (taken by another instance, the slot's row or table
	// gone, a fixed worker id found held by another live instance, or the
	// tripwire's duplicate primary key: see Collisions).
	// NextID returns ErrFenced from then until a renewal or a new lease
	// succeeds.
	Fencings int64
	// Switches counts the slots the generator moved onto after Open, in the
	// background: a fallback upgraded to a lease, a fixed worker id
	// registered late, a lost lease replaced by a new one (whose worker
	// id may happen to be the old one), or a move off a worker id that the
	// tripwire found shared (at most one such move per TTL).
	Switches int64

	// Collisions counts the INSERT statements (a CreateBulk is one) of ent
	// code generated with entext that failed on a duplicate primary key
	// whose id this generator issued under its worker id: another instance
	// issues under the same worker id (see Generator.InsertFailed). Each
	// fences the generator. Any value but zero calls for a look at how
	// worker ids are given out: a fallback, a fixed id set twice, an
	// allocator that does not lease.
	Collisions int64
}

// ErrorCounts counts the errors NextID and NextIDs returned, by kind (see
// Stats.Errors).
type ErrorCounts struct {
	// Fenced counts ErrFenced: the lease did not cover the next ID.
	Fenced int64
	// ClockBackwards counts ErrClockBackwards: the rollback policy refused
	// a clock behind the last ID.
	ClockBackwards int64
	// SequenceExhausted counts ErrClockSequenceExhausted: BumpClockSequence
	// used up the clock-sequence field.
	SequenceExhausted int64
	// Closed counts ErrClosed: calls after Close.
	Closed int64
	// Other counts the rest: ErrClockBeforeEpoch and ErrTimeOverflow.
	Other int64
}

// stats are the counters the root package keeps: errors, and the lease's
// events. The engine keeps its own (waits, rollbacks, borrowed
// milliseconds).
type stats struct {
	fenced, backwards, exhausted, closed, other atomic.Int64

	renewals, renewalFailures, fencings, switches atomic.Int64

	collisions atomic.Int64
}

// failed counts an error of NextID or NextIDs by its kind, and returns it.
func (g *Generator) failed(err error) error {
	c := &g.stats
	switch {
	case errors.Is(err, ErrClosed):
		c.closed.Add(1)
	case errors.Is(err, ErrFenced):
		c.fenced.Add(1)
	case errors.Is(err, ErrClockBackwards):
		c.backwards.Add(1)
	case errors.Is(err, ErrClockSequenceExhausted):
		c.exhausted.Add(1)
	default:
		c.other.Add(1)
	}
	return err
}

// Stats returns the generator's statistics. It does not allocate, and may
// be called at any time, from any goroutine, also after Close.
func (g *Generator) Stats() Stats {
	l := g.Lease()
	e := g.g.Stats()
	c := &g.stats
	return Stats{
		Source:          l.Source,
		LeaseState:      l.State,
		WorkerID:        l.WorkerID,
		Waits:           e.Waits,
		WaitDuration:    e.WaitDuration,
		Rollbacks:       e.Rollbacks,
		LargestRollback: e.LargestRollback,
		Borrowed:        e.Borrowed,
		Errors: ErrorCounts{
			Fenced:            c.fenced.Load(),
			ClockBackwards:    c.backwards.Load(),
			SequenceExhausted: c.exhausted.Load(),
			Closed:            c.closed.Load(),
			Other:             c.other.Load(),
		},
		Renewals:        c.renewals.Load(),
		RenewalFailures: c.renewalFailures.Load(),
		Fencings:        c.fencings.Load(),
		Switches:        c.switches.Load(),
		Collisions:      c.collisions.Load(),
	}
}

package entflake

import (
	"fmt"
	"time"

	"github.com/entflake/entflake/internal/snowflake"
)

// Source says which rung of the ladder produced a generator's worker id.
type Source int

// The rungs of the ladder, in the order Open tries them.
const (
	// SourceExplicit: a fixed worker id, from New, WithWorkerID or
	// ENTFLAKE_WORKER_ID. Its uniqueness is the deployment's business.
	SourceExplicit Source = iota + 1
	// SourceLease: a worker id leased from the sys_sequence pool, unique
	// among everything that leased from the same pool (until it wraps).
	SourceLease
	// SourceFallback: a hash of the service, host and process; not
	// coordinated with anyone, so it can collide (see Open).
	SourceFallback
)

// String returns "explicit", "lease" or "fallback".
func (s Source) String() string {
	switch s {
	case SourceExplicit:
		return "explicit"
	case SourceLease:
		return "lease"
	case SourceFallback:
		return "fallback"
	}
	return fmt.Sprintf("Source(%d)", int(s))
}

// Generator issues snowflake IDs for one worker id. It is safe for
// concurrent use; NextID does not allocate and never touches the database.
type Generator struct {
	g        *snowflake.Generator
	source   Source
	service  string
	instance string
}

// New returns a generator with a fixed worker id and no database: for tests,
// tools, and deployments that assign worker ids themselves. Its Source is
// SourceExplicit. The lease options (WithLeaseDB, WithLeaseTimeout,
// WithClockSkewCheck) and WithWorkerID are errors here; use Open for them.
func New(workerID int64, opts ...Option) (*Generator, error) {
	c := newConfig(opts)
	switch {
	case c.workerIDSet:
		return nil, fmt.Errorf("%w: New takes the worker id as its argument, not WithWorkerID", ErrInvalidOption)
	case len(c.leaseOnly) > 0:
		return nil, fmt.Errorf("%w: New never leases; %s belongs to Open", ErrInvalidOption, c.leaseOnly[0])
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("entflake.New: %w", err)
	}
	g, err := c.build(workerID, SourceExplicit, "")
	if err != nil {
		return nil, fmt.Errorf("entflake.New: %w", err)
	}
	return g, nil
}

// NextID returns a new ID: unique for this worker id, and greater than every
// ID this generator returned before (except across a BumpClockSequence
// bump). Take it before the first statement of a transaction; a rolled-back
// transaction only leaves a gap.
//
// When the 4096 IDs of a millisecond (with the default layout) are used up,
// NextID waits for the next millisecond by spinning, since time.Sleep would
// oversleep it. It returns an error only when the rollback policy refuses a
// clock that went back (ErrClockBackwards, ErrClockSequenceExhausted), the
// clock reads before the epoch, or the time field overflows.
func (g *Generator) NextID() (int64, error) { return g.g.NextID() }

// NextIDs fills ids with new IDs, as many NextID calls would, in increasing
// order, for a batch that needs many IDs at once (the rows of a bulk
// insert). It claims a run of a millisecond's sequence numbers with one
// clock read and one atomic operation. On error, the IDs before the failing
// one are filled in.
func (g *Generator) NextIDs(ids []int64) error { return g.g.NextIDs(ids) }

// WorkerID returns the generator's worker id.
func (g *Generator) WorkerID() int64 { return g.g.WorkerID() }

// Source returns the rung of the ladder that produced the worker id.
func (g *Generator) Source() Source { return g.source }

// Service returns the service name given with WithService, if any.
func (g *Generator) Service() string { return g.service }

// Instance returns the tag recorded in sys_sequence when the worker id was
// leased (service@host@pid@start-millis), or "" for other sources.
func (g *Generator) Instance() string { return g.instance }

// Layout returns the generator's layout.
func (g *Generator) Layout() Layout {
	l := g.g.Layout()
	return Layout{ClockSeqBits: l.ClockSeqBits, WorkerBits: l.WorkerBits, SequenceBits: l.SequenceBits}
}

// Epoch returns the time the generator's IDs count from.
func (g *Generator) Epoch() time.Time { return time.UnixMilli(g.g.EpochMilli()).UTC() }

// Decode takes apart an ID issued by a generator with this one's layout and
// epoch.
func (g *Generator) Decode(id int64) (Parts, error) {
	return decode(id, g.Layout(), g.g.EpochMilli())
}

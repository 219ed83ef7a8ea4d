package entflake

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/entflake/entflake/internal/redact"
	"github.com/entflake/entflake/internal/snowflake"
)

// Source says which rung of the ladder produced a generator's worker id.
type Source int

// The rungs of the ladder, in the order Open tries them.
const (
	// SourceExplicit: a fixed worker id, from New, WithWorkerID or
	// ENTFLAKE_WORKER_ID. With a database, Open registers it in its slot.
	SourceExplicit Source = iota + 1
	// SourceLease: a worker id leased from the slot table, held by no other
	// live instance that leases from the same tables.
	SourceLease
	// SourceFallback: a hash of the service, host and process; not
	// coordinated with anyone, so it can collide (see OpenDB).
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

// MarshalText implements encoding.TextMarshaler: a Source is its name in
// JSON (Stats, LeaseStatus) and in logs, as String gives it.
func (s Source) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler, for the names String
// gives; any other text is an error that names it.
func (s *Source) UnmarshalText(text []byte) error {
	for _, v := range []Source{SourceExplicit, SourceLease, SourceFallback} {
		if string(text) == v.String() {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("entflake: unknown source %q (want explicit, lease or fallback)", text)
}

// LeaseState says how a generator holds its worker id now.
type LeaseState int

// The states of a generator's lease.
const (
	// LeaseNone: no lease and none sought: New, or a fixed worker id without
	// a database.
	LeaseNone LeaseState = iota
	// LeaseHeld: a live lease on a slot, renewed on time.
	LeaseHeld
	// LeaseRenewing: renewals are failing; the generator still issues IDs
	// up to the promise the database acknowledged last.
	LeaseRenewing
	// LeaseFenced: renewals have failed until the clock reached the
	// promise; NextID returns ErrFenced until a renewal succeeds.
	LeaseFenced
	// LeaseLost: the slot was taken by another instance, or its row or
	// table is gone, or the tripwire saw another instance issue under the
	// worker id (Err then has ErrWorkerCollision); NextID returns ErrFenced
	// until a new lease is taken (a fixed worker id stays fenced after the
	// tripwire).
	LeaseLost
	// LeaseReleased: Close released the slot; NextID returns ErrClosed.
	LeaseReleased
	// LeaseLifetime: WithLifetimeLease's counter value, held for the life
	// of the process with no slot (see WithLifetimeLease for its risk).
	LeaseLifetime
	// LeaseFallback: a worker id from the fallback hash, while a lease is
	// sought in the background.
	LeaseFallback
	// LeaseUnregistered: a fixed worker id that could not be registered in
	// its slot yet, while registration is retried in the background.
	LeaseUnregistered
)

// String names the state: "none", "held", "renewing", "fenced", "lost",
// "released", "lifetime", "fallback" or "unregistered".
func (s LeaseState) String() string {
	switch s {
	case LeaseNone:
		return "none"
	case LeaseHeld:
		return "held"
	case LeaseRenewing:
		return "renewing"
	case LeaseFenced:
		return "fenced"
	case LeaseLost:
		return "lost"
	case LeaseReleased:
		return "released"
	case LeaseLifetime:
		return "lifetime"
	case LeaseFallback:
		return "fallback"
	case LeaseUnregistered:
		return "unregistered"
	}
	return fmt.Sprintf("LeaseState(%d)", int(s))
}

// MarshalText implements encoding.TextMarshaler: a LeaseState is its name
// in JSON (LeaseStatus) and in logs, as String gives it.
func (s LeaseState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler, for the names String
// gives; any other text is an error that names it.
func (s *LeaseState) UnmarshalText(text []byte) error {
	for v := LeaseNone; v <= LeaseUnregistered; v++ {
		if string(text) == v.String() {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("entflake: unknown lease state %q", text)
}

// LeaseStatus is a snapshot of how a generator holds its worker id.
type LeaseStatus struct {
	// Source is the rung the worker id came from; a fallback upgraded to a
	// lease reports SourceLease.
	Source Source
	// State is how the worker id is held now.
	State LeaseState
	// WorkerID is the worker id the generator issues under.
	WorkerID int64
	// Fence is the slot's fencing number for this holder (0 without a slot).
	Fence int64
	// Promise is the highest ID time the database acknowledged for this
	// holder; the generator issues no ID past it. Zero when no promise
	// binds (no slot, or a slot that needs no renewal).
	Promise time.Time
	// Renewed is when (local time) the last renewal, or the take, was
	// acknowledged.
	Renewed time.Time
	// Err is the last error of a renewal or a background lease, nil once
	// one succeeds.
	Err error
}

// Generator issues snowflake IDs for one worker id. It is safe for
// concurrent use; NextID does not allocate and never touches the database.
// A generator from Open or OpenDB may hold a live lease that it renews in
// the background: Close it when done (before closing the database), so that
// its worker id is free at once for the next instance.
type Generator struct {
	g        *snowflake.Generator
	service  string
	instance string
	k        *keeper // the lease's background work, if any
	tw       tripwire
	nodes    *nodeCache // FindNodes' memory of node types; nil: off

	mu     sync.Mutex
	status LeaseStatus
	closed bool

	// Written on error paths and by the keeper only: off the cache line
	// NextID reads g from.
	_     [64]byte
	stats stats
}

// New returns a generator with a fixed worker id and no database: for tests,
// tools, and deployments that assign worker ids themselves. Its Source is
// SourceExplicit. The lease options (WithLeaseDB, WithLeaseTimeout,
// WithClockSkewCheck, WithHeartbeat, WithLifetimeLease, WithRequireLease)
// and WithWorkerID are errors here; use Open for them.
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
// NextID waits for the next millisecond. One waiting goroutine spins (it
// yields the processor on every turn), since time.Sleep would oversleep the
// millisecond; any others park until it sees the clock turn, so that many
// goroutines at the ceiling cost about one core, not one each. It returns
// an error, and never an ID, when:
//
//   - the rollback policy refuses a clock that went back (ErrClockBackwards,
//     ErrClockSequenceExhausted);
//   - the clock reads before the epoch (ErrClockBeforeEpoch) or the time
//     field overflows (ErrTimeOverflow);
//   - the generator's live lease does not cover the next ID (ErrFenced):
//     its renewals have failed until its clock reached the promise, or its
//     worker id was taken by another instance. It issues again once a
//     renewal or a new lease succeeds;
//   - the generator was closed (ErrClosed).
//
// Check the error: id, _ := gen.NextID() is a bug, since the 0 it yields on
// error is then used as a primary key.
func (g *Generator) NextID() (int64, error) {
	id, err := g.g.NextID()
	if err != nil {
		return 0, g.failed(err)
	}
	return id, nil
}

// NextIDs fills ids with new IDs, as many NextID calls would, in increasing
// order, for a batch that needs many IDs at once (the rows of a bulk
// insert). It claims a run of a millisecond's sequence numbers with one
// clock read and one atomic operation. It returns NextID's errors; on
// error, the IDs before the failing one are filled in.
func (g *Generator) NextIDs(ids []int64) error {
	if err := g.g.NextIDs(ids); err != nil {
		return g.failed(err)
	}
	return nil
}

// WorkerID returns the worker id the generator issues under now: a
// fallback upgraded to a lease, or a lost lease replaced, changes it.
func (g *Generator) WorkerID() int64 { return g.g.WorkerID() }

// Source returns the rung of the ladder that produced the worker id in use.
func (g *Generator) Source() Source {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.status.Source
}

// Lease returns how the generator holds its worker id now.
func (g *Generator) Lease() LeaseStatus {
	g.mu.Lock()
	s := g.status
	g.mu.Unlock()
	s.WorkerID = g.g.WorkerID()
	if s.State == LeaseRenewing && g.g.Clock().Now().UnixMilli()-g.g.EpochMilli() > g.g.Limit() {
		s.State = LeaseFenced // the clock has passed the promise
	}
	return s
}

// update changes the status under the lock. The error it records is
// redacted (package redact): Lease and Check show it.
func (g *Generator) update(f func(s *LeaseStatus)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f(&g.status)
	g.status.Err = redact.Error(g.status.Err)
}

// fence makes NextID fail with ErrFenced, saying reason (redacted), until
// the engine is switched to a worker id again.
func (g *Generator) fence(reason error) {
	g.g.Stop(redact.Error(fmt.Errorf("entflake: NextID: %w: %w", ErrFenced, reason)))
}

// Service returns the service name given with WithService, if any.
func (g *Generator) Service() string { return g.service }

// Instance returns the tag recorded with the worker id's slot
// (service@host@pid@start-millis@random, unique to the generator), or "" when the generator has none.
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

// Close stops the generator and frees its worker id: first it stops issuing
// (no NextID succeeds after Close begins, and the last ID issued is known
// exactly), then it stops the background renewals, and then it releases
// the slot, leaving the last issued millisecond as its promise, so that the
// next holder of the worker id starts above it at once. Later calls of
// NextID return ErrClosed, and so does a second Close.
//
// Close uses the database the generator leased from: call it before
// closing that database (with ent, before client.Close(); deferred calls
// run in reverse, so defer client.Close() first and gen.Close() after it).
// An error means the release did not reach the database: the slot is then
// free once its TTL passes, and no ID above the promise was issued either
// way.
func (g *Generator) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return fmt.Errorf("entflake: Close: %w", ErrClosed)
	}
	g.closed = true
	g.mu.Unlock()
	// Close, not Stop: a background lease that took a slot just now cannot
	// switch the generator back on (its Switch fails, and it gives the slot
	// back).
	g.g.Close(fmt.Errorf("entflake: NextID: %w", ErrClosed))
	var err error
	if g.k != nil {
		err = g.k.close()
	}
	g.update(func(s *LeaseStatus) { s.State = LeaseReleased })
	return err
}

// errIs reports whether err is any of targets.
func errIs(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

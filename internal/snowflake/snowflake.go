// Package snowflake is the ID engine behind entflake: a lock-free generator
// of 64-bit snowflake IDs with a configurable split of the low 22 bits, a
// choice of clock-rollback policies, and the hooks a worker lease needs.
//
// An ID is laid out, from the most significant bit down, as
//
//	| 1 bit 0 | 41 bits ms since epoch | C bits clock seq | W bits worker | S bits sequence |
//
// with C + W + S = 22. The default split is C=0, W=10, S=12.
//
// The generator keeps all of its mutable state in one 64-bit word: the last
// issued ID, worker bits included, with the sign bit set once the generator
// is stopped. Issuing an ID is one clock read, one load and one
// compare-and-swap. Because the state only ever grows (except when the
// clock-sequence policy deliberately moves the time field back), IDs are
// strictly increasing in the order the swaps succeed. A switch of worker id
// swaps the whole word, so no ID can pair the new worker id with a time field
// taken under the old one.
//
// The lease's promise is the limit: the highest time field the generator may
// issue in. It is read only when an ID opens a new millisecond, so it costs
// nothing on the path that stays within one.
//
// The file holds the generator; layout.go the bit layout, clock.go the
// clocks, policy.go what happens when the clock goes back.
package snowflake

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Errors returned by the generator. They are re-exported by package entflake.
var (
	// ErrInvalidLayout: the bit widths do not add up to 22 or a field is empty.
	ErrInvalidLayout = errors.New("invalid ID layout")
	// ErrInvalidWorkerID: the worker id does not fit the layout's worker field.
	ErrInvalidWorkerID = errors.New("invalid worker id")
	// ErrInvalidEpoch: the epoch is before 1970, in the future, or too old for 41 bits.
	ErrInvalidEpoch = errors.New("invalid epoch")
	// ErrInvalidPolicy: the rollback policy's limit is unusable or the layout cannot support it.
	ErrInvalidPolicy = errors.New("invalid rollback policy")
	// ErrClockBackwards: the clock reads earlier than the last issued ID and the
	// rollback policy refuses to issue (reject, wait that did not catch up, or the fuse).
	ErrClockBackwards = errors.New("clock moved backwards")
	// ErrClockSequenceExhausted: the clock-sequence policy has used every value of
	// its field; issuing more could repeat an earlier ID.
	ErrClockSequenceExhausted = errors.New("clock sequence exhausted")
	// ErrClockBeforeEpoch: the clock reads a time before the epoch.
	ErrClockBeforeEpoch = errors.New("clock reads a time before the epoch")
	// ErrTimeOverflow: the time since the epoch no longer fits 41 bits.
	ErrTimeOverflow = errors.New("time field overflow: epoch more than 2^41 ms ago")
	// ErrFenced: the next ID would open a millisecond past the limit (the
	// promise its worker lease holds).
	ErrFenced = errors.New("worker lease does not cover the next ID")
	// ErrClosed: the generator was closed; nothing restarts it.
	ErrClosed = errors.New("generator closed")
	// ErrInvalidStartSpan: the span of a new millisecond's random start is
	// not a power of two from 2 to half the sequence field's values.
	ErrInvalidStartSpan = errors.New("invalid sequence start span")
)

// LeadLimit is the largest lead a burst may take.
const LeadLimit = time.Hour

// Config is everything a generator needs. It is validated by New.
type Config struct {
	Layout     Layout
	EpochMilli int64 // Unix milliseconds of the epoch
	WorkerID   int64
	Clock      Clock // nil means a new MonotonicClock
	Policy     Policy
	// MaxLead lets a burst run ahead of the clock: when a millisecond's
	// sequence is used up, the generator moves on to the next millisecond
	// instead of waiting for it, as long as that keeps it at most MaxLead
	// ahead of the clock (Seata's improved snowflake). Zero, the default,
	// never runs ahead. Whole milliseconds, at most LeadLimit.
	MaxLead time.Duration
	// Floor is the lowest time field (ms since the epoch) the first ID may
	// have: the worker id's previous holder issued below it. Zero: none.
	Floor int64
	// Limit is the highest time field an ID may have (see SetLimit). Zero:
	// MaxTime, no limit.
	Limit int64
	// StartSpan, when not zero, starts each new millisecond's sequence at a
	// pseudo-random offset in [0, StartSpan) instead of 0, so that IDs taken
	// at low rates spread over id % n shards. A power of two from 2 to half
	// the sequence field's values. It costs capacity: a millisecond that
	// starts at offset o holds 2^S - o IDs.
	StartSpan int64
}

// cacheLine keeps the hot state word away from the read-only configuration,
// so a swap on one core does not evict the configuration from the others.
const cacheLine = 64

// stopBit marks a stopped state word. IDs are positive, so an ID never has it.
const stopBit = 1 << 63

// Generator issues IDs. It is safe for concurrent use.
type Generator struct {
	state atomic.Uint64 // last issued ID, worker bits included; stopBit once stopped
	_     [cacheLine - 8]byte

	limit      atomic.Int64 // highest time field allowed; read once per millisecond
	seqBits    uint
	seqMask    uint64
	csShift    uint
	csMask     uint64
	workerMask uint64
	keepMask   uint64 // clock-sequence and worker bits: what a new millisecond keeps
	startMask  uint64 // StartSpan - 1: the bits a new millisecond's offset may have; 0 when off
	startSeed  uint64 // drawn once at New; offsets are a hash of it and the millisecond
	workers    int64

	epochNano  int64
	limitMilli int64 // the rollback policy's limit, in ms
	leadMilli  int64

	kind    clockKind
	mono    *MonotonicClock
	clock   Clock
	policy  Policy
	layout  Layout
	epochMs int64

	mu      sync.Mutex // serialises Stop, Close, Switch and SetLimit
	closed  bool       // Close was called: no Switch restarts the generator
	stopErr atomic.Pointer[error]
	floor   atomic.Int64 // the lowest time field the worker id allows; read on rollbacks only
	high    atomic.Int64 // the highest time field issued before a clock-sequence bump moved back
	since   atomic.Int64 // the lowest time field an ID under the current worker id can have
	barred  int64        // a worker id Switch refuses (Bar), or -1; under mu
	barErr  error        // why it is barred

	// What follows is written on slow paths only (waits, rollbacks, a
	// burst's borrowed millisecond): keep it off the cache lines that the
	// per-ID path reads.
	_     [cacheLine]byte
	stats counters
	room  pauseRoom // the goroutines waiting for the clock
}

// counters are the generator's statistics. Every one is bumped on a slow
// path only: the path that issues an ID within a millisecond, or opens a
// new one from the clock, touches none of them.
type counters struct {
	waits      atomic.Int64
	waitNanos  atomic.Int64
	rollbacks  atomic.Int64
	largest    atomic.Int64  // ms
	rollbackAt atomic.Uint64 // the time and clock-sequence bits of the last ID of the rollback counted last
	borrowed   atomic.Int64
}

// Stats is a snapshot of a generator's statistics.
type Stats struct {
	Waits           int64
	WaitDuration    time.Duration
	Rollbacks       int64
	LargestRollback time.Duration
	Borrowed        int64
}

// Stats returns the generator's statistics. The fields are read one by one,
// not as one atomic snapshot.
func (g *Generator) Stats() Stats {
	c := &g.stats
	return Stats{
		Waits:           c.waits.Load(),
		WaitDuration:    time.Duration(c.waitNanos.Load()),
		Rollbacks:       c.rollbacks.Load(),
		LargestRollback: time.Duration(c.largest.Load()) * time.Millisecond,
		Borrowed:        c.borrowed.Load(),
	}
}

// countRollback records a clock found behind the last ID old by back ms.
// The readings behind the same last ID (same time field and clock
// sequence: the clamp's frozen millisecond, the wait policy's, the reject
// policy's repeated refusals) count as one rollback.
func (g *Generator) countRollback(old uint64, back int64) {
	c := &g.stats
	key := old>>g.csShift | 1<<63 // never 0, the zero value
	if prev := c.rollbackAt.Load(); prev != key && c.rollbackAt.CompareAndSwap(prev, key) {
		c.rollbacks.Add(1)
	}
	for l := c.largest.Load(); back > l && !c.largest.CompareAndSwap(l, back); l = c.largest.Load() {
	}
}

// New validates cfg and returns a generator.
func New(cfg Config) (*Generator, error) {
	l := cfg.Layout
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if cfg.WorkerID < 0 || cfg.WorkerID >= l.Workers() {
		return nil, fmt.Errorf("%w: %d does not fit %d worker bits (0..%d)",
			ErrInvalidWorkerID, cfg.WorkerID, l.WorkerBits, l.Workers()-1)
	}
	if err := ValidateEpoch(cfg.EpochMilli, time.Now()); err != nil {
		return nil, err
	}
	if err := validatePolicy(cfg.Policy, l); err != nil {
		return nil, err
	}
	if cfg.MaxLead < 0 || cfg.MaxLead > LeadLimit || (cfg.MaxLead > 0 && cfg.MaxLead < time.Millisecond) {
		return nil, fmt.Errorf("%w: burst lead %v is not 0 or 1ms..%v", ErrInvalidPolicy, cfg.MaxLead, LeadLimit)
	}
	if cfg.Floor < 0 || cfg.Floor > MaxTime || cfg.Limit < 0 || cfg.Limit > MaxTime {
		return nil, fmt.Errorf("%w: floor %d or limit %d outside 0..2^41-1 ms", ErrInvalidPolicy, cfg.Floor, cfg.Limit)
	}
	if err := ValidateStartSpan(cfg.StartSpan, l); err != nil {
		return nil, err
	}
	g := &Generator{
		seqBits:    uint(l.SequenceBits),
		seqMask:    1<<l.SequenceBits - 1,
		csShift:    uint(l.WorkerBits + l.SequenceBits),
		csMask:     1<<l.ClockSeqBits - 1,
		workers:    l.Workers(),
		epochNano:  cfg.EpochMilli * int64(time.Millisecond),
		limitMilli: cfg.Policy.Limit.Milliseconds(),
		leadMilli:  cfg.MaxLead.Milliseconds(),
		clock:      cfg.Clock,
		policy:     cfg.Policy,
		layout:     l,
		epochMs:    cfg.EpochMilli,
	}
	g.room.woken.L = &g.room.mu
	if cfg.StartSpan > 0 {
		g.startMask = uint64(cfg.StartSpan - 1)
		g.startSeed = rand.Uint64()
	}
	g.workerMask = uint64(g.workers-1) << g.seqBits
	g.keepMask = g.csMask<<g.csShift | g.workerMask
	limit := cfg.Limit
	if limit == 0 {
		limit = MaxTime
	}
	g.limit.Store(limit)
	g.floor.Store(cfg.Floor)
	g.barred = -1
	g.state.Store(g.above(uint64(cfg.WorkerID)<<g.seqBits, cfg.WorkerID, cfg.Floor))
	switch c := cfg.Clock.(type) {
	case nil:
		g.mono = NewMonotonicClock()
		g.clock = g.mono
	case *MonotonicClock:
		g.mono = c
	case WallClock:
		g.kind = kindWall
	default:
		g.kind = kindCustom
	}
	// Fail now rather than at the first NextID when the clock is unusable.
	now, err := g.millis()
	if err != nil {
		return nil, err
	}
	g.setSince(g.state.Load(), now)
	return g, nil
}

// setSince records the lowest time field the IDs after state can have
// under its worker id: past state's millisecond, and not before the clock
// reads now. (A clock that goes back before the first ID is issued can
// take the first IDs below it; Since is for the tripwire, which then misses
// a duplicate of those, and never blames the worker id for one it did not
// issue.)
func (g *Generator) setSince(state uint64, now int64) {
	g.since.Store(max(now, int64(state&^stopBit>>TimeShift)+1))
}

// Since returns the lowest time field (ms since the epoch) that an ID under
// the current worker id can have: IDs of that worker id below it were
// issued by someone else (a previous holder, another instance).
func (g *Generator) Since() int64 { return g.since.Load() }

// above is the state word for worker workerID that makes the next ID open a
// millisecond past both state's last one and floor-1: the state with that
// millisecond's sequence used up. With floor 0 and a state that issued
// nothing yet, the state stays as it is.
func (g *Generator) above(state uint64, workerID, floor int64) uint64 {
	state &^= stopBit
	last := int64(state >> TimeShift)
	cs := state & (g.csMask << g.csShift)
	w := uint64(workerID) << g.seqBits
	if floor <= 0 && state&^(cs|g.keepMask) == 0 {
		return cs | w // nothing issued, nothing to stay above
	}
	return uint64(max(last, floor-1))<<TimeShift | cs | w | g.seqMask
}

// nanos is the clock's reading in nanoseconds since the epoch.
func (g *Generator) nanos() int64 {
	switch g.kind {
	case kindMonotonic:
		return g.mono.nanos() - g.epochNano
	case kindWall:
		return time.Now().UnixNano() - g.epochNano
	}
	return g.clock.Now().UnixNano() - g.epochNano
}

// millis is the clock's reading in whole milliseconds since the epoch.
func (g *Generator) millis() (int64, error) {
	n := g.nanos()
	if n < 0 {
		return 0, fmt.Errorf("%w: clock reads %s, epoch is %s", ErrClockBeforeEpoch,
			time.Unix(0, n+g.epochNano).UTC().Format(time.RFC3339Nano),
			time.UnixMilli(g.epochMs).UTC().Format(time.RFC3339Nano))
	}
	ms := n / msNanos
	if ms > MaxTime {
		return 0, ErrTimeOverflow
	}
	return ms, nil
}

// outcome is what next decided.
type outcome uint8

const (
	issue    outcome = iota // first is the next state; room states from it share its millisecond
	borrow                  // as issue, in a millisecond a burst opens ahead of the clock
	wait                    // the millisecond, or a burst's lead, is used up: wait for the clock
	behind                  // the clock reads before the last ID, beyond a burst's lead
	overflow                // a burst would take the time field past MaxTime
	fenced                  // the next millisecond is past the limit
	stopped                 // Stop was called
)

// next decides where the IDs after state old go, with the clock at now.
// NextID and NextIDs share it. Only the branches that open a new
// millisecond read the limit.
func (g *Generator) next(old uint64, now int64) (first, room uint64, out outcome) {
	if old&stopBit != 0 {
		return 0, 0, stopped
	}
	last := int64(old >> TimeShift)
	switch ahead := last - now; { // how far the last ID runs ahead of the clock
	case ahead < 0:
		if now > g.limit.Load() {
			return 0, 0, fenced
		}
		if g.startMask != 0 {
			o := g.startAt(now)
			return uint64(now)<<TimeShift | old&g.keepMask | o, g.seqMask + 1 - o, issue
		}
		return uint64(now)<<TimeShift | old&g.keepMask, g.seqMask + 1, issue
	case ahead > g.leadMilli:
		return 0, 0, behind
	case old&g.seqMask != g.seqMask:
		// In the clock's millisecond, or ahead of it within the lead.
		return old + 1, g.seqMask - old&g.seqMask, issue
	case last >= g.limit.Load():
		// The millisecond is used up and the next one is past the limit:
		// waiting for the clock cannot help.
		return 0, 0, fenced
	case ahead == g.leadMilli:
		return 0, 0, wait
	case last == MaxTime:
		return 0, 0, overflow
	}
	// A burst: the millisecond is used up, and the next one is still within
	// the lead of the clock. Only this worker issues in it, so borrowing it
	// keeps IDs unique.
	o := g.startAt(last + 1) // 0 when off
	return uint64(last+1)<<TimeShift | old&g.keepMask | o, g.seqMask + 1 - o, borrow
}

// startAt is the sequence number millisecond ms starts at: 0, or with
// StartSpan a hash of the millisecond and the generator's seed (SplitMix64's
// finaliser), below StartSpan. A pure function of the millisecond, so that
// goroutines racing to open it agree, and it needs no shared state.
func (g *Generator) startAt(ms int64) uint64 {
	if g.startMask == 0 {
		return 0
	}
	z := g.startSeed + uint64(ms)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return (z ^ z>>31) & g.startMask
}

// ValidateStartSpan checks a StartSpan for layout l: 0 (off), or a power of
// two from 2 to half the sequence field's values.
func ValidateStartSpan(span int64, l Layout) error {
	if span == 0 {
		return nil
	}
	half := int64(1) << (l.SequenceBits - 1)
	if span < 2 || span > half || span&(span-1) != 0 {
		return fmt.Errorf("%w: sequence start span %d is not a power of two from 2 to %d (half of the %d-bit sequence field)",
			ErrInvalidStartSpan, span, half, l.SequenceBits)
	}
	return nil
}

// NextID returns a new ID, greater than every ID this generator returned
// before (except across a clock-sequence bump). It errors when the
// rollback policy refuses, the clock reads before the epoch, the time
// field overflows, the next millisecond is past the limit (ErrFenced), or
// the generator is stopped.
func (g *Generator) NextID() (int64, error) {
	for {
		// Load the state before reading the clock: a state written by another
		// goroutine then holds a clock reading taken before ours, so on a clock
		// that does not go back, now >= last and contention never looks like a
		// rollback.
		old := g.state.Load()
		now, err := g.millis()
		if err != nil {
			return 0, err
		}
		next, _, out := g.next(old, now)
		switch out {
		case stopped:
			return 0, *g.stopErr.Load()
		case fenced:
			return 0, g.fencedError(old, now)
		case overflow:
			return 0, ErrTimeOverflow
		case wait:
			if err := g.waitPast(int64(old>>TimeShift) - g.leadMilli); err != nil {
				return 0, err
			}
			continue
		case behind:
			var retry bool
			next, retry, err = g.rollback(old, now, int64(old>>TimeShift))
			if err != nil {
				return 0, err
			}
			if retry {
				continue
			}
		case borrow:
			// Counted here, not on the path below: that one opens the
			// clock's millisecond, and stays free of counters.
			if g.state.CompareAndSwap(old, next) {
				g.stats.borrowed.Add(1)
				return int64(next), nil
			}
			continue
		}
		if g.state.CompareAndSwap(old, next) {
			return int64(next), nil
		}
	}
}

// Ready reports, without issuing, what NextID would fail with now: the
// stop's error, ErrFenced past the limit, ErrClockBeforeEpoch,
// ErrTimeOverflow; nil when it would issue. A wait for the clock, or a
// clock behind the last ID that the rollback policy may absorb, is no
// error here: NextID decides those as it issues.
func (g *Generator) Ready() error {
	old := g.state.Load()
	now, err := g.millis()
	if err != nil {
		return err
	}
	switch _, _, out := g.next(old, now); out {
	case stopped:
		return *g.stopErr.Load()
	case fenced:
		return g.fencedError(old, now)
	case overflow:
		return ErrTimeOverflow
	}
	return nil
}

// NextIDs fills ids with new IDs, as many calls of NextID would, in
// increasing order. It claims a run of a millisecond's sequence numbers with
// one clock read and one compare-and-swap, so a long slice costs little more
// than writing it. A wait for the clock, a clock behind the last ID, and
// every error are left to NextID, one ID at a time. On error, the IDs before
// the failing one are filled in.
func (g *Generator) NextIDs(ids []int64) error {
	for len(ids) > 0 {
		old := g.state.Load()
		now, err := g.millis()
		if err != nil {
			return err
		}
		first, room, out := g.next(old, now)
		if out != issue && out != borrow {
			id, err := g.NextID()
			if err != nil {
				return err
			}
			ids[0], ids = id, ids[1:]
			continue
		}
		n := min(uint64(len(ids)), room)
		if !g.state.CompareAndSwap(old, first+n-1) {
			continue
		}
		if out == borrow {
			g.stats.borrowed.Add(1)
		}
		for i := range n {
			ids[i] = int64(first + i)
		}
		ids = ids[n:]
	}
	return nil
}

func (g *Generator) fencedError(old uint64, now int64) error {
	next := max(now, int64(old>>TimeShift)+1)
	return fmt.Errorf("%w: the next ID's time %s is past %s, the promise the lease holds",
		ErrFenced, g.format(next), g.format(g.limit.Load()))
}

func (g *Generator) format(field int64) string {
	return time.UnixMilli(g.epochMs + field).UTC().Format("2006-01-02T15:04:05.000Z")
}

// SetLimit sets the highest time field (ms since the epoch) an ID may have.
// A lease raises it when the database has acknowledged a higher promise; an
// ID that would open a later millisecond fails with ErrFenced until then.
func (g *Generator) SetLimit(limit int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.limit.Store(min(max(limit, 0), MaxTime))
}

// Limit returns the highest time field an ID may have (MaxTime: none).
func (g *Generator) Limit() int64 { return g.limit.Load() }

// Stop makes every later NextID and NextIDs return err, until Switch, and
// returns the last ID issued before the stop took effect (the state word as
// it was). No ID is issued after Stop returns. After Close it changes
// nothing but returns the same.
func (g *Generator) Stop(err error) (last int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.stopErr.Store(&err)
	}
	return g.stop()
}

// Close stops the generator for good: NextID returns err, Switch fails
// with ErrClosed. It returns the last ID issued, as Stop does; see Highest
// for the highest millisecond issued.
func (g *Generator) Close(err error) (last int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	g.stopErr.Store(&err)
	return g.stop()
}

func (g *Generator) stop() int64 {
	for {
		old := g.state.Load()
		if g.state.CompareAndSwap(old, old|stopBit) {
			return int64(old &^ stopBit)
		}
	}
}

// Highest returns the highest time field (ms since the epoch) any ID of
// this generator has had, or the one below its floor: the state's, or the
// one a clock-sequence bump moved back from. It is what a lease releases.
func (g *Generator) Highest() int64 { return max(g.Last(), g.high.Load()) }

// Switch moves the generator to workerID: the next ID opens a millisecond
// after both the last issued one and floor-1, and none passes limit. It
// also ends a Stop. IDs stay strictly increasing across it (the time field
// moves up), and no goroutine can pair the new worker id with an old time
// field: the worker bits change in the same swap as the time field.
func (g *Generator) Switch(workerID, floor, limit int64) error {
	if workerID < 0 || workerID >= g.workers {
		return fmt.Errorf("%w: %d does not fit %d worker bits (0..%d)",
			ErrInvalidWorkerID, workerID, g.layout.WorkerBits, g.workers-1)
	}
	if floor < 0 || floor > MaxTime || limit < 0 || limit > MaxTime {
		return fmt.Errorf("%w: floor %d or limit %d outside 0..2^41-1 ms", ErrInvalidPolicy, floor, limit)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return ErrClosed
	}
	if workerID == g.barred {
		return fmt.Errorf("worker id %d is barred: %w", workerID, g.barErr)
	}
	now, _ := g.millis() // 0 on error: Since then rests on the state alone
	// While the word changes hands, the limit is the lower of the old and the
	// new one: a goroutine that loaded the old word (and reads the limit
	// after it) stays within the old worker's promise, and one that loads
	// the new word stays within the new one's.
	if limit < g.limit.Load() {
		g.limit.Store(limit)
	}
	for {
		old := g.state.Load()
		next := g.above(old, workerID, floor)
		if g.state.CompareAndSwap(old, next) {
			g.setSince(next, now)
			break
		}
	}
	g.limit.Store(limit)
	g.floor.Store(floor)
	return nil
}

// Bar stops the generator with err, as Stop does, if it issues under
// workerID now, and bars that worker id: Switch refuses it from then on, so
// that no ID under it is issued again, whatever a background lease takes
// meanwhile. One worker id is barred at a time, the last one given. The
// check of the worker id and the stop are one step with respect to Switch.
// current reports whether workerID was the generator's worker id (nothing
// is done otherwise); stopped, whether this call stopped a generator that
// was issuing. After Close it stops nothing and bars nothing.
func (g *Generator) Bar(workerID int64, err error) (current, stopped bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.WorkerID() != workerID {
		return false, false
	}
	if g.closed {
		return true, false
	}
	g.barred, g.barErr = workerID, err
	g.stopErr.Store(&err)
	for {
		old := g.state.Load()
		if g.state.CompareAndSwap(old, old|stopBit) {
			return true, old&stopBit == 0
		}
	}
}

// Last returns the time field (ms since the epoch) of the state: the last
// issued millisecond, or the one below a floor.
func (g *Generator) Last() int64 { return int64(g.state.Load() &^ stopBit >> TimeShift) }

// Layout returns the generator's layout.
func (g *Generator) Layout() Layout { return g.layout }

// WorkerID returns the generator's worker id, which Switch may change.
func (g *Generator) WorkerID() int64 {
	return int64(g.state.Load() >> g.seqBits & uint64(g.workers-1))
}

// EpochMilli returns the epoch in Unix milliseconds.
func (g *Generator) EpochMilli() int64 { return g.epochMs }

// Clock returns the clock the generator reads.
func (g *Generator) Clock() Clock { return g.clock }

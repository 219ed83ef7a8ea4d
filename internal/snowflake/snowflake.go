// Package snowflake is the ID engine behind entflake: a lock-free generator
// of 64-bit snowflake IDs with a configurable split of the low 22 bits and a
// choice of clock-rollback policies.
//
// An ID is laid out, from the most significant bit down, as
//
//	| 1 bit 0 | 41 bits ms since epoch | C bits clock seq | W bits worker | S bits sequence |
//
// with C + W + S = 22. The default split is C=0, W=10, S=12.
//
// The generator keeps all of its mutable state in one 64-bit word that has
// exactly the shape of an ID with the worker bits zeroed. Issuing an ID is one
// clock read, one load and one compare-and-swap; the ID is that word OR the
// worker bits. Because the state only ever grows (except when the
// clock-sequence policy deliberately moves the time field back), IDs are
// strictly increasing in the order the swaps succeed.
package snowflake

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
)

// Bit budget of an ID.
const (
	// TimeBits is the width of the millisecond field: 2^41 ms is about 69.7 years.
	TimeBits = 41
	// LowBits is the width shared by the clock-sequence, worker and sequence fields.
	LowBits = 22
	// TimeShift is where the millisecond field starts.
	TimeShift = LowBits
	// MaxTime is the largest millisecond offset from the epoch an ID can hold.
	MaxTime = 1<<TimeBits - 1
)

// Errors returned by the generator. They are re-exported by package entflake.
var (
	// ErrInvalidLayout: the bit widths do not add up to 22 or a field is empty.
	ErrInvalidLayout = errors.New("invalid ID layout")
	// ErrInvalidWorkerID: the worker id does not fit the layout's worker field.
	ErrInvalidWorkerID = errors.New("worker id out of range")
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
)

// Layout is the split of the 22 low bits.
type Layout struct {
	ClockSeqBits int
	WorkerBits   int
	SequenceBits int
}

// Validate reports whether the widths are usable: worker and sequence fields
// of at least one bit, no negative width, and a total of exactly 22 bits.
func (l Layout) Validate() error {
	switch {
	case l.ClockSeqBits < 0 || l.WorkerBits < 0 || l.SequenceBits < 0:
		return fmt.Errorf("%w: negative width (clock seq %d, worker %d, sequence %d)",
			ErrInvalidLayout, l.ClockSeqBits, l.WorkerBits, l.SequenceBits)
	case l.WorkerBits < 1:
		return fmt.Errorf("%w: worker field needs at least 1 bit, got %d", ErrInvalidLayout, l.WorkerBits)
	case l.SequenceBits < 1:
		return fmt.Errorf("%w: sequence field needs at least 1 bit, got %d", ErrInvalidLayout, l.SequenceBits)
	case l.ClockSeqBits+l.WorkerBits+l.SequenceBits != LowBits:
		return fmt.Errorf("%w: clock seq %d + worker %d + sequence %d bits = %d, want %d",
			ErrInvalidLayout, l.ClockSeqBits, l.WorkerBits, l.SequenceBits,
			l.ClockSeqBits+l.WorkerBits+l.SequenceBits, LowBits)
	}
	return nil
}

// Workers is the number of distinct worker ids the layout holds (2^WorkerBits).
func (l Layout) Workers() int64 { return 1 << l.WorkerBits }

// Clock is the time source of a generator. Sleep(d) should pause for about
// d of the clock's time: the generator re-reads Now after it, and counts d
// against the bound of the wait it is in, so that even a clock that never
// moves cannot make it wait without end.
type Clock interface {
	Now() time.Time
	Sleep(d time.Duration)
}

// MonotonicClock reads Go's monotonic clock as an offset from a wall-clock
// anchor taken when the clock is made. Inside one process it never goes back.
type MonotonicClock struct {
	anchor     time.Time // carries a monotonic reading
	anchorNano int64     // anchor's wall time in Unix nanoseconds
}

// NewMonotonicClock anchors a monotonic clock at the current wall time.
func NewMonotonicClock() *MonotonicClock {
	now := time.Now()
	return &MonotonicClock{anchor: now, anchorNano: now.UnixNano()}
}

// Now returns the anchor's wall time plus the monotonic time elapsed since.
func (c *MonotonicClock) Now() time.Time { return time.Unix(0, c.nanos()) }

// Sleep waits about d: see sleepReal.
func (c *MonotonicClock) Sleep(d time.Duration) { sleepReal(d) }

func (c *MonotonicClock) nanos() int64 { return c.anchorNano + int64(time.Since(c.anchor)) }

// WallClock reads the system's wall clock, which NTP, an operator or a VM
// migration can step backwards.
type WallClock struct{}

// Now returns time.Now().
func (WallClock) Now() time.Time { return time.Now() }

// Sleep waits about d: see sleepReal.
func (WallClock) Sleep(d time.Duration) { sleepReal(d) }

// spinLimit is the longest wait done by spinning. time.Sleep of a few hundred
// microseconds sleeps about 1.09 ms on Linux (timer slack and scheduling), so
// sleeping out the rest of a millisecond would cost up to a whole extra
// millisecond of IDs; yielding in a loop costs a core for at most this long.
const spinLimit = 2 * time.Millisecond

// sleepReal waits d: a long wait sleeps all but its last millisecond, and
// the rest is spun out, yielding the processor on every turn.
func sleepReal(d time.Duration) {
	start := time.Now()
	if d > spinLimit {
		time.Sleep(d - time.Millisecond)
	}
	for time.Since(start) < d {
		runtime.Gosched()
	}
}

// PolicyKind names a clock-rollback strategy.
type PolicyKind uint8

// The rollback strategies. See Policy.
const (
	// Clamp keeps the time field at the last issued millisecond and spends its
	// remaining sequence numbers; when they run out it waits for the clock to
	// pass that millisecond. Limit is the fuse: a larger rollback is an error.
	Clamp PolicyKind = iota
	// Wait sleeps twice the rollback and errors if the clock is still behind;
	// a rollback larger than Limit is an error at once (Meituan Leaf).
	Wait
	// Reject errors on any rollback until the clock catches up (Twitter).
	Reject
	// ClockSequence bumps the clock-sequence field and carries on at the
	// earlier time, without waiting. IDs after a bump are smaller than before it; when the
	// field's values are used up (after 2^bits - 1 bumps) it errors instead
	// of wrapping.
	ClockSequence
)

// String names the policy kind.
func (k PolicyKind) String() string {
	switch k {
	case Clamp:
		return "clamp"
	case Wait:
		return "wait"
	case Reject:
		return "reject"
	case ClockSequence:
		return "clock-sequence"
	}
	return fmt.Sprintf("PolicyKind(%d)", uint8(k))
}

// Policy is a rollback strategy with its limit (see PolicyKind).
type Policy struct {
	Kind  PolicyKind
	Limit time.Duration
}

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
	// never runs ahead. Whole milliseconds, at most MaxMaxLead.
	MaxLead time.Duration
}

// MaxMaxLead is the largest lead a burst may take.
const MaxMaxLead = time.Hour

type clockKind uint8

const (
	kindMonotonic clockKind = iota
	kindWall
	kindCustom
)

// cacheLine keeps the hot state word away from the read-only configuration,
// so a swap on one core does not evict the configuration from the others.
const cacheLine = 64

// Generator issues IDs. It is safe for concurrent use.
type Generator struct {
	state atomic.Uint64 // last issued ID without its worker bits
	_     [cacheLine - 8]byte

	workerPart uint64 // worker id shifted into place
	seqMask    uint64
	csShift    uint
	csMask     uint64
	epochNano  int64
	limitMilli int64
	leadMilli  int64

	kind     clockKind
	mono     *MonotonicClock
	clock    Clock
	policy   Policy
	layout   Layout
	workerID int64
	epochMs  int64
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
	if cfg.MaxLead < 0 || cfg.MaxLead > MaxMaxLead || (cfg.MaxLead > 0 && cfg.MaxLead < time.Millisecond) {
		return nil, fmt.Errorf("%w: burst lead %v is not 0 or 1ms..%v", ErrInvalidPolicy, cfg.MaxLead, MaxMaxLead)
	}
	g := &Generator{
		workerPart: uint64(cfg.WorkerID) << l.SequenceBits,
		seqMask:    1<<l.SequenceBits - 1,
		csShift:    uint(l.WorkerBits + l.SequenceBits),
		csMask:     1<<l.ClockSeqBits - 1,
		epochNano:  cfg.EpochMilli * int64(time.Millisecond),
		limitMilli: cfg.Policy.Limit.Milliseconds(),
		leadMilli:  cfg.MaxLead.Milliseconds(),
		clock:      cfg.Clock,
		policy:     cfg.Policy,
		layout:     l,
		workerID:   cfg.WorkerID,
		epochMs:    cfg.EpochMilli,
	}
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
	if _, err := g.millis(); err != nil {
		return nil, err
	}
	return g, nil
}

// ValidateEpoch checks that an epoch (Unix milliseconds) is not before 1970,
// not after now, and recent enough that now fits the 41-bit time field.
func ValidateEpoch(epochMilli int64, now time.Time) error {
	switch {
	case epochMilli < 0:
		return fmt.Errorf("%w: %s is before 1970", ErrInvalidEpoch, time.UnixMilli(epochMilli).UTC().Format(time.RFC3339Nano))
	case epochMilli > now.UnixMilli():
		return fmt.Errorf("%w: %s is in the future", ErrInvalidEpoch, time.UnixMilli(epochMilli).UTC().Format(time.RFC3339Nano))
	case now.UnixMilli()-epochMilli > MaxTime:
		return fmt.Errorf("%w: %s is more than 2^41 ms (about 69 years) ago", ErrInvalidEpoch, time.UnixMilli(epochMilli).UTC().Format(time.RFC3339Nano))
	}
	return nil
}

func validatePolicy(p Policy, l Layout) error {
	switch p.Kind {
	case Clamp, Wait:
		if p.Limit < time.Millisecond {
			return fmt.Errorf("%w: %s needs a limit of at least 1ms, got %v", ErrInvalidPolicy, p.Kind, p.Limit)
		}
	case Reject:
	case ClockSequence:
		if l.ClockSeqBits == 0 {
			return fmt.Errorf("%w: clock-sequence policy needs a layout with clock-sequence bits", ErrInvalidPolicy)
		}
	default:
		return fmt.Errorf("%w: unknown kind %d", ErrInvalidPolicy, p.Kind)
	}
	return nil
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

const msNanos = int64(time.Millisecond)

// waitSlack is the sleep a wait for the next millisecond may take beyond
// its policy's allowance before NextID gives up on the clock. A real clock
// needs at most a millisecond; the slack covers clocks that tick coarsely
// (a custom clock truncated to 4 ms, a platform timer) while still ending
// the wait on a clock that does not move at all.
const waitSlack = 100 * time.Millisecond

// waitPast blocks until the clock reads a millisecond after last, sleeping
// through the clock so that an injected clock can drive the wait. The clock
// may step back while it waits: the policy then decides again, so that a
// wait that began as "the rest of this millisecond" can never turn into
// "until the clock catches up with a large step", and the total sleep is
// bounded (waitSlack, plus the clamp's fuse or twice the wait limit).
func (g *Generator) waitPast(last int64) error {
	target := (last + 1) * msNanos
	budget := waitSlack
	switch g.policy.Kind {
	case Clamp:
		budget += g.policy.Limit
	case Wait:
		budget += 2 * g.policy.Limit
	}
	var slept time.Duration
	for {
		n := g.nanos()
		if n >= target {
			return nil
		}
		if n < 0 {
			_, err := g.millis()
			return err
		}
		if behind := last - n/msNanos; behind > 0 {
			if g.policy.Kind == ClockSequence {
				return nil // NextID sees the rollback and bumps
			}
			if err := g.refuse(behind); err != nil {
				return err
			}
		}
		if slept >= budget {
			return fmt.Errorf("%w: waited %v for the clock to pass the last issued millisecond, and it did not",
				ErrClockBackwards, slept)
		}
		d := time.Duration(target - n)
		g.clock.Sleep(d)
		slept += d
	}
}

// refuse returns the policy's error for a clock behind the last issued
// millisecond by behind ms, or nil if the policy tolerates that much.
func (g *Generator) refuse(behind int64) error {
	switch g.policy.Kind {
	case Clamp:
		if behind > g.limitMilli {
			return fmt.Errorf("%w by %dms, beyond the clamp fuse of %v", ErrClockBackwards, behind, g.policy.Limit)
		}
	case Wait:
		if behind > g.limitMilli {
			return fmt.Errorf("%w by %dms, more than the %v the wait policy waits for", ErrClockBackwards, behind, g.policy.Limit)
		}
	case Reject:
		return fmt.Errorf("%w by %dms; the reject policy issues nothing until the clock catches up", ErrClockBackwards, behind)
	}
	return nil
}

// Outcomes of next.
const (
	issue    = iota // first is the next state; room states from it share its millisecond
	wait            // the millisecond, or a burst's lead, is used up: wait for the clock
	behind          // the clock reads before the last ID, beyond a burst's lead
	overflow        // a burst would take the time field past MaxTime
)

// next decides where the IDs after state old go, with the clock at now.
// NextID and NextIDs share it.
func (g *Generator) next(old uint64, now int64) (first, room uint64, outcome int) {
	last := int64(old >> TimeShift)
	switch ahead := last - now; { // how far the last ID runs ahead of the clock
	case ahead < 0:
		return uint64(now)<<TimeShift | old&(g.csMask<<g.csShift), g.seqMask + 1, issue
	case ahead > g.leadMilli:
		return 0, 0, behind
	case old&g.seqMask != g.seqMask:
		// In the clock's millisecond, or ahead of it within the lead.
		return old + 1, g.seqMask - old&g.seqMask, issue
	case ahead == g.leadMilli:
		return 0, 0, wait
	case last == MaxTime:
		return 0, 0, overflow
	}
	// A burst: the millisecond is used up, and the next one is still within
	// the lead of the clock. Only this worker issues in it, so borrowing it
	// keeps IDs unique.
	return uint64(last+1)<<TimeShift | old&(g.csMask<<g.csShift), g.seqMask + 1, issue
}

// NextID returns a new ID, greater than every ID this generator returned
// before (except across a clock-sequence bump). It errors only when the
// rollback policy refuses, the clock reads before the epoch, or the time
// field overflows.
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
		next, _, outcome := g.next(old, now)
		switch outcome {
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
		}
		if g.state.CompareAndSwap(old, next) {
			return int64(next | g.workerPart), nil
		}
	}
}

// NextIDs fills ids with new IDs, as many calls of NextID would, in
// increasing order. It claims a run of a millisecond's sequence numbers with
// one clock read and one compare-and-swap, so a long slice costs little more
// than writing it. A wait for the clock, or a clock behind the last ID, is
// left to NextID and its policy, one ID at a time. On error, the IDs before
// the failing one are filled in.
func (g *Generator) NextIDs(ids []int64) error {
	for len(ids) > 0 {
		old := g.state.Load()
		now, err := g.millis()
		if err != nil {
			return err
		}
		first, room, outcome := g.next(old, now)
		if outcome == overflow {
			return ErrTimeOverflow
		}
		if outcome != issue {
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
		for i := range n {
			ids[i] = int64((first + i) | g.workerPart)
		}
		ids = ids[n:]
	}
	return nil
}

// rollback applies the policy when the clock (now) reads before the last
// issued millisecond, by more than a burst's lead. It returns the next
// state, or retry after a wait. The policy judges the part of the rollback
// beyond the lead.
func (g *Generator) rollback(old uint64, now, last int64) (next uint64, retry bool, err error) {
	ref := last - g.leadMilli // the clock must get past this to issue freely
	back := ref - now
	if g.policy.Kind == ClockSequence {
		cs := old >> g.csShift & g.csMask
		if cs == g.csMask {
			return 0, false, fmt.Errorf("%w: all %d values used by %d rollbacks (clock moved back %dms)",
				ErrClockSequenceExhausted, g.csMask+1, cs, back)
		}
		return uint64(now)<<TimeShift | (cs+1)<<g.csShift, false, nil
	}
	if err := g.refuse(back); err != nil {
		return 0, false, err
	}
	if g.policy.Kind == Wait {
		return 0, true, g.waitCatchUp(ref, back)
	}
	// Clamp: stay in the last millisecond while its sequence lasts.
	if old&g.seqMask == g.seqMask {
		// The frozen millisecond is used up: wait for the clock to pass
		// it. The fuse bounds this wait.
		return 0, true, g.waitPast(ref)
	}
	return old + 1, false, nil
}

// waitCatchUp is the wait policy: sleep until the clock reaches the last
// issued millisecond, for at most twice the rollback (as Meituan Leaf
// does), then give up.
func (g *Generator) waitCatchUp(last, back int64) error {
	limit := 2 * time.Duration(back) * time.Millisecond
	var slept time.Duration
	for {
		n := g.nanos()
		if n >= last*msNanos {
			return nil
		}
		if slept >= limit {
			return fmt.Errorf("%w by %dms and still %dms behind after waiting %v",
				ErrClockBackwards, back, last-n/msNanos, slept)
		}
		d := min(time.Duration(last*msNanos-n), limit-slept)
		g.clock.Sleep(d)
		slept += d
	}
}

// Parts is an ID taken apart.
type Parts struct {
	Millis   int64 // milliseconds since the epoch
	ClockSeq int64
	WorkerID int64
	Sequence int64
}

// Decode takes an ID apart according to a layout. It does not validate l.
func Decode(id int64, l Layout) Parts {
	u := uint64(id)
	return Parts{
		Millis:   int64(u >> TimeShift),
		ClockSeq: int64(u >> (l.WorkerBits + l.SequenceBits) & (1<<l.ClockSeqBits - 1)),
		WorkerID: int64(u >> l.SequenceBits & (1<<l.WorkerBits - 1)),
		Sequence: int64(u & (1<<l.SequenceBits - 1)),
	}
}

// Layout returns the generator's layout.
func (g *Generator) Layout() Layout { return g.layout }

// WorkerID returns the generator's worker id.
func (g *Generator) WorkerID() int64 { return g.workerID }

// EpochMilli returns the epoch in Unix milliseconds.
func (g *Generator) EpochMilli() int64 { return g.epochMs }

// Clock returns the clock the generator reads.
func (g *Generator) Clock() Clock { return g.clock }

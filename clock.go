package entflake

import (
	"fmt"
	"time"

	"github.com/entflake/entflake/internal/snowflake"
)

// Clock is a generator's time source. Tests inject one (WithClock) to drive
// rollbacks, and waits, without real sleeping.
//
// Sleep is how the generator waits: for the next millisecond when one is
// used up, or under the clamp and wait rollback policies. Sleep(d) should
// pause for about d of the clock's time (a test clock simply moves forward
// by d). The generator reads Now again after every Sleep, and counts the
// durations it asked for against the bound of its wait, so even a clock that
// never moves cannot hold NextID longer than that bound. When several
// goroutines wait at once, one of them calls Sleep and the others wait for
// that call to return, then all read Now again: a test clock that moves only
// when slept on still moves for all of them.
type Clock interface {
	Now() time.Time
	Sleep(d time.Duration)
}

// MonotonicClock returns the default clock: the wall time when it is made,
// plus Go's monotonic time elapsed since (time.Since on a time.Now reading).
//
// Inside one process it never goes back, whatever NTP, an operator or a VM
// migration does to the wall clock, so the rollback policy never has to act.
// It is also cheaper to read than the wall clock. The price: after a step of
// the wall clock (or a suspend, which Linux's monotonic clock does not
// count), the IDs' time field differs from the wall clock by the step until
// the process restarts. That harms no uniqueness; it only shifts Parts.Time.
// Across a restart the IDs are safe because the restarted process leases a
// new worker id; with a fixed worker id, a restart right after a backward
// step of the wall clock could repeat IDs of the previous run, under either
// clock.
func MonotonicClock() Clock { return snowflake.NewMonotonicClock() }

// WallClock returns the system's wall clock (time.Now). The IDs' time field
// then always follows the wall clock, and each backward step of it is
// handled by the rollback policy.
func WallClock() Clock { return snowflake.WallClock{} }

// RollbackPolicy decides what NextID does when the clock reads a time
// before the last ID it issued. Make one with ClampRollback,
// WaitRollback, RejectRollback or BumpClockSequence. The zero value is the
// default, ClampRollback(DefaultFuse).
//
// No policy ever issues a duplicate. Only BumpClockSequence gives up strict
// order: the IDs after a bump are smaller than those before it.
type RollbackPolicy struct {
	p   snowflake.Policy
	set bool // made by a constructor: ClampRollback(0) is an error, not the default
}

// DefaultFuse is the largest rollback the default policy borrows across: a
// leap second steps the clock back by exactly one second.
const DefaultFuse = time.Second

// ClampRollback keeps the time field at the last issued millisecond and
// keeps counting its sequence while the clock catches up (the source's
// choice). Only when that millisecond's sequence is used up does NextID wait
// for the clock to pass it. A rollback larger than fuse is an
// ErrClockBackwards at once, so NextID never waits longer than about fuse.
// fuse must be at least a millisecond.
func ClampRollback(fuse time.Duration) RollbackPolicy {
	return RollbackPolicy{snowflake.Policy{Kind: snowflake.Clamp, Limit: fuse}, true}
}

// WaitRollback waits out a rollback of up to limit until the clock catches
// up, for at most twice its size (Meituan Leaf waits twice a rollback of up
// to 5 ms), and returns ErrClockBackwards when the clock is still behind
// after that or when the rollback is larger than limit. limit must be at
// least a millisecond.
func WaitRollback(limit time.Duration) RollbackPolicy {
	return RollbackPolicy{snowflake.Policy{Kind: snowflake.Wait, Limit: limit}, true}
}

// RejectRollback returns ErrClockBackwards for as long as the clock reads
// before the last issued millisecond (Twitter's original behaviour).
func RejectRollback() RollbackPolicy {
	return RollbackPolicy{snowflake.Policy{Kind: snowflake.Reject}, true}
}

// BumpClockSequence moves to the next value of the clock-sequence field on
// each rollback and carries on at the earlier time, so it never waits on a
// rollback. The
// IDs after a bump are smaller than those before it, still unique. When the
// field's values are used up (all 32 with 5 bits: the first, 0, and 31
// bumps), NextID returns ErrClockSequenceExhausted rather than wrapping into
// IDs already issued.
// It needs a layout with ClockSeqBits, such as ClockSequenceLayout.
func BumpClockSequence() RollbackPolicy {
	return RollbackPolicy{snowflake.Policy{Kind: snowflake.ClockSequence}, true}
}

func (p RollbackPolicy) internal() snowflake.Policy {
	if !p.set {
		return snowflake.Policy{Kind: snowflake.Clamp, Limit: DefaultFuse}
	}
	return p.p
}

// String describes the policy, e.g. "clamp (fuse 1s)".
func (p RollbackPolicy) String() string {
	in := p.internal()
	switch in.Kind {
	case snowflake.Clamp:
		return fmt.Sprintf("clamp (fuse %v)", in.Limit)
	case snowflake.Wait:
		return fmt.Sprintf("wait (limit %v)", in.Limit)
	}
	return in.Kind.String()
}

package snowflake

import (
	"fmt"
	"time"
)

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
//
// A wait that slept is counted in the generator's statistics, with the
// clock time it took.
func (g *Generator) waitPast(last int64) error {
	start := g.nanos()
	slept, err := g.waitPastClock(last, start)
	if slept > 0 {
		g.stats.waits.Add(1)
		g.stats.waitNanos.Add(max(g.nanos()-start, 0))
	}
	return err
}

func (g *Generator) waitPastClock(last, n int64) (slept time.Duration, err error) {
	target := (last + 1) * msNanos
	budget := waitSlack
	switch g.policy.Kind {
	case Clamp:
		budget += g.policy.Limit
	case Wait:
		budget += 2 * g.policy.Limit
	}
	for ; ; n = g.nanos() {
		if n >= target {
			return slept, nil
		}
		if n < 0 {
			_, err := g.millis()
			return slept, err
		}
		if behind := last - n/msNanos; behind > 0 {
			if g.policy.Kind == ClockSequence {
				return slept, nil // NextID sees the rollback and bumps
			}
			if err := g.refuse(behind); err != nil {
				return slept, err
			}
		}
		if slept >= budget {
			return slept, fmt.Errorf("%w: waited %v for the clock to pass the last issued millisecond, and it did not",
				ErrClockBackwards, slept)
		}
		d := time.Duration(target - n)
		g.pause(d)
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

// rollback applies the policy when the clock (now) reads before the last
// issued millisecond, by more than a burst's lead. It returns the next
// state, or retry after a wait. The policy judges the part of the rollback
// beyond the lead. No branch moves the time field above the last issued
// one, so none can pass the promise.
func (g *Generator) rollback(old uint64, now, last int64) (next uint64, retry bool, err error) {
	ref := last - g.leadMilli // the clock must get past this to issue freely
	back := ref - now
	g.countRollback(old, back)
	if g.policy.Kind == ClockSequence {
		cs := old >> g.csShift & g.csMask
		if cs == g.csMask {
			return 0, false, fmt.Errorf("%w: all %d values used by %d rollbacks (clock moved back %dms)",
				ErrClockSequenceExhausted, g.csMask+1, cs, back)
		}
		if floor := g.floor.Load(); now < floor {
			// Below the floor, the worker id's previous holder issued: a
			// new clock sequence does not keep those IDs apart.
			return 0, false, fmt.Errorf("%w by %dms, below the worker id's floor %d ms after the epoch; "+
				"the clock sequence cannot go there", ErrClockBackwards, back, floor)
		}
		// The time field moves back: remember how far it had come, which
		// is what a release must leave as the promise.
		for h := g.high.Load(); last > h && !g.high.CompareAndSwap(h, last); h = g.high.Load() {
		}
		return uint64(now)<<TimeShift | (cs+1)<<g.csShift | old&g.workerMask | g.startAt(now), false, nil
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
		g.pause(d)
		slept += d
	}
}

package snowflake

import (
	"sync"
	"time"
)

// pauseRoom lets goroutines that wait for the clock share one sleeper. At
// the ceiling, every goroutine that finds the millisecond's sequence used
// up must wait for the next millisecond, and a precise wait on a real clock
// spins (see sleepReal): were each to spin, n waiting goroutines would burn
// n cores for the IDs one core gets. Instead the first waiter sleeps on the
// clock, and the others park on a condition variable until its Sleep
// returns; then they all read the clock again.
//
// It serves only the paths that already wait (waitPast, waitCatchUp): the
// paths that issue an ID, or open a millisecond, never touch it.
type pauseRoom struct {
	mu       sync.Mutex
	woken    sync.Cond // signalled when a sleeper returns; L is mu
	sleeping bool      // a goroutine is in Clock.Sleep on the room's behalf
	round    uint64    // the number of sleeps that have ended
}

// pause waits about d of the clock's time: it calls the clock's Sleep(d),
// unless another goroutine is in that call already, and then waits until
// that call returns (which may be sooner or later than d: the caller reads
// the clock again either way). A custom clock that moves only when slept
// on therefore still moves, and every waiter sees it move.
func (g *Generator) pause(d time.Duration) {
	r := &g.room
	r.mu.Lock()
	if r.sleeping {
		// Wait for the end of the sleep in progress. The round tells its end
		// from a spurious wake-up, and the lock, held from the check to the
		// Wait, means its Broadcast cannot come before this goroutine waits.
		for round := r.round; r.round == round; {
			r.woken.Wait()
		}
		r.mu.Unlock()
		return
	}
	r.sleeping = true
	r.mu.Unlock()
	defer func() {
		// Deferred, so that a Sleep that panics does not leave the others
		// parked for good.
		r.mu.Lock()
		r.sleeping = false
		r.round++
		r.mu.Unlock()
		r.woken.Broadcast()
	}()
	g.clock.Sleep(d)
}

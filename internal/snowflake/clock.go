package snowflake

import (
	"runtime"
	"time"
)

// Clock is the time source of a generator. Sleep(d) should pause for about
// d of the clock's time: the generator re-reads Now after it, and counts d
// against the bound of the wait it is in, so that even a clock that never
// moves cannot make it wait without end. Of the goroutines waiting at once,
// one calls Sleep and the others wait for that call to return (pauseRoom).
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

// clockKind lets the generator read the two built-in clocks without an
// interface call.
type clockKind uint8

const (
	kindMonotonic clockKind = iota
	kindWall
	kindCustom
)

const msNanos = int64(time.Millisecond)

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

package entflake

import (
	"fmt"
	"time"

	"github.com/entflake/entflake/internal/snowflake"
)

// Layout is the split of an ID's 22 low bits between the clock-sequence,
// worker and sequence fields; above them are 41 bits of milliseconds since
// the epoch and a zero sign bit:
//
//	| 0 | 41 bits ms since epoch | ClockSeqBits | WorkerBits | SequenceBits |
//
// The three widths must add up to 22, with at least one worker bit and one
// sequence bit. There are no defaults inside a Layout: start from
// DefaultLayout or ClockSequenceLayout. Services that share a sys_sequence
// pool must share a layout, since the pool wraps at 2^WorkerBits.
type Layout struct {
	// ClockSeqBits is the width of the field the BumpClockSequence policy
	// bumps on each clock rollback; 0 in the default layout.
	ClockSeqBits int
	// WorkerBits is the width of the worker id: 2^WorkerBits workers.
	WorkerBits int
	// SequenceBits is the width of the per-millisecond counter:
	// 2^SequenceBits IDs per millisecond per worker.
	SequenceBits int
}

var (
	// DefaultLayout is Twitter's split: 1024 workers, 4096 IDs per
	// millisecond each (a ceiling of 4.096 million IDs a second per worker).
	DefaultLayout = Layout{WorkerBits: 10, SequenceBits: 12}
	// ClockSequenceLayout gives 5 bits to a clock sequence for the
	// BumpClockSequence policy, leaving 32 workers.
	ClockSequenceLayout = Layout{ClockSeqBits: 5, WorkerBits: 5, SequenceBits: 12}
)

func (l Layout) internal() snowflake.Layout {
	return snowflake.Layout{ClockSeqBits: l.ClockSeqBits, WorkerBits: l.WorkerBits, SequenceBits: l.SequenceBits}
}

// Validate returns an error wrapping ErrInvalidLayout, saying what is wrong,
// unless the layout is usable.
func (l Layout) Validate() error { return l.internal().Validate() }

// MaxWorkerID is the largest worker id the layout holds.
func (l Layout) MaxWorkerID() int64 { return l.workers() - 1 }

// workers is the number of worker ids the layout holds (2^WorkerBits): the
// size of the lease's pool and of the fallback's hash range.
func (l Layout) workers() int64 { return l.internal().Workers() }

// DefaultEpoch is the epoch used unless WithEpoch says otherwise:
// 2024-01-01T00:00:00Z, which keeps IDs positive until 2093. A service
// that joins a fleet must use the fleet's epoch (the Java allocator's
// EPOCH constant, for instance), or its IDs and the fleet's may collide.
var DefaultEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Parts is an ID taken apart.
type Parts struct {
	// Time is when the ID was issued, to the millisecond (in UTC). Under a
	// clock that stepped back, or the clamp policy, it may differ from the
	// wall clock of that moment by the size of the step.
	Time time.Time
	// ClockSeq is the clock-sequence field; always 0 without ClockSeqBits.
	ClockSeq int64
	// WorkerID is the worker that issued the ID.
	WorkerID int64
	// Sequence is the ID's place within its millisecond.
	Sequence int64
}

// Decode takes an ID apart according to a layout and an epoch, those the
// generator that issued it used.
func Decode(id int64, layout Layout, epoch time.Time) (Parts, error) {
	if err := layout.Validate(); err != nil {
		return Parts{}, err
	}
	if epoch.UnixMilli() < 0 {
		return Parts{}, fmt.Errorf("%w: %s is before 1970", ErrInvalidEpoch, epoch.Format(time.RFC3339))
	}
	return decode(id, layout, epoch.UnixMilli())
}

func decode(id int64, layout Layout, epochMilli int64) (Parts, error) {
	switch {
	case id < 0:
		return Parts{}, fmt.Errorf("%w: %d is negative", ErrInvalidID, id)
	case id == 0:
		// The CLI refuses it too: 0 is an unset field, not an ID issued
		// at the epoch (an issued ID has a worker id or sequence, or a time
		// past the epoch's first millisecond).
		return Parts{}, fmt.Errorf("%w: zero is no generated ID (an unset field?)", ErrInvalidID)
	}
	p := snowflake.Decode(id, layout.internal())
	return Parts{
		Time:     time.UnixMilli(epochMilli + p.Millis).UTC(),
		ClockSeq: p.ClockSeq,
		WorkerID: p.WorkerID,
		Sequence: p.Sequence,
	}, nil
}

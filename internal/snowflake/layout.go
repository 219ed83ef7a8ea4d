package snowflake

import (
	"fmt"
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

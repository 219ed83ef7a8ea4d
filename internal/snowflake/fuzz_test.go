package snowflake

import (
	"testing"
	"time"
)

// layoutFrom maps any two bytes to a valid layout: every split of the 22 low
// bits with at least one worker and one sequence bit.
func layoutFrom(a, b uint8) Layout {
	cs := int(a) % 21       // 0..20
	w := 1 + int(b)%(21-cs) // 1..21-cs
	return Layout{ClockSeqBits: cs, WorkerBits: w, SequenceBits: LowBits - cs - w}
}

// FuzzDecodeRoundTrip: over every valid layout, an ID the generator issues at
// a given millisecond decodes to that millisecond, its worker and sequence
// 0; and any non-negative int64 decodes to fields that put back together give
// the same number.
func FuzzDecodeRoundTrip(f *testing.F) {
	f.Add(uint8(0), uint8(9), int64(1234567), int64(777), int64(385716584448028673))
	f.Add(uint8(5), uint8(4), int64(0), int64(31), int64(0))
	f.Add(uint8(20), uint8(0), int64(MaxTime), int64(1), int64(1)<<62)
	f.Fuzz(func(t *testing.T, a, b uint8, ms, worker, id int64) {
		l := layoutFrom(a, b)
		if err := l.Validate(); err != nil {
			t.Fatalf("layoutFrom made an invalid layout %+v: %v", l, err)
		}
		if id >= 0 {
			p := Decode(id, l)
			back := p.Millis<<TimeShift | p.ClockSeq<<(l.WorkerBits+l.SequenceBits) | p.WorkerID<<l.SequenceBits | p.Sequence
			if back != id {
				t.Fatalf("layout %+v: %d decodes to %+v, which composes to %d", l, id, p, back)
			}
		}
		if ms < 0 || ms > MaxTime || worker < 0 {
			return
		}
		worker %= l.Workers()
		epoch := time.Date(1971, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
		clk := newFakeClock(time.UnixMilli(epoch + ms))
		policy := Policy{Kind: Clamp, Limit: time.Second}
		g, err := New(Config{Layout: l, EpochMilli: epoch, WorkerID: worker, Clock: clk, Policy: policy})
		if err != nil {
			// The epoch check uses the real clock: only a time field that
			// overflows for today may fail.
			if time.Now().UnixMilli()-epoch > MaxTime {
				return
			}
			t.Fatalf("layout %+v worker %d ms %d: %v", l, worker, ms, err)
		}
		got, err := g.NextID()
		if err != nil {
			t.Fatalf("NextID: %v", err)
		}
		want := Parts{Millis: ms, WorkerID: worker}
		if ms == 0 {
			want.Sequence = 1 // the zero state counts as issued at millisecond 0
		}
		if p := Decode(got, l); p != want {
			t.Fatalf("layout %+v: issued %d decodes to %+v, want %+v", l, got, p, want)
		}
		if got < 0 {
			t.Fatalf("negative id %d", got)
		}
	})
}

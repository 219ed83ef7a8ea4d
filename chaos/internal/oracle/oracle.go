// Package oracle checks a chaos run's history against the model of the
// design, as Jepsen's checkers and etcd's robustness tests check a
// history rather than only its outcome. The model: an ID is the time
// field (milliseconds since the layout's epoch), the worker field, the
// sequence and, in some layouts, a clock sequence; a generator that holds
// a slot may issue under its worker id from the slot's floor up to the
// promise the database acknowledged; and
//
//  1. the ranges of two holdings, by two generators, whose IDs could be
//     equal (the same worker bits, whatever the layouts and epochs) never
//     overlap in the time field: a holding reaches from its floor to its
//     highest acknowledged promise, or to the last millisecond its
//     generator issued under it, when it said so (Close, a loss, a move);
//  2. every ID a generator wrote lies in a range it held when it issued
//     it: at or above the floor and at or below a promise acknowledged
//     before the ID was written (events and IDs are ordered by the count of
//     IDs written when the event was reported, see wire.HistEvent).
//
// A breach of either is found whether or not another generator happened
// to issue in the same millisecond: a collision checker sees a duplicate
// only when one did. IDs a generator issued with no slot (the fallback
// hash, a fixed worker id not yet registered) coordinate with nobody by
// design: they are counted apart, never as breaches, and the collision
// checker judges them.
package oracle

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/entflake/entflake/chaos/internal/wire"
)

// Layout is a bit split of the 22 low bits, as wire.GenSpec has it (all
// zero: the default 0/10/12).
type Layout struct{ CS, W, S int }

func (l Layout) orDefault() Layout {
	if l.W == 0 {
		return Layout{0, 10, 12}
	}
	return l
}

// Stream is one generator's history: its IDs in the order written, and
// the events of its lease.
type Stream struct {
	// Name says which generator it is, in reports.
	Name string
	// Pool names the tables it leased from: holdings of different pools
	// never meet.
	Pool string
	// Layout and EpochMs (Unix ms) are the generator's.
	Layout  Layout
	EpochMs int64
	IDs     []int64
	Events  []wire.HistEvent
}

// Breach is one violation of the model.
type Breach struct {
	// Kind is "overlap" (two holdings' ranges meet) or "outside" (an ID
	// lies in no range its generator held).
	Kind   string
	Detail string
}

// Result is what Check found.
type Result struct {
	Holdings      int   // holdings with a non-empty range
	Pairs         int64 // pairs of holdings whose IDs could meet, checked for overlap
	Checked       int64 // IDs found in a range their generator held
	Uncoordinated int64 // IDs issued with no slot (see the package doc)
	Overlaps      int64
	Outside       int64
	// Examples are the first breaches, described.
	Examples []Breach
}

// Breaches is the number of breaches of both kinds.
func (r Result) Breaches() int64 { return r.Overlaps + r.Outside }

func (r *Result) add(b Breach) {
	switch b.Kind {
	case "overlap":
		r.Overlaps++
	default:
		r.Outside++
	}
	if len(r.Examples) < 8 {
		r.Examples = append(r.Examples, b)
	}
}

// holding is one slot held by one generator, as its events tell.
type holding struct {
	s        *Stream
	worker   int64
	fence    int64
	heldN    int64 // the Held event's N
	floor    int64 // Unix ms
	promises []mark
	last     int64 // lowest Last of its Ended events; 0: none
}

// mark is a promise and the N it was reported at.
type mark struct{ n, ms int64 }

// end is the last millisecond the holding may have issued in.
func (h *holding) end() int64 {
	e := h.promises[0].ms
	for _, p := range h.promises {
		e = max(e, p.ms)
	}
	if h.last != 0 {
		e = min(e, h.last)
	}
	return e
}

// promiseAt is the highest promise reported at or before position i.
func (h *holding) promiseAt(i int64) (int64, bool) {
	best, ok := int64(0), false
	for _, p := range h.promises {
		if p.n <= i && (!ok || p.ms > best) {
			best, ok = p.ms, true
		}
	}
	return best, ok
}

// bits are the fixed bits of the holding's IDs among the 22 low bits.
func (h *holding) bits() (mask, val uint64) {
	l := h.s.Layout.orDefault()
	mask = (uint64(1)<<l.W - 1) << l.S
	return mask, uint64(h.worker) << l.S
}

func (h *holding) String() string {
	l := h.s.Layout.orDefault()
	return fmt.Sprintf("%s worker %d fence %d (layout %d/%d/%d epoch %d) from %d to %d",
		h.s.Name, h.worker, h.fence, l.CS, l.W, l.S, h.s.EpochMs, h.floor, h.end())
}

// Check checks the streams against the model.
func Check(streams []*Stream) Result {
	var r Result
	byPool := map[string][]*holding{}
	for _, s := range streams {
		hs, unco := holdings(s)
		for _, h := range hs {
			if h.end() >= h.floor {
				byPool[s.Pool] = append(byPool[s.Pool], h)
				r.Holdings++
			}
		}
		checkIDs(s, hs, unco, &r)
	}
	for _, pool := range slices.Sorted(maps.Keys(byPool)) {
		overlaps(byPool[pool], &r)
	}
	return r
}

// holdings reads a stream's events: its holdings, and the positions from
// which it issued uncoordinated, by worker id.
func holdings(s *Stream) ([]*holding, map[int64]int64) {
	var hs []*holding
	find := func(w, f int64) *holding {
		for _, h := range hs {
			if h.worker == w && h.fence == f {
				return h
			}
		}
		return nil
	}
	unco := map[int64]int64{}
	for _, e := range s.Events {
		switch e.K {
		case "held":
			h := find(e.W, e.F)
			if h == nil {
				h = &holding{s: s, worker: e.W, fence: e.F, heldN: e.N, floor: e.Floor}
				hs = append(hs, h)
			}
			h.promises = append(h.promises, mark{e.N, e.P})
		case "promised":
			if h := find(e.W, e.F); h != nil {
				h.promises = append(h.promises, mark{e.N, e.P})
			}
		case "ended":
			if h := find(e.W, e.F); h != nil && (h.last == 0 || e.Last < h.last) {
				h.last = e.Last
			}
		case "uncoordinated":
			if n, ok := unco[e.W]; !ok || e.N < n {
				unco[e.W] = e.N
			}
		}
	}
	return hs, unco
}

// checkIDs checks that every ID of s lies in a range s held when it wrote
// it (rule 2).
func checkIDs(s *Stream, hs []*holding, unco map[int64]int64, r *Result) {
	l := s.Layout.orDefault()
	shift := uint(l.CS + l.W + l.S) // 22: the time field's
	for i, id := range s.IDs {
		w := id >> l.S & (1<<l.W - 1)
		ms := id>>shift + s.EpochMs
		ok := false
		for _, h := range hs {
			if h.worker != w || h.heldN > int64(i) || ms < h.floor {
				continue
			}
			if p, known := h.promiseAt(int64(i)); known && ms <= p {
				ok = true
				break
			}
		}
		switch {
		case ok:
			r.Checked++
		case isUnco(unco, w, int64(i)):
			r.Uncoordinated++
		default:
			r.add(Breach{Kind: "outside", Detail: fmt.Sprintf("%s: ID %d (worker %d, ms %d, the %d-th written) lies in no range it held: %s",
				s.Name, id, w, ms, i, describe(hs, w, int64(i)))})
		}
	}
}

func isUnco(unco map[int64]int64, w, i int64) bool {
	n, ok := unco[w]
	return ok && n <= i
}

// describe lists a stream's holdings of worker w as known at position i,
// for a breach's report.
func describe(hs []*holding, w, i int64) string {
	out := ""
	for _, h := range hs {
		if h.worker != w {
			continue
		}
		p, known := h.promiseAt(i)
		if !known {
			out += fmt.Sprintf("[fence %d from %d, held after this ID] ", h.fence, h.floor)
			continue
		}
		out += fmt.Sprintf("[fence %d from %d to %d] ", h.fence, h.floor, p)
	}
	if out == "" {
		return "none of that worker id"
	}
	return out
}

// overlaps checks rule 1 among the holdings of one pool.
func overlaps(hs []*holding, r *Result) {
	slices.SortFunc(hs, func(a, b *holding) int { return cmp.Compare(a.floor, b.floor) })
	for i, a := range hs {
		am, av := a.bits()
		for _, b := range hs[i+1:] {
			if a.s == b.s {
				continue // one generator's IDs increase: its holdings cannot meet
			}
			bm, bv := b.bits()
			common := am & bm
			if av&common != bv&common {
				continue
			}
			r.Pairs++
			// The time field of each, in its own epoch.
			a0, a1 := a.floor-a.s.EpochMs, a.end()-a.s.EpochMs
			b0, b1 := b.floor-b.s.EpochMs, b.end()-b.s.EpochMs
			if a0 <= b1 && b0 <= a1 {
				r.add(Breach{Kind: "overlap", Detail: fmt.Sprintf("%s and %s: their time fields meet in %d..%d",
					a, b, max(a0, b0), min(a1, b1))})
			}
		}
	}
}

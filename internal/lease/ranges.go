package lease

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The pool's worker range. Pools on different databases, which cannot see
// each other's slots, never issue the same IDs when their worker ranges
// are disjoint: a region's services lease from its own database and range.
// The range is a fact about the other databases, so this one can only keep
// its own record of it and refuse instances that disagree: it is recorded
// in the '__layout__' row (layoutText), which every claim compares, so a
// claim is ordered against a change of range as against a change of
// layout, with a copy in '__slots__' for the day '__layout__' is lost.
//
// A starter with another range changes the record only while no slot is
// live (changeRange); the operator's SetRange changes it while slots live,
// and says which live slots lie outside the new range: their holders keep
// their worker ids until they stop, and another pool must not hand those
// out before then.

// RangeChange is what SetRange found, and did.
type RangeChange struct {
	// Layout is the pool's layout and epoch, as the '__layout__' row
	// records it.
	Layout string
	// Workers is the number of worker ids the layout holds.
	Workers int64
	// From and To are the pool's range before and after, as "lo-hi"; ""
	// is the whole layout.
	From, To string
	// Widen is the wider layout the pool widens to ("" when it does not).
	Widen string
	// Outside lists the live slots outside To, by worker id: their holders
	// may issue under those worker ids until their slots expire or are
	// released.
	Outside []Holder
	// NowMs is the database's clock when they were read, Unix ms.
	NowMs int64
	// Applied reports that the change was committed (false for a dry run,
	// and when To was already the pool's range).
	Applied bool
}

// ErrNoPool is returned by SetRange for a database whose pool has no
// layout recorded yet: no instance has leased from it.
var ErrNoPool = errors.New("the pool has no layout yet: no instance has leased from these tables")

// SetRange changes the pool's worker range to lo..hi (both zero: the
// whole layout, no range), or, with apply false, only says what that
// would do (a dry run: everything is read, under the same locks, and
// rolled back). With keep, it changes nothing and reports the pool's range
// as it is, and the live slots outside it. It holds the pool's rows, as
// the locked take does, so no claim commits meanwhile; it refuses a range
// that does not fit the pool's layout.
func SetRange(ctx context.Context, db *sql.DB, dialectName string, lo, hi int64, keep, apply bool) (RangeChange, error) {
	var c RangeChange
	var err error
	c.Applied, err = operate(ctx, db, dialectName, func(s *session, m markers) (bool, error) {
		pt := parsePoolText(m.layoutText)
		if pt.widen != "" && !keep {
			return false, fmt.Errorf("%w: the pool widens to %q: a range names worker ids of one layout, so it does not move "+
				"before the widening is finished or cancelled", ErrWidening, pt.widen)
		}
		workers, err := layoutWorkers(pt.layout)
		if err != nil {
			return false, err
		}
		c.Layout, c.Workers, c.From, c.Widen = pt.layout, workers, pt.rng, pt.widen
		if keep {
			lo, hi, _ = parseRangeText(pt.rng)
		}
		if err := checkRange(lo, hi, workers); err != nil {
			return false, fmt.Errorf("%w for the pool's layout %q", err, pt.layout)
		}
		want := &Request{Workers: workers, Lo: lo, Hi: hi}
		c.To = want.rangeText()
		if s.q.lockSlots != "" {
			// Renewals in flight commit first, and are seen below.
			if _, err := s.drain(ctx, s.q.lockSlots); err != nil {
				return false, fmt.Errorf("lock the slots: %w", err)
			}
		}
		if c.NowMs, c.Outside, err = s.liveOutside(ctx, want.lo(), want.hi()); err != nil {
			return false, err
		}
		if !apply || keep || c.To == c.From {
			return false, nil
		}
		st := m.slots()
		st.rng = c.To
		pt.rng = c.To
		return true, s.writePoolRows(ctx, m.made, st, pt.String())
	})
	return c, err
}

// liveOutside reads the live slots outside lo..hi, with the database's
// clock.
func (s *session) liveOutside(ctx context.Context, lo, hi int64) (nowMs int64, out []Holder, err error) {
	rows, err := s.x.QueryContext(ctx, fmt.Sprintf(s.q.liveOutside, lo, hi))
	if err != nil {
		return 0, nil, fmt.Errorf("look for live slots outside the range: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id                          sql.NullInt64
			service, instance, layout   sql.NullString
			fence, taken, expires, prom sql.NullInt64
		)
		if err := rows.Scan(&id, &service, &instance, &fence, &taken, &expires, &prom, &layout, &nowMs); err != nil {
			return 0, nil, fmt.Errorf("look for live slots outside the range: %w", err)
		}
		if id.Valid {
			out = append(out, Holder{WorkerID: id.Int64, Service: service.String, Instance: instance.String,
				Layout: layout.String, Fence: fence.Int64, TakenMs: taken.Int64, ExpiresMs: expires.Int64, PromiseMs: prom.Int64})
		}
	}
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("look for live slots outside the range: %w", err)
	}
	return nowMs, out, nil
}

// layoutWorkers is the number of worker ids of a layout tag
// ("clockseq/worker/sequence epoch").
func layoutWorkers(tag string) (int64, error) {
	bits, _, _ := strings.Cut(tag, " ")
	f := strings.Split(bits, "/")
	if len(f) != 3 {
		return 0, fmt.Errorf("the pool's layout %q does not read as clockseq/worker/sequence", tag)
	}
	w, err := strconv.Atoi(f[1])
	if err != nil || w < 1 || w > 21 {
		return 0, fmt.Errorf("the pool's layout %q has no worker field of 1..21 bits", tag)
	}
	return 1 << w, nil
}

// parseRangeText reads a recorded range "lo-hi" ("" reads as 0, 0: the
// whole layout).
func parseRangeText(rng string) (lo, hi int64, err error) {
	if rng == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(rng, "-")
	if ok {
		if lo, err = strconv.ParseInt(a, 10, 64); err == nil {
			hi, err = strconv.ParseInt(b, 10, 64)
		}
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("the pool's worker range %q does not read as lo-hi", rng)
	}
	return lo, hi, nil
}

// rangeSpan is the first and last worker id of a recorded range ("": the
// whole layout of workers worker ids; one that does not read as lo-hi
// too, as SetRange reads it).
func rangeSpan(rng string, workers int64) (lo, hi int64) {
	r := Request{Workers: workers}
	r.Lo, r.Hi, _ = parseRangeText(rng)
	return r.lo(), r.hi()
}

// PoolRange is one pool's worker range, as CheckRanges compares it: a
// RangeChange of SetRange's keep (the pool's rows read under its locks).
type PoolRange = RangeChange

// RangeOverlap says that pools A and B (indexes into CheckRanges' pools)
// both hand out worker ids Lo..Hi (of the widest layout: see CheckRanges):
// their IDs can be equal.
type RangeOverlap struct {
	A, B   int
	Lo, Hi int64
}

// RangeGap is a run of worker ids Lo..Hi that no pool hands out.
type RangeGap struct{ Lo, Hi int64 }

// ErrRangesIncomparable: the pools' worker ids name different IDs (other
// epochs, or layouts of which neither widens the other), or one of them
// widens, so their ranges cannot be compared.
var ErrRangesIncomparable = errors.New("the pools' worker ranges cannot be compared")

// CheckRanges compares the worker ranges of pools that must hand out
// disjoint worker ids (one per database of a fleet split into regions):
// every pair that shares worker ids, and the worker ids none has. The
// ranges are compared in the widest layout among the pools (layout, the
// tag): a range lo..hi of a layout that it widens by d bits issues the IDs
// of its worker ids lo*2^d .. (hi+1)*2^d-1 (widen.go), so a region widened
// beside one that is not yet compares as it issues. Pools of other epochs
// or of layouts of which neither widens the other, or one that widens now,
// are refused. It sees only the pools it is given.
func CheckRanges(pools []PoolRange) (layout string, overlaps []RangeOverlap, gaps []RangeGap, err error) {
	if len(pools) == 0 {
		return "", nil, nil, nil
	}
	widest := 0
	for i, p := range pools {
		if p.Widen != "" {
			return "", nil, nil, fmt.Errorf("%w: pool %d widens to %q: check its range after the widening is finished or cancelled",
				ErrRangesIncomparable, i+1, p.Widen)
		}
		if p.Workers > pools[widest].Workers {
			widest = i
		}
	}
	layout, workers := pools[widest].Layout, pools[widest].Workers
	type run struct{ lo, hi int64 }
	runs := make([]run, len(pools))
	for i, p := range pools {
		lo, hi := rangeSpan(p.From, p.Workers)
		if p.Layout != layout {
			wd, err := newWidening(p.Layout, layout)
			if err != nil {
				return "", nil, nil, fmt.Errorf("%w: pool %d's layout is %q, pool %d's %q: worker ids of these name other IDs (%v)",
					ErrRangesIncomparable, i+1, p.Layout, widest+1, layout, err)
			}
			lo, hi = lo<<wd.shift, (hi+1)<<wd.shift-1
		}
		runs[i] = run{lo, hi}
	}
	for i := range runs {
		for j := i + 1; j < len(runs); j++ {
			if lo, hi := max(runs[i].lo, runs[j].lo), min(runs[i].hi, runs[j].hi); lo <= hi {
				overlaps = append(overlaps, RangeOverlap{A: i, B: j, Lo: lo, Hi: hi})
			}
		}
	}
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b run) int { return cmp.Compare(a.lo, b.lo) })
	next := int64(0)
	for _, r := range sorted {
		if r.lo > next {
			gaps = append(gaps, RangeGap{Lo: next, Hi: r.lo - 1})
		}
		next = max(next, r.hi+1)
	}
	if next <= workers-1 {
		gaps = append(gaps, RangeGap{Lo: next, Hi: workers - 1})
	}
	return layout, overlaps, gaps, nil
}

package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/entflake/entflake/schema"
)

// Widening the worker field online. With an old layout of W worker bits
// and S sequence bits and a new one of W+d and S-d (same epoch, same
// clock-sequence field), new worker v issues exactly the IDs of old worker
// v>>d whose top d sequence bits are v's low d bits:
//
//	v << (S-d)  ==  (v>>d) << S  |  (v & (1<<d - 1)) << (S-d)
//
// so the two layouts' IDs can meet only between old worker w and its new
// workers w<<d .. w<<d + 2^d-1, in the same millisecond. While the pool
// widens, both layouts lease from the same tables, and the locked take
// (every take then runs it: conforms) checks the rows of the other layout
// that share the slot's IDs, holding them locked (crossCheck): a new slot
// is taken only while its old one is not live, an old slot only while none
// of its new ones is, and either above the promises of the others.
//
// Slot rows are keyed by worker id, and the old layout's rows are
// 0..2^W-1, so while both are live the new layout takes only worker ids
// 2^W and up (their old workers are 2^(W-d) .. 2^W-1): its rows never meet
// the old layout's. Once no old slot is live, FinishWiden changes the
// pool's layout as a take of the new layout would (changeLayout: every row
// floored above every ID the old layout can have issued), and the new
// layout has all its worker ids. CancelWiden goes back while no new slot
// is live.

// widening is the pool's move from one layout to a wider one.
type widening struct {
	from, to             string // layout tags
	shift                int    // d: the worker bits added
	oldWorkers, toWorker int64  // 2^W, 2^(W+d)
}

// parseWidening reads the widening a '__layout__' text records, if any.
func parseWidening(t string) (widening, bool) {
	p := parsePoolText(t)
	if p.widen == "" {
		return widening{}, false
	}
	wd, err := newWidening(p.layout, p.widen)
	return wd, err == nil
}

// newWidening checks that to widens from: the same epoch and clock-sequence
// field, more worker bits, at least one sequence bit left.
func newWidening(from, to string) (widening, error) {
	fb, fe, err := splitTag(from)
	if err != nil {
		return widening{}, err
	}
	tb, te, err := splitTag(to)
	if err != nil {
		return widening{}, err
	}
	switch {
	case fe != te:
		return widening{}, fmt.Errorf("%w: %q has another epoch than the pool's %q: a widening keeps the epoch", ErrLayout, to, from)
	case tb[0] != fb[0]:
		return widening{}, fmt.Errorf("%w: %q has another clock-sequence field than the pool's %q: a widening keeps it", ErrLayout, to, from)
	case tb[1] <= fb[1]:
		return widening{}, fmt.Errorf("%w: %q has no more worker bits than the pool's %q: only a wider worker field moves online "+
			"(a narrower one needs every instance of the pool stopped)", ErrLayout, to, from)
	}
	return widening{from: from, to: to, shift: tb[1] - fb[1], oldWorkers: 1 << fb[1], toWorker: 1 << tb[1]}, nil
}

// splitTag reads a layout tag: its three widths, which add up to 22, and
// its epoch.
func splitTag(tag string) (bits [3]int, epoch string, err error) {
	b, e, ok := strings.Cut(tag, " ")
	f := strings.Split(b, "/")
	if !ok || len(f) != 3 {
		return bits, "", fmt.Errorf("layout %q does not read as clockseq/worker/sequence and an epoch", tag)
	}
	for i, x := range f {
		if bits[i], err = strconv.Atoi(x); err != nil || bits[i] < 0 {
			return bits, "", fmt.Errorf("layout %q does not read as clockseq/worker/sequence and an epoch", tag)
		}
	}
	if bits[0]+bits[1]+bits[2] != 22 || bits[1] < 1 || bits[2] < 1 {
		return bits, "", fmt.Errorf("layout %q: the widths must add up to 22, with a worker and a sequence bit at least", tag)
	}
	if _, ok := layoutEpochMs(tag); !ok {
		return bits, "", fmt.Errorf("layout %q has no epoch", tag)
	}
	return bits, e, nil
}

// bounds are the worker ids the take may hand out: the request's range,
// and, while the pool widens to the take's layout, only those from the old
// layout's first worker id past its own (see the package's note above).
func (s *session) bounds() (lo, hi int64) {
	lo, hi = s.r.lo(), s.r.hi()
	if wd, ok := parseWidening(s.pool.layoutText); ok && wd.to == s.r.Layout {
		lo = max(lo, wd.oldWorkers)
	}
	return lo, hi
}

// sharedFilter is the condition candidates adds while the pool widens: no
// slot whose IDs a live slot of the other layout issues (crossCheck, which
// the claim runs, decides; this only keeps the search from listing them).
// Every dialect has integer shifts.
func (s *session) sharedFilter() string {
	wd, ok := parseWidening(s.pool.layoutText)
	if !ok {
		return ""
	}
	switch s.r.Layout {
	case wd.to:
		return fmt.Sprintf(" AND NOT EXISTS (SELECT 1 FROM sys_sequence_slot AS o WHERE o.worker_id = sys_sequence_slot.worker_id >> %d "+
			"AND o.expires_ms >= %s)", wd.shift, s.nowMs)
	case wd.from:
		// Old worker ids below 2^(W-d) have no new ones live (bounds).
		return fmt.Sprintf(" AND (sys_sequence_slot.worker_id < %[4]d OR NOT EXISTS (SELECT 1 FROM sys_sequence_slot AS o "+
			"WHERE o.worker_id >= sys_sequence_slot.worker_id << %[1]d AND o.worker_id <= (sys_sequence_slot.worker_id << %[1]d) + %[2]d "+
			"AND o.expires_ms >= %[3]s))", wd.shift, 1<<wd.shift-1, s.nowMs, wd.oldWorkers>>wd.shift)
	}
	return ""
}

// widensTo reports whether the pool, as last read, widens to the take's
// layout.
func (s *session) widensTo() bool {
	wd, ok := parseWidening(s.pool.layoutText)
	return ok && wd.to == s.r.Layout
}

// crossCheck reads, locked, the slot rows of the other layout of a
// widening that share slot w's IDs, inside the locked take: it marks w
// shared when one of them is live (or w is a worker id of the new layout
// that the old one's rows still occupy), and raises its floor (w.cross)
// above their promises, and above the pool's deletion window (st.until)
// when one of them has no row: a row deleted while its holder lived
// leaves nothing to read, and its holder's promise is below the window
// (the cap of claim and renew; pool.go). Whether a row is missing because
// it was deleted is judged under the lock (rule 3 of statements.go): the
// slot rows are counted again, locked (lockedCount), and fewer than made
// moves the window to the database's clock plus the longest TTL
// (deficit), which found reports; a count read before this lock would
// miss a row deleted since, and the floor would stand on a window that
// does not cover its holder. Their locks keep them so until the take
// commits: a renewal of theirs in flight commits first and is seen. And
// the rows it floors above are fenced (fenceRange): a renewal sent before
// they expired cannot revive them after this take.
func (s *session) crossCheck(ctx context.Context, wd widening, w *row, st *slots, made *int64) (found bool, err error) {
	var lo, hi int64
	switch s.r.Layout {
	case wd.to:
		if w.workerID < wd.oldWorkers {
			w.shared = fmt.Sprintf("worker id %d of %q is a row of the old layout's until the pool's widening is finished "+
				"(entflake widen -finish)", w.workerID, wd.to)
			return false, nil
		}
		lo = w.workerID >> wd.shift
		hi = lo
	case wd.from:
		// Its new workers below 2^W wait for the widening's end (bounds):
		// no row of theirs is live, and their keys are old rows.
		lo = max(w.workerID<<wd.shift, wd.oldWorkers)
		hi = w.workerID<<wd.shift + 1<<wd.shift - 1
		if lo > hi {
			return false, nil
		}
	default:
		return false, nil
	}
	rows, err := s.x.QueryContext(ctx, fmt.Sprintf(s.q.crossRows, lo, hi))
	if err != nil {
		return false, fmt.Errorf("read the slots that share worker id %d's IDs: %w", w.workerID, err)
	}
	n := int64(0)
	for rows.Next() {
		var (
			id, expires, promise, now int64
			instance, layout          sql.NullString
		)
		if err := rows.Scan(&id, &expires, &promise, &instance, &layout, &now); err != nil {
			rows.Close()
			return false, fmt.Errorf("read the slots that share worker id %d's IDs: %w", w.workerID, err)
		}
		n++
		w.cross = max(w.cross, promise)
		if expires >= now && w.shared == "" {
			w.shared = fmt.Sprintf("worker id %d of %q issues IDs of worker id %d of %q, which is live: instance %q",
				w.workerID, s.r.Layout, id, layout.String, instance.String)
		}
	}
	if err := rows.Close(); err != nil {
		return false, fmt.Errorf("read the slots that share worker id %d's IDs: %w", w.workerID, err)
	}
	if n < hi-lo+1 {
		count, nowMs, err := s.lockedCount(ctx)
		if err != nil {
			return false, err
		}
		found = s.deficit(st, made, count, nowMs)
		w.cross = max(w.cross, st.until)
	}
	if w.shared != "" || n == 0 {
		return found, nil
	}
	if _, err := s.x.ExecContext(ctx, fmt.Sprintf(s.q.fenceRange, lo, hi)); err != nil {
		return false, fmt.Errorf("fence the slots that share worker id %d's IDs: %w", w.workerID, err)
	}
	return found, nil
}

// widenStep is what a finish (finish true) or a cancel checks before it
// changes anything: the pool widens, no slot of the layout it ends is live
// (the old one for a finish, the wider one for a cancel), and no deletion
// of slot rows is unsettled.
func (s *session) widenStep(ctx context.Context, m markers, out *Widening, finish bool) (poolText, widening, error) {
	p := parsePoolText(m.layoutText)
	out.From, out.To = p.layout, p.widen
	wd, ok := parseWidening(m.layoutText)
	if !ok {
		return p, wd, fmt.Errorf("%w: the pool (%q) is not widening", ErrWidening, p.layout)
	}
	count, nowMs, err := s.widenCensus(ctx, wd, out)
	if err != nil {
		return p, wd, err
	}
	ends, which := wd.to, "wider"
	if finish {
		ends, which = wd.from, "old"
	}
	if n := out.Live[ends]; n > 0 {
		verb := "are"
		if n == 1 {
			verb = "is"
		}
		return p, wd, fmt.Errorf("%w: %s of the %s layout %q %s live: replace their instances first "+
			"(a slot whose instance is gone, killed or crashed, frees itself when it expires: the last at %s)", ErrWidening,
			Count(n, "slot"), which, ends, verb, time.UnixMilli(out.Expires[ends]).UTC().Format(time.RFC3339))
	}
	return p, wd, settled(m, count, nowMs)
}

// settled refuses a finish or a cancel while slot rows may have been
// deleted under live holders: rows fewer than the pool made (a deletion
// no take has counted yet), a count not known, or a deletion window
// (until) not yet past the database's clock nowMs. count is the slot
// rows counted under the census's lock of every row (rule 3 of
// statements.go). A take counts them (lockedOnce), and the window ends at
// the database's clock + the longest TTL.
func settled(m markers, count, nowMs int64) error {
	st := m.slots()
	switch {
	case m.made < 0 || count < m.made:
		return fmt.Errorf("%w: slot rows were deleted (or not counted yet) since the pool last counted them: "+
			"the next take counts them; try again after it", ErrWidening)
	case st.until > nowMs:
		return fmt.Errorf("%w: slot rows were found deleted, and their holders may be live until %s: try again after",
			ErrWidening, time.UnixMilli(st.until).UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// Widening is what Widen, FinishWiden and CancelWiden found, and did.
type Widening struct {
	// From is the pool's layout and epoch; To the wider one, while the
	// pool widens ("" when it does not).
	From, To string
	// Live counts the live slots of each layout.
	Live map[string]int
	// Expires is, for each layout, when the last of its live slots
	// expires (the database's clock, Unix ms) unless renewed: when a
	// crashed instance's slot frees itself.
	Expires map[string]int64
	// Shared lists the live slots of the old layout whose IDs the new
	// layout's worker ids share (old worker ids 2^(W-d) and up): the new
	// layout does not take those while they live.
	Shared []Holder
	// NowMs is the database's clock when the slots were read, Unix ms.
	NowMs int64
	// Applied reports that the change was committed (false for a dry run).
	Applied bool
}

// ErrWidening: a widening cannot start, finish or be cancelled now (the
// error says why).
var ErrWidening = errors.New("the pool's widening cannot move")

// Widen starts widening the pool's layout to to ("c/w/s epoch", or
// "c/w/s" for the pool's epoch: the pool's epoch and clock-sequence field
// with more worker bits), or, with
// apply false, says what that would do. Instances of both layouts then
// lease from the pool; the old layout's are replaced at their own pace.
// Starting a widening the pool is already in reports it and changes
// nothing.
func Widen(ctx context.Context, db *sql.DB, dialectName, to string, apply bool) (Widening, error) {
	var out Widening
	var err error
	out.Applied, err = operate(ctx, db, dialectName, func(s *session, m markers) (bool, error) {
		p := parsePoolText(m.layoutText)
		if !strings.Contains(to, " ") {
			// Widths alone: the pool's epoch.
			_, epoch, _ := strings.Cut(p.layout, " ")
			to += " " + epoch
		}
		out.From, out.To = p.layout, to
		if p.widen != "" && p.widen != to {
			return false, fmt.Errorf("%w: the pool widens to %q already: finish or cancel that first", ErrWidening, p.widen)
		}
		if p.rng != "" {
			return false, fmt.Errorf("%w: the pool has a worker range (%s), which a widening does not move yet: "+
				"set it to all first (entflake range -set all)", ErrWidening, p.rng)
		}
		wd, err := newWidening(p.layout, to)
		if err != nil {
			return false, err
		}
		if _, _, err := s.widenCensus(ctx, wd, &out); err != nil {
			return false, err
		}
		if !apply || p.widen == to {
			return false, nil
		}
		if out.Live[to] > 0 {
			// Not one of ours: a take of the wider layout went through a
			// change of layout, which refuses while the old one lives.
			return false, fmt.Errorf("%w: slots of %q are live already", ErrWidening, to)
		}
		p.widen = to
		st := m.slots()
		st.widen = to
		return true, s.writePoolRows(ctx, m.made, st, p.String())
	})
	return out, err
}

// FinishWiden ends the pool's widening: the pool's layout becomes the
// wider one, with all its worker ids, and the old layout is refused from
// then on. It refuses while any slot of the old layout is live. Rows are
// floored as a change of layout floors them (changeLayout).
func FinishWiden(ctx context.Context, db *sql.DB, dialectName string, apply bool) (Widening, error) {
	var out Widening
	var err error
	out.Applied, err = operate(ctx, db, dialectName, func(s *session, m markers) (bool, error) {
		p, wd, err := s.widenStep(ctx, m, &out, true)
		if err != nil || !apply {
			return false, err
		}
		// The change a take of the new layout would make: every row of the
		// old layout floored above its IDs. Its wait for a floor ahead of
		// the clock is for a starter about to issue; here the rows keep the
		// floor, and the takes after it wait.
		s.r.Layout, s.r.Workers, s.r.Now, s.r.Lead = wd.to, wd.toWorker, time.Now, 24*time.Hour
		st := m.slots()
		// Rows of the new layout made later start above every ID of the
		// old one (its rows' floor), not above the new layout's live
		// promises, which only their own rows carry: the '__layout__' row
		// is known, so no floor of it was lost (operate).
		_, above, err := s.changeLayout(ctx, wd.from, st, m.nowMs)
		if errors.Is(err, ErrLayout) {
			return false, fmt.Errorf("%w: %w", ErrWidening, err)
		}
		if err != nil {
			return false, err
		}
		st.layout, st.widen = wd.to, ""
		return true, s.writePoolRows(ctx, m.made, st, layoutText(wd.to, p.rng, max(above, p.floor)))
	})
	return out, err
}

// CancelWiden ends the pool's widening the other way: the old layout stays
// the pool's, with all its worker ids, and the wider one is refused (while
// a slot of it lives, or until it is started again). It refuses while any
// slot of the wider layout is live.
func CancelWiden(ctx context.Context, db *sql.DB, dialectName string, apply bool) (Widening, error) {
	var out Widening
	var err error
	out.Applied, err = operate(ctx, db, dialectName, func(s *session, m markers) (bool, error) {
		p, wd, err := s.widenStep(ctx, m, &out, false)
		if err != nil || !apply {
			return false, err
		}
		// No renewal sent before a new slot expired may revive it after
		// the cancel, when no take of its old worker id reads it any more.
		if _, err := s.x.ExecContext(ctx, fmt.Sprintf(s.q.fenceRange, wd.oldWorkers, wd.toWorker-1)); err != nil {
			return false, fmt.Errorf("fence the wider layout's rows: %w", err)
		}
		// The new layout's holders issued IDs of the old worker ids they
		// were under, and after the cancel an old worker id's take no
		// longer reads their rows (crossCheck): its row takes their
		// promises (all of them, the highest: a few seconds past the
		// last new ID at most, and a row's promise only ever rises), and
		// the end of the last deletion window, above the promises of
		// rows found deleted, which no row carries any more.
		st := m.slots()
		stmt := fmt.Sprintf(s.q.raiseBelow, wd.oldWorkers, wd.oldWorkers, wd.oldWorkers)
		if _, err := s.x.ExecContext(ctx, stmt, st.until, st.until); err != nil {
			return false, fmt.Errorf("floor the old layout's rows: %w", err)
		}
		// And the rows not made yet, which no statement can floor: an old
		// worker id whose chunk was never used (an 11-bit layout's 1024
		// and up) shares the IDs of new ones that issued. The layout's
		// floor, which every row made later starts above (makeRows), goes
		// above every promise in the table and the window, as a change of
		// layout's does.
		groups, err := s.layoutGroups(ctx)
		if err != nil {
			return false, err
		}
		p.floor = max(p.floor, aboveEvery(groups, p.layout), st.until+1)
		p.widen = ""
		st.widen = ""
		return true, s.writePoolRows(ctx, m.made, st, p.String())
	})
	return out, err
}

// WidenStatus reports the pool's widening, if any, and its live slots; it
// changes nothing.
func WidenStatus(ctx context.Context, db *sql.DB, dialectName string) (Widening, error) {
	var out Widening
	_, err := operate(ctx, db, dialectName, func(s *session, m markers) (bool, error) {
		p := parsePoolText(m.layoutText)
		out.From, out.To = p.layout, p.widen
		wd, ok := parseWidening(m.layoutText)
		if !ok {
			wd = widening{from: p.layout, oldWorkers: 1 << 22} // no old worker id is shared
		}
		_, _, err := s.widenCensus(ctx, wd, &out)
		return false, err
	})
	return out, err
}

// widenCensus counts the live slots of each layout, and lists the old
// layout's live slots that the new one shares IDs with, after locking
// every slot row (renewals in flight commit first); it returns the slot
// rows counted under that lock and the database's clock read after it
// (lockedCount).
func (s *session) widenCensus(ctx context.Context, wd widening, out *Widening) (count, nowMs int64, err error) {
	if count, nowMs, err = s.lockedCount(ctx); err != nil {
		return 0, 0, err
	}
	// Every live slot: none is inside the empty range -1..-1.
	now, live, err := s.liveOutside(ctx, -1, -1)
	if err != nil {
		return 0, 0, err
	}
	out.NowMs, out.Live, out.Expires = now, map[string]int{}, map[string]int64{}
	for _, h := range live {
		out.Live[h.Layout]++
		out.Expires[h.Layout] = max(out.Expires[h.Layout], h.ExpiresMs)
		if h.Layout == wd.from && h.WorkerID >= wd.oldWorkers>>wd.shift {
			out.Shared = append(out.Shared, h)
		}
	}
	return count, nowMs, nil
}

// slots is the '__slots__' row's text as an operator's step writes it
// back: with the longest TTL either pool row keeps (each keeps a copy).
func (m markers) slots() slots {
	st := parseSlots(m.slotsText)
	st.ttl = max(st.ttl, m.layoutTTL)
	return st
}

// operate runs f in a transaction that holds the pool's rows as the locked
// take does (no claim commits meanwhile), and commits when f says so.
func operate(ctx context.Context, db *sql.DB, dialectName string, f func(*session, markers) (commit bool, err error)) (committed bool, err error) {
	if err := schema.CheckDialect(dialectName); err != nil {
		return false, err
	}
	q := textFor(dialectName)
	for _, t := range []string{schema.TableName, schema.SlotTableName} {
		exists, err := tableExists(ctx, db, q, t)
		if err != nil {
			return false, err
		}
		if !exists {
			return false, fmt.Errorf("%w: no %s table", ErrNoPool, t)
		}
	}
	s, err := open(ctx, &Request{DB: db, Dialect: dialectName})
	if err != nil {
		return false, err
	}
	defer s.close(ctx)
	if dialectName == "mysql" {
		var version string
		if err := s.conn.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
			return false, fmt.Errorf("read the server's version: %w", err)
		}
		s.tidb = strings.Contains(version, "TiDB")
	}
	end, err := s.beginLocked(ctx)
	if err != nil {
		return false, err
	}
	m, err := s.lockMarkers(ctx)
	if err == nil && !knownLayout(m.layoutText) {
		err = fmt.Errorf("%w (or its '%s' row is lost: the next take puts it back)", ErrNoPool, schema.LayoutService)
	}
	commit := false
	if err == nil {
		commit, err = f(s, m)
	}
	if lost := m.lost(); err == nil && commit && len(lost) > 0 {
		// A pool's row that read as nothing is put back by the next take,
		// at its worst (markers.lost): a change written over it would
		// write back what this read found, nothing, as if it were so. A
		// status or a dry run, which writes nothing, goes on.
		commit, err = false, fmt.Errorf("%w (or its %s lost: the next take puts it back; change it after)", ErrNoPool, lostRows(lost))
	}
	if err != nil || !commit {
		_ = end(false)
		return false, err
	}
	if err := end(true); err != nil {
		return false, fmt.Errorf("commit: %w", err)
	}
	return true, nil
}

// lostRows names lost pool rows in an error: "'__slots__' row is",
// "'__layout__' and '__slots__' rows are".
func lostRows(lost []string) string {
	if len(lost) == 1 {
		return "'" + lost[0] + "' row is"
	}
	return "'" + strings.Join(lost, "' and '") + "' rows are"
}

// Count is n and the noun, plural unless n is 1: "1 slot", "3 slots".
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

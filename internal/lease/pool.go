package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"entgo.io/ent/dialect"

	"github.com/entflake/entflake/schema"
)

// The pool's own rows. Two rows of sys_sequence, beside the counter, hold
// what the slots alone cannot say:
//
//   - '__layout__' (schema.LayoutService): the layout and epoch of every
//     live slot, and the floor of the layout's time field (see layoutText).
//     Only the locked take writes it, holding it exclusively, after it has
//     made sure no slot of another layout is live; every claim reads it
//     with a shared lock and matches only if it still says what the take
//     read (sqlText.claim). So two layouts are never live at once.
//   - '__slots__' (schema.SlotsService): in worker_id, how many slot rows
//     were made (-1: not known yet, count them); in instance, the longest
//     TTL any holder has used and the end of a window during which rows
//     are made with a floor (see slotsText). Rows are made only by the
//     locked take, holding the row: so when the slot table has fewer rows
//     than were made, rows were deleted, perhaps while their holders lived
//     (a DELETE, a TRUNCATE, the table dropped and made again), and a row
//     made again must start above any promise its lost holder can have had.
//     No promise is ever acknowledged past the database's clock + the
//     holder's TTL (the cap of claim and renew), so the database's clock +
//     the longest TTL, at the moment the deletion is seen, is such a floor.
//
// The locked take is one transaction on the pinned connection (locked),
// which a take runs when a claim cannot go alone (conforms): the pool's
// rows missing, another layout, a longer TTL than recorded, a slot without
// a row, or TiDB (see claimShared). It costs a few statements more than a
// claim, and is rare: the first start of a pool, a change of layout,
// making rows (a chunk of rows at a time).

// chunkRows is how many slot rows the locked take makes at a time: the
// chunk of 1024 worker ids the wanted one is in, so that a pool of the
// default layout is made in one go, and a wide layout (up to 2^21 worker
// ids) only where it is used.
const chunkRows = chunkSide * chunkSide

// pool is what a slot's read says of the pool's own rows.
type pool struct {
	hasLayout  bool   // the '__layout__' row is there
	layoutText string // its instance (layoutText); "" when NULL
	layoutTTL  int64  // its worker_id: the copy of the longest TTL (ttlCopy)
	hasSlots   bool   // the '__slots__' row is there
	made       int64  // slot rows made; -1 when not known
	slotsText  string // its instance (slotsText)
	tidb       bool   // the server is TiDB (MySQL dialect only)
}

// conforms reports whether a claim may run alone, as one statement: the
// pool's rows are there, say this take's layout, record a TTL at least
// this take's, keep their copies of each other (the TTL in '__layout__',
// the layout in '__slots__': a pool last set up by an older entflake runs
// one locked take to write them), and the server's shared locks work (not
// TiDB). Inside the locked take, every claim conforms.
func (s *session) conforms(p pool) bool {
	if s.locked {
		return true
	}
	pt := parsePoolText(p.layoutText)
	layout, rng := pt.layout, pt.rng
	st := parseSlots(p.slotsText)
	// While the pool widens, every take is locked: it checks the rows of
	// the other layout that share its IDs (crossCheck).
	return pt.widen == "" && st.widen == "" &&
		p.hasLayout && p.hasSlots && p.made >= 0 && !p.tidb && layout == s.r.Layout &&
		st.layout == s.r.Layout && rng == s.r.rangeText() && st.rng == rng &&
		p.layoutTTL >= ttlCopy(st.ttl) && (s.r.Forever || st.ttl >= s.r.ttlMs())
}

// layoutText is the '__layout__' row's instance: the layout, then, when
// the pool has one, " range=" and its worker range (Request.Lo..Hi), and,
// after a change of layout, " floor=" and the lowest Unix ms its IDs may
// have, which rows made later start at. The range comes before the floor:
// an older entflake, which cuts the text at " floor=", then reads a layout
// that is not its own and that it cannot parse (a lost row, to it: rule 2
// of statements.go), never a floor of 0. While the pool widens (widen.go),
// " widen=" and the wider layout follow the range, its space written '@'.
func layoutText(layout, rng string, floor int64) string {
	return poolText{layout: layout, rng: rng, floor: floor}.String()
}

// poolText is a '__layout__' text taken apart.
type poolText struct {
	layout string // the layout and epoch ("0/10/12 2024-01-01T00:00:00.000Z")
	rng    string // the worker range, "lo-hi"; "" for none
	widen  string // the layout the pool widens to, "" for none
	floor  int64
}

func (p poolText) String() string {
	t := p.layout
	if p.rng != "" {
		t += " range=" + p.rng
	}
	if p.widen != "" {
		t += " widen=" + strings.ReplaceAll(p.widen, " ", "@")
	}
	if p.floor > 0 {
		t += " floor=" + strconv.FormatInt(p.floor, 10)
	}
	return t
}

func parsePoolText(t string) poolText {
	var p poolText
	layout, f, ok := strings.Cut(t, " floor=")
	if ok {
		p.floor, _ = strconv.ParseInt(f, 10, 64)
	}
	layout, w, _ := strings.Cut(layout, " widen=")
	p.widen = strings.ReplaceAll(w, "@", " ")
	p.layout, p.rng, _ = strings.Cut(layout, " range=")
	return p
}

// parseLayout reads a layoutText: the layout, and the floor (0 if none).
func parseLayout(t string) (layout string, floor int64) {
	p := parsePoolText(t)
	return p.layout, p.floor
}

// slots is the '__slots__' row's instance: "ttl=<ms> until=<ms>
// layout=<tag> range=<lo-hi>", the tag with its space written '@' (older
// entflakes, which write the first two, read past the others).
type slots struct {
	ttl   int64 // the longest TTL any holder used, ms
	until int64 // database Unix ms until which rows are made with a floor; 0: none
	// layout is a copy of the pool's layout and epoch (the '__layout__'
	// row's, without its floor), so that a lost '__layout__' row is put
	// back as it was; "" when none was written.
	layout string
	// rng is a copy of the pool's worker range ("" for none), and widen
	// of the layout it widens to, for the same day.
	rng, widen string
}

func (st slots) String() string {
	t := fmt.Sprintf("ttl=%d until=%d", st.ttl, st.until)
	if st.layout != "" {
		t += " layout=" + strings.ReplaceAll(st.layout, " ", "@")
	}
	if st.rng != "" {
		t += " range=" + st.rng
	}
	if st.widen != "" {
		t += " widen=" + strings.ReplaceAll(st.widen, " ", "@")
	}
	return t
}

// parseSlots reads a slots text; what it cannot read counts as zero (the
// next locked take writes it afresh, with its own TTL).
func parseSlots(t string) slots {
	var st slots
	for _, f := range strings.Fields(t) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "layout":
			st.layout = strings.ReplaceAll(v, "@", " ")
			continue
		case "range":
			st.rng = v
			continue
		case "widen":
			st.widen = strings.ReplaceAll(v, "@", " ")
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "ttl":
			st.ttl = n
		case "until":
			st.until = n
		}
	}
	return st
}

// learn keeps what this try decided of a pool in use (see seen): a
// later try of the take, after this one is rolled back, starts from it.
// lockedOnce calls it once its first count has decided, and deficit at
// every deletion window it finds, wherever in the take.
func (s *session) learn(st slots) {
	s.seen = seen{inUse: true, ttl: max(s.seen.ttl, st.ttl), until: max(s.seen.until, st.until)}
}

// layoutEpochMs is the epoch of a layout tag ("0/10/12 2024-01-01T00:00:00.000Z").
func layoutEpochMs(layout string) (int64, bool) {
	_, e, ok := strings.Cut(layout, " ")
	if !ok {
		return 0, false
	}
	t, err := time.Parse("2006-01-02T15:04:05.000Z", e)
	if err != nil {
		return 0, false
	}
	return t.UnixMilli(), true
}

// markers are the pool's rows as the locked take read them.
type markers struct {
	hasLayout, hasSlots bool
	layoutText          string
	layoutTTL           int64 // '__layout__''s worker_id: the longest TTL (ttlCopy)
	made                int64
	slotsText           string
	nowMs               int64
}

// errCommitLost marks a locked take whose COMMIT went unanswered.
var errCommitLost = errors.New("the commit's answer was lost")

// lockedTake runs decide on the slot workerID inside the locked take, and
// runs the whole transaction again after a conflict, within the deadline.
func (s *session) lockedTake(ctx context.Context, workerID int64, decide func(row) (Slot, bool, error)) (slot Slot, took bool, err error) {
	err = retryConflicts(ctx, func() error {
		var e error
		slot, took, e = s.lockedOnce(ctx, workerID, decide)
		return e
	})
	switch {
	case errors.Is(err, errCommitLost) && took:
		// The claim was inside a transaction whose COMMIT's answer was
		// lost: read the slot back, as for a claim that ran alone.
		return s.settle(ctx, slot, true, err)
	case err != nil && !answered(err) && ctx.Err() == nil && !errIsAny(err, errCommitLost, ErrFloorAhead, ErrHeld, ErrLayout, ErrRange):
		// A statement before the COMMIT went unanswered (the connection
		// broke): the server rolls the transaction back, nothing of it was
		// committed, and the take starts again on another connection.
		return Slot{}, false, fmt.Errorf("%w (the locked take's connection broke: %v)", errRetake, err)
	}
	return slot, took, err
}

// lockedOnce is one try of the locked take: it locks the pool's rows,
// changes the layout if it must, records a longer TTL, makes the slot's
// row (and its chunk's) if missing, and lets decide claim the slot, all in
// one transaction. decide's answers that the setup must outlive (a floor
// too far ahead, a held worker id, a miss) commit; an error of the
// database's rolls back.
func (s *session) lockedOnce(ctx context.Context, workerID int64, decide func(row) (Slot, bool, error)) (Slot, bool, error) {
	end, err := s.beginLocked(ctx)
	if err != nil {
		return Slot{}, false, err
	}
	s.deleted, s.ranged = nil, nil
	committed := false
	defer func() {
		if !committed {
			end(false)
		}
	}()
	m, err := s.lockMarkers(ctx)
	if err != nil {
		return Slot{}, false, err
	}
	if !m.hasLayout || !m.hasSlots {
		if _, err := s.x.ExecContext(ctx, s.q.seedMarkers); err != nil {
			return Slot{}, false, fmt.Errorf("seed the pool's rows: %w", err)
		}
		// Read again, locked: under READ COMMITTED another starter's rows
		// (not yet committed at the first read, which locked nothing)
		// show here once its seed has waited for them.
		if m, err = s.lockMarkers(ctx); err != nil {
			return Slot{}, false, err
		}
		if !m.hasLayout || !m.hasSlots {
			return Slot{}, false, errors.New("the pool's rows are missing after seeding them")
		}
	}
	st := parseSlots(m.slotsText)
	// A pool's row that a seed just put in, or that reads as nothing
	// (NULL, -1, a layout that does not parse: deleted or edited), has lost
	// what it knew (rule 2 of statements.go). A pool is new only when
	// nothing says it was used: no slot row, and neither pool row has what
	// a take writes. One pool row that does, beside one lost, means the slot
	// rows may have been deleted with it.
	layoutKnown, slotsKnown := m.known()
	used := layoutKnown || slotsKnown && (m.made > 0 || st.until > 0)
	lost := m.lost()
	// The longest TTL is kept in both rows (in '__layout__', its
	// worker_id): one deleted or edited, the other still knows it.
	st.ttl = max(st.ttl, m.layoutTTL)
	made, writeSlots := m.made, false
	// What an earlier try of this take saw outlives its rollback (a
	// deadlock the server broke by rolling this take back, a connection
	// cut before the COMMIT): a pool that try found in use is in use, and
	// its longest TTL and the floor it decided stand, though every trace
	// of the pool was deleted since. Only a take that never saw the pool
	// can find it new. A try that nothing undid decides the same floor
	// again (the rows it read, or the worst case at a later clock).
	if s.seen.inUse {
		used = true
		st.ttl = max(st.ttl, s.seen.ttl)
		if st.until < s.seen.until {
			st.until, writeSlots = s.seen.until, true
		}
	}
	if ttl := s.r.ttlMs(); st.ttl < ttl {
		// A Forever take records a TTL that never runs out: its slot is
		// never renewed, so a deletion of its row is never found by its
		// holder, and a row made again must never start below it.
		st.ttl, writeSlots = ttl, true
	}
	// Rows deleted since the last count are seen before anything else is
	// decided: a layout change must not run over them (changeLayout).
	var count, nowMs int64
	if err := s.x.QueryRowContext(ctx, s.q.countRows).Scan(&count, &nowMs); err != nil {
		return Slot{}, false, fmt.Errorf("count the slot rows: %w", err)
	}
	inUse := count > 0 || used
	switch {
	case len(lost) > 0 && inUse:
		// Rows may have been deleted unseen, and the layout's floor may be
		// gone: rows made from now on start above the worst case.
		worst, err := s.worstCase(ctx, nowMs, st.ttl)
		if err != nil {
			return Slot{}, false, err
		}
		st.until, made, writeSlots = max(st.until, worst), count, true
		s.deleted = append(s.deleted, Deleted{Markers: lost, Until: time.UnixMilli(st.until)})
	case made < count:
		// Rows this count did not know of: another instance made them (an
		// older entflake, which does not count), or the count was lost.
		// Count them, so that their deletion is seen.
		made, writeSlots = count, true
	case s.deficit(&st, &made, count, nowMs):
		writeSlots = true
	}
	if inUse {
		s.learn(st)
	}
	writeLayout := m.layoutTTL != ttlCopy(st.ttl)
	if !layoutKnown {
		// Put the '__layout__' row back as what survives says it was, and
		// write it, whatever this take then decides: a row left unreadable
		// would be found lost, and the window moved on, by every take.
		if m.layoutText, err = s.restoreLayout(ctx, st, inUse); err != nil {
			return Slot{}, false, err
		}
		writeLayout = true
	}
	// '__slots__' keeps a copy of the layout, for the day '__layout__' is
	// lost. The two rows are written together, in one transaction: when
	// the copy is unreadable or names another layout, '__layout__' may
	// have been edited by hand, and the slot rows decide (poolLayout;
	// rule 2 of statements.go).
	pt := parsePoolText(m.layoutText)
	layout, rng := pt.layout, pt.rng
	if pt.widen != st.widen {
		// The two rows disagree on a widening: one was edited. The
		// widening is the safe reading (its takes check the other
		// layout's rows; without it an old worker id's take reads none),
		// so it stands if either row names one from the pool's layout
		// (rule 2 of statements.go).
		if pt.widen == "" && st.layout == layout {
			pt.widen = st.widen
			m.layoutText, writeLayout = pt.String(), true
		}
		st.widen, writeSlots = pt.widen, true
	}
	if rng != st.rng {
		// The copy of the range differs: one row was edited, or written
		// by an entflake without ranges. The '__layout__' row, which
		// claims compare, says what the pool's range is.
		st.rng, writeSlots = rng, true
	}
	// refuse ends the locked take with a refusal err, after nothing but
	// reads: it keeps what the count found, and a row put back.
	refuse := func(err error) (Slot, bool, error) {
		if writeSlots || writeLayout {
			if err := s.writePoolRows(ctx, made, st, m.layoutText); err != nil {
				return Slot{}, false, err
			}
		}
		committed = true
		if cerr := end(true); cerr != nil && answered(cerr) {
			return Slot{}, false, fmt.Errorf("commit the locked take: %w", cerr)
		}
		return Slot{}, false, err
	}
	from := layout
	if !knownLayout(st.layout) || st.layout != layout {
		if from, err = s.poolLayout(ctx, layout, pt.widen, st.layout); err != nil {
			return Slot{}, false, err
		}
		if from == s.r.Layout || !knownLayout(st.layout) {
			// The copy was the edited row (the slot rows say this take's
			// layout), or lost: it says what the take found, never a
			// layout only the '__layout__' row claims, which a refusal
			// would then make both rows agree on.
			st.layout, writeSlots = from, true
		}
	}
	// A take of the layout the pool widens to is no change of layout
	// (widen.go): the claim checks the rows it shares IDs with.
	if from != s.r.Layout && !(pt.widen == s.r.Layout && from == layout) {
		// Rule 3: whether rows were deleted is read under the locks the
		// change relies on. countRows above locked nothing: a live holder's
		// row deleted since would be missing from the look for live slots
		// of the old layout, and from the floor.
		count, now, err := s.lockedCount(ctx)
		if err != nil {
			return Slot{}, false, err
		}
		if s.deficit(&st, &made, count, now) {
			writeSlots = true
		}
		nowMs = now
		floor, _, err := s.changeLayout(ctx, from, st, nowMs)
		if errors.Is(err, ErrLayout) {
			return refuse(err)
		}
		if err != nil {
			return Slot{}, false, err
		}
		// A change of layout ends a widening (none of its layouts was live).
		m.layoutText, st.layout, st.widen, writeSlots, writeLayout = layoutText(s.r.Layout, rng, floor), s.r.Layout, "", true, true
	}
	if mine := s.r.rangeText(); rng != mine {
		err := s.changeRange(ctx, rng)
		if err == nil && pt.widen != "" {
			// A range names worker ids of one layout: it does not move
			// while two are live.
			err = fmt.Errorf("%w: ours is %s, the pool's is %s, and the pool widens to %q: finish or cancel that first",
				ErrRange, rangeName(mine, s.r.Workers), rangeName(rng, s.r.Workers), pt.widen)
		}
		if errors.Is(err, ErrRange) {
			return refuse(err)
		}
		if err != nil {
			return Slot{}, false, err
		}
		p := parsePoolText(m.layoutText)
		p.rng = mine
		m.layoutText, st.rng, writeSlots, writeLayout = p.String(), mine, true, true
		if inUse {
			s.ranged = &rng // a new pool's first range is no change
		}
	}
	// The slot's row, made if missing, and the pool's rows written; then
	// read again: the claim compares the layout row and the beats as they
	// are now. A row that is gone at that read was deleted since this
	// take's count by another, which waited for no lock of this take's
	// (on PostgreSQL its reads lock nothing): it is made again as any
	// missing row is (rule 2), and makeRows's count finds the deletion, so
	// the row starts above the window of its holder. Rolling the take back
	// instead would lose what it learnt: with both pool rows lost and every
	// slot row deleted, the next try finds a new pool.
	w, err := s.read(ctx, workerID, nil)
	if err != nil {
		return Slot{}, false, err
	}
	for tries := 1; ; tries++ {
		if !w.exists {
			if made, err = s.makeRows(ctx, workerID, made, &st, m.layoutText); err != nil {
				return Slot{}, false, err
			}
			writeSlots = true
		}
		if !writeSlots && !writeLayout {
			break
		}
		if err := s.writePoolRows(ctx, made, st, m.layoutText); err != nil {
			return Slot{}, false, err
		}
		writeSlots, writeLayout = false, false
		if w, err = s.read(ctx, workerID, nil); err != nil {
			return Slot{}, false, err
		}
		if w.exists {
			break
		}
		if tries == 3 {
			return Slot{}, false, fmt.Errorf("slot %d has no row after the rows were made %d times", workerID, tries)
		}
	}
	if wd, ok := parseWidening(m.layoutText); ok {
		found, err := s.crossCheck(ctx, wd, &w, &st, &made)
		if err != nil {
			return Slot{}, false, err
		}
		if found {
			// Rows were found deleted under the cross-check's locks: the
			// pool records the window, as for a deficit counted above.
			if err := s.writePoolRows(ctx, made, st, m.layoutText); err != nil {
				return Slot{}, false, err
			}
		}
	}
	slot, took, derr := decide(w)
	if derr != nil && (answered(derr) || !errIsAny(derr, ErrFloorAhead, ErrHeld)) {
		return Slot{}, false, derr // a database error: roll back, and perhaps try again
	}
	committed = true
	if err := end(true); err != nil {
		if derr != nil {
			// A floor too far ahead, or a live holder: that was seen, and
			// stands whether or not the rows made were committed.
			return Slot{}, false, derr
		}
		if answered(err) {
			return Slot{}, false, fmt.Errorf("commit the locked take: %w", err)
		}
		return slot, took, fmt.Errorf("commit the locked take: %w: %w", errCommitLost, err)
	}
	for _, d := range s.deleted {
		if s.r.Deleted != nil {
			s.r.Deleted(d)
		}
	}
	if s.ranged != nil && s.r.RangeChanged != nil {
		s.r.RangeChanged(*s.ranged, s.r.rangeText())
	}
	s.deleted, s.ranged = nil, nil
	return slot, took, derr
}

// poolLayout is the layout a take changes from when the pool's two rows do
// not confirm each other: layout is what the '__layout__' row names, kept
// the copy in '__slots__' (unreadable, or another layout). A completed
// change moves every slot row to the new layout, so the slot rows that
// have a layout (held once) are the evidence: one of another layout than
// the take's makes the take a change from it, guarded as any change
// (refused while a slot of it lives), whatever '__layout__' says. Without
// such a row: a '__layout__' of another layout is a change from it, or
// from the copy if that names an earlier epoch (of two candidates, the
// earlier epoch floors the new layout higher: the safe one to be wrong
// with); a '__layout__' of the take's own layout stands when slot rows
// confirm it or no copy says otherwise; else the copy is taken, and the
// change guarded. While the pool widens (widen, the wider layout), rows of
// its two layouts are the pool's own, and no evidence of another.
func (s *session) poolLayout(ctx context.Context, layout, widen, kept string) (string, error) {
	groups, err := s.layoutsSeen(ctx)
	if err != nil {
		return "", err
	}
	other, mine := s.heldLayouts(groups, layout, widen)
	switch {
	case other != "":
		return other, nil
	case layout != s.r.Layout:
		if knownLayout(kept) && kept != s.r.Layout {
			if ce, _ := layoutEpochMs(kept); ce < epochOr(layout, ce+1) {
				return kept, nil
			}
		}
		return layout, nil
	case mine || !knownLayout(kept):
		return layout, nil
	default:
		return kept, nil
	}
}

// heldLayouts is what the slot rows once held say of the pool's layout
// (rows never held have none): other, the layout other than the take's
// with the highest promise ("" when none), and mine, whether any row has
// the take's. When the take's layout is one of a widening's two (from,
// to), rows of the other one are not another layout's.
func (s *session) heldLayouts(groups []layoutGroup, from, to string) (other string, mine bool) {
	pair := to != "" && (s.r.Layout == from || s.r.Layout == to)
	best := int64(-1)
	for _, g := range groups {
		switch {
		case !knownLayout(g.layout):
		case g.layout == s.r.Layout:
			mine = true
		case pair && (g.layout == from || g.layout == to):
		case g.maxPromise > best:
			other, best = g.layout, g.maxPromise
		}
	}
	return other, mine
}

// heldWidening is the widening the slot rows say the pool is in, when no
// pool row says so any more: rows held in two layouts of which one widens
// the other (newWidening). A change of layout moves every row to the new
// one, and a finish every row to the wider one, so rows of two such
// layouts are left only by a widening, or by a cancelled one, whose rows
// of the wider layout keep it: taken as a widening, the safe reading
// (every take checks the rows of the other layout that share its IDs;
// rule 2 of statements.go).
func heldWidening(groups []layoutGroup) (widening, bool) {
	for _, f := range groups {
		for _, t := range groups {
			if !knownLayout(f.layout) || !knownLayout(t.layout) || f.layout == t.layout {
				continue
			}
			if wd, err := newWidening(f.layout, t.layout); err == nil {
				return wd, true
			}
		}
	}
	return widening{}, false
}

// epochOr is layout's epoch, or def when it has none.
func epochOr(layout string, def int64) int64 {
	if e, ok := layoutEpochMs(layout); ok {
		return e
	}
	return def
}

// writePoolRows writes the pool's two rows: '__slots__' with the count of
// rows made and st, and '__layout__' with layout (its text) and, in its
// worker_id, the longest TTL (ttlCopy).
func (s *session) writePoolRows(ctx context.Context, made int64, st slots, layout string) error {
	if _, err := s.x.ExecContext(ctx, s.q.writeMarker, made, st.String(), schema.SlotsService); err != nil {
		return fmt.Errorf("write the pool's slot count: %w", err)
	}
	if _, err := s.x.ExecContext(ctx, s.q.writeMarker, ttlCopy(st.ttl), layout, schema.LayoutService); err != nil {
		return fmt.Errorf("write the pool's layout: %w", err)
	}
	return nil
}

// restoreLayout is the text of a lost '__layout__' row, put back from what
// survives: the copy of the layout in '__slots__' (st.layout), or else the
// layout the slot rows have (one of another layout than this take's if
// any: the change to this take's then runs as any change does, refused
// while a slot of it is live or the deletion's window lasts). Its floor is
// one above every promise in the table, in that layout's time frame: rows
// made later start above every ID the table says was promised. When
// nothing tells the layout (no copy; no slot row was ever held) and the
// pool was used (inUse), the rows never held are given the worst case as
// their promise: a holder of a row deleted with the '__layout__' row may
// have had any layout, and a row of this one that shares its worker bits
// must start above it.
func (s *session) restoreLayout(ctx context.Context, st slots, inUse bool) (string, error) {
	groups, err := s.layoutGroups(ctx)
	if err != nil {
		return "", err
	}
	layout, widen := st.layout, st.widen
	if !knownLayout(layout) {
		// The copy is lost with it: the slot rows say what the pool was.
		// A widening they show stands. Else another layout than the
		// take's wins: the change then goes through the guard of a change.
		wd, widens := heldWidening(groups)
		switch other, mine := s.heldLayouts(groups, "", ""); {
		case widens:
			layout, widen = wd.from, wd.to
		case other != "":
			layout = other
		case mine:
			layout = s.r.Layout
		default:
			layout = ""
		}
	}
	unknown := layout == ""
	if unknown {
		layout = s.r.Layout
	}
	floor := aboveEvery(groups, layout)
	if unknown && inUse {
		floor = max(floor, st.until+1)
		if _, err := s.x.ExecContext(ctx, s.q.raiseNever, floor-1, floor-1); err != nil {
			return "", fmt.Errorf("floor the slots never held: %w", err)
		}
	}
	return poolText{layout: layout, rng: st.rng, widen: widen, floor: floor}.String(), nil
}

// aboveEvery is the floor, in layout's time frame (Unix ms of its epoch),
// one above every promise of the slot rows groups describes, each moved
// from its layout's epoch (rows never held: layout's); 0 when none has a
// promise. A row made with it less one as its promise starts above every
// ID the table says was promised, whoever held it.
func aboveEvery(groups []layoutGroup, layout string) int64 {
	frame, _ := layoutEpochMs(layout)
	top := int64(-1) // the highest time field of any promise
	for _, g := range groups {
		e, ok := layoutEpochMs(g.layout)
		if !ok {
			e = frame
		}
		if g.maxPromise > 0 {
			top = max(top, g.maxPromise-e)
		}
	}
	if top < 0 {
		return 0
	}
	return top + frame + 1
}

// ttlCopy is the longest TTL as the '__layout__' row keeps it, in its
// worker_id (a 32-bit INT): ms, at most maxTTLCopy, which stands for "at
// least that" (a Forever slot's TTL never runs out).
func ttlCopy(ttl int64) int64 { return min(max(ttl, 0), maxTTLCopy) }

// maxTTLCopy is the largest TTL (ms) the '__layout__' row can keep: about
// 24.8 days, beyond any heartbeat's TTL (at most a day).
const maxTTLCopy = 1<<31 - 1

// worstCase is what rows made from now on must start above when a pool's
// row was lost (rule 2 of statements.go): the database's clock (nowMs)
// plus the longest TTL known (ttl, or what a live slot has left, if
// longer), and every promise in the table, in this take's time frame.
func (s *session) worstCase(ctx context.Context, nowMs, ttl int64) (int64, error) {
	if ttl >= maxTTLCopy {
		ttl = foreverMs // a Forever holder's, or one too long to tell apart
	}
	mine, ok := layoutEpochMs(s.r.Layout)
	if !ok {
		return 0, fmt.Errorf("layout %q has no epoch", s.r.Layout)
	}
	groups, err := s.layoutGroups(ctx)
	if err != nil {
		return 0, err
	}
	// Rows never held carry no layout: their promise is in the time frame
	// of whichever layout made them, taken as the earliest epoch in sight.
	low := mine
	for _, g := range groups {
		if e, ok := layoutEpochMs(g.layout); ok {
			low = min(low, e)
		}
	}
	worst := nowMs + ttl
	for _, g := range groups {
		if g.maxExpires < foreverMs {
			worst = max(worst, g.maxExpires) // a live slot's expiry: at least its TTL from its last write
		}
		e, ok := layoutEpochMs(g.layout)
		if !ok {
			e = low
		}
		worst = max(worst, g.maxPromise-e+mine)
	}
	return worst, nil
}

// layoutGroup is what the slot rows of one layout (or none) say.
type layoutGroup struct {
	layout                 string // "" for rows never held
	maxPromise, maxExpires int64
}

// layoutGroups reads the highest promise and expiry of the slot rows of
// each layout.
func (s *session) layoutGroups(ctx context.Context) ([]layoutGroup, error) {
	stmt := s.q.layoutMax
	if !s.tidb {
		stmt = s.q.layoutMaxLocked
	}
	return s.readGroups(ctx, stmt)
}

// layoutsSeen reads what layoutGroups reads, without its locks: for the
// layouts the slot rows have, which only a claim or a change of layout
// writes, and no claim commits while the locked take holds the pool's
// rows. (On MySQL the locking read would also lock the gaps between the
// rows, and hold an older entflake's insert of a missing row, which knows
// nothing of the pool's lock, until the take commits.)
func (s *session) layoutsSeen(ctx context.Context) ([]layoutGroup, error) {
	return s.readGroups(ctx, s.q.layoutMax)
}

func (s *session) readGroups(ctx context.Context, stmt string) ([]layoutGroup, error) {
	rows, err := s.x.QueryContext(ctx, stmt)
	if err != nil {
		return nil, fmt.Errorf("read the slots' promises: %w", err)
	}
	defer rows.Close()
	var out []layoutGroup
	for rows.Next() {
		var (
			l    sql.NullString
			p, x sql.NullInt64
		)
		if err := rows.Scan(&l, &p, &x); err != nil {
			return nil, fmt.Errorf("read the slots' promises: %w", err)
		}
		out = append(out, layoutGroup{layout: l.String, maxPromise: p.Int64, maxExpires: x.Int64})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the slots' promises: %w", err)
	}
	return out, nil
}

// knownLayout reports whether a '__layout__' text names a layout and its
// epoch.
func knownLayout(t string) bool {
	layout, _ := parseLayout(t)
	_, ok := layoutEpochMs(layout)
	return ok
}

// beginLocked starts the locked take's transaction on the pinned
// connection and points the session's statements at it; end commits (or
// rolls back) and points them back.
func (s *session) beginLocked(ctx context.Context) (end func(commit bool) error, err error) {
	restore := func() { s.x, s.locked = s.conn, false }
	switch s.r.Dialect {
	case dialect.Postgres:
		tx, err := s.conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return nil, fmt.Errorf("begin the locked take: %w", err)
		}
		bound := fmt.Sprintf("%dms", remaining(ctx, time.Millisecond).Milliseconds())
		if _, err := tx.ExecContext(ctx, pgLockWait, bound); err != nil {
			_ = tx.Rollback()
			return nil, fmt.Errorf("bound lock waits: %w", err)
		}
		s.x, s.locked = tx, true
		return func(commit bool) error {
			defer restore()
			if commit {
				return tx.Commit()
			}
			return tx.Rollback()
		}, nil
	case dialect.MySQL:
		if s.tidb {
			// TiDB takes a transaction's snapshot at its start, and its
			// plain reads would not see what the previous holder of the
			// lock committed: READ COMMITTED reads the latest rows at each
			// statement (TiDB has it for pessimistic transactions, its
			// default). MySQL and MariaDB need none: their snapshot is
			// taken at the first plain read, after lockMarkers' lock.
			if _, err := s.conn.ExecContext(ctx, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"); err != nil {
				return nil, fmt.Errorf("begin the locked take: %w", err)
			}
		}
		if _, err := s.conn.ExecContext(ctx, "START TRANSACTION"); err != nil {
			return nil, fmt.Errorf("begin the locked take: %w", err)
		}
	default:
		if _, err := s.conn.ExecContext(ctx, sqliteBegin); err != nil {
			return nil, fmt.Errorf("begin the locked take: %w", err)
		}
	}
	s.locked = true
	return func(commit bool) error {
		defer restore()
		var err error
		if commit {
			// COMMIT as a statement ends with ctx (see tx).
			if _, err = s.conn.ExecContext(ctx, "COMMIT"); err == nil {
				return nil
			}
		}
		// Rolled back for sure (rollbackConn), also after a COMMIT that
		// failed: the transaction may still be open, since
		// go-sql-driver/mysql and modernc.org/sqlite refuse a statement
		// whose context has ended without sending it. Pooled in it, the
		// connection would run its next user's statements (a take's
		// claim) inside this transaction, which the server rolls back,
		// theirs with it, whenever the connection closes. After a COMMIT
		// that was sent, the ROLLBACK finds no transaction, or a closed
		// connection. The connection is dropped only when the ROLLBACK
		// fails, not at once: on SQLite a connection to an in-memory
		// database is the database.
		if rerr := rollbackConn(ctx, s.conn); err == nil {
			err = rerr
		}
		return err
	}, nil
}

// known reports which of the pool's rows read as something: the
// '__layout__' row a layout that parses, the '__slots__' row a count and a
// TTL. A row missing, NULL, -1 or unparseable has lost what it knew.
func (m markers) known() (layout, slots bool) {
	return knownLayout(m.layoutText), m.hasSlots && m.made >= 0 && parseSlots(m.slotsText).ttl > 0
}

// lost names the pool's rows that have lost what they knew (see known).
// Only the locked take puts them back, from what survives and at its
// worst (rule 2 of statements.go): anything else that writes the pool's
// rows refuses while one is lost (operate), since writing back what it
// read would make a lost window, or a lost count, read as none.
func (m markers) lost() []string {
	layout, slots := m.known()
	var lost []string
	if !layout {
		lost = append(lost, schema.LayoutService)
	}
	if !slots {
		lost = append(lost, schema.SlotsService)
	}
	return lost
}

// lockMarkers reads the pool's rows with an exclusive lock.
func (s *session) lockMarkers(ctx context.Context) (markers, error) {
	rows, err := s.x.QueryContext(ctx, s.q.lockMarkers)
	if err != nil {
		return markers{}, fmt.Errorf("lock the pool's rows: %w", err)
	}
	defer rows.Close()
	m := markers{made: -1}
	for rows.Next() {
		var (
			name     string
			workerID int64
			text     sql.NullString
		)
		if err := rows.Scan(&name, &workerID, &text, &m.nowMs); err != nil {
			return markers{}, fmt.Errorf("lock the pool's rows: %w", err)
		}
		switch name {
		case schema.LayoutService:
			m.hasLayout, m.layoutText, m.layoutTTL = true, text.String, workerID
		case schema.SlotsService:
			m.hasSlots, m.made, m.slotsText = true, workerID, text.String
		}
	}
	if err := rows.Err(); err != nil {
		return markers{}, fmt.Errorf("lock the pool's rows: %w", err)
	}
	return m, nil
}

// changeLayout moves the pool from layout old to the take's, holding the
// pool's rows: no slot of another layout may be live, and every ID of the
// new layout must be above every ID any old layout can have issued, in
// the time field that the two share: every slot row of another layout
// takes a floor (Unix ms of the new layout) one above the highest time
// field of the promise of any such row, moved to the new epoch. An epoch
// moved later shifts it by the difference: the same time field means a
// later instant. Every slot row takes the new layout and that floor less
// one as its promise (see sqlText.convert). The floor it returns is for
// rows made later, and is one above every promise in the table, of any
// layout, this take's included: old is what the '__layout__' row said
// (or, lost, was put back as: restoreLayout), and when it disagrees with
// the rows, what it knew of the floor may be gone, and the table's
// promises are what survives of it (rule 2 of statements.go).
//
// above is the floor the old layouts' rows took (0 if none): one above
// every ID the old layouts can have issued, which is all a row of the new
// layout must start above when the '__layout__' row is known and its copy
// agrees (a widening's finish, widen.go).
//
// The caller has locked every slot row (lockedCount, widenCensus) and
// counted them under that lock, and st and nowMs are what that count
// found: a renewal of a row of another layout in flight (its UPDATE done,
// its COMMIT not) holds the row, and a read that judged the row by its
// expiry would not wait for it (PostgreSQL's and TiDB's READ COMMITTED
// lock only the rows that match in the statement's snapshot). Once they
// are locked, no renewal of theirs can commit before this transaction
// does, the look for live ones below sees the last that did, and no row
// can be deleted unseen (rule 3 of statements.go).
func (s *session) changeLayout(ctx context.Context, old string, st slots, nowMs int64) (floor, above int64, err error) {
	var (
		other  int64
		layout sql.NullString
	)
	err = s.x.QueryRowContext(ctx, s.q.liveOther, s.r.Layout, s.r.Layout).Scan(&other, &layout)
	switch {
	case err == nil:
		hint := ""
		if _, werr := newWidening(layout.String, s.r.Layout); werr == nil {
			hint = fmt.Sprintf(" (a wider worker field moves online: entflake widen -to %s)", strings.Fields(s.r.Layout)[0])
		}
		return 0, 0, fmt.Errorf("%w: ours is %q, and %s; services that share the tables must share the layout and epoch%s",
			ErrLayout, s.r.Layout, s.holder(ctx, other), hint)
	case !errors.Is(err, sql.ErrNoRows):
		return 0, 0, fmt.Errorf("look for live slots of another layout: %w", err)
	}
	groups, err := s.layoutGroups(ctx)
	if err != nil {
		return 0, 0, err
	}
	if st.until > nowMs {
		return 0, 0, fmt.Errorf("%w: ours is %q; slot rows were found deleted, and their holders may be live until %s: "+
			"the pool's layout (%q) cannot change before then", ErrLayout, s.r.Layout,
			time.UnixMilli(st.until).UTC().Format(time.RFC3339Nano), old)
	}
	mine, ok := layoutEpochMs(s.r.Layout)
	if !ok {
		return 0, 0, fmt.Errorf("layout %q has no epoch", s.r.Layout)
	}
	// A layout that cannot be read is taken to have the old layout's epoch
	// (or, without one, this take's).
	oldEpoch, ok := layoutEpochMs(old)
	if !ok {
		oldEpoch = mine
	}
	top, all := int64(-1), int64(-1) // the highest time field of any promise: of other layouts, of all
	for _, g := range groups {
		// Rows never held (no layout) have the promise they were made with:
		// above the IDs of deleted rows' holders, in the old layout's time
		// frame.
		epoch, ok := layoutEpochMs(g.layout)
		if !ok {
			epoch = oldEpoch
		}
		if g.maxPromise <= 0 {
			continue
		}
		all = max(all, g.maxPromise-epoch)
		if g.layout != s.r.Layout {
			// Rows of this layout floor their own next holders, in this
			// layout's time frame.
			top = max(top, g.maxPromise-epoch)
		}
	}
	if st.until > 0 {
		// Holders of rows found deleted, whose rows may not have been made
		// again, issued (in the old layout) up to until at most.
		top = max(top, st.until-oldEpoch)
	}
	floor = 0
	if top >= 0 {
		floor = top + mine + 1
	}
	if ahead := s.r.ahead(floor); floor > 0 && ahead > remaining(ctx, 0) {
		return 0, 0, fmt.Errorf("%w: ours is %q, and the pool's IDs (last layout %q) reach the time field of %s in our epoch, "+
			"%v ahead of this clock: IDs of ours would repeat them; keep the epoch, or wait until then",
			ErrLayout, s.r.Layout, old, time.UnixMilli(floor).UTC().Format(time.RFC3339Nano), ahead.Round(time.Millisecond))
	}
	below := max(floor-1, 0)
	l := s.r.Layout
	if _, err := s.x.ExecContext(ctx, s.q.convert, l, l, below, below, l, l, l, l, l, below); err != nil {
		return 0, 0, fmt.Errorf("move the slots to the new layout: %w", err)
	}
	above = floor
	if all >= 0 {
		floor = max(floor, all+mine+1)
	}
	return floor, above, nil
}

// changeRange moves the pool's worker range from old (the '__layout__'
// row's; "" for the whole layout) to the take's, holding the pool's rows:
// only while no slot is live, of any range, so that an instance started
// with another region's range (or none) is refused as long as the pool is
// in use, rather than moving the record that the pool's own instances are
// checked against. SetRange, the operator's, moves it while slots live.
// A range is a fact about other databases, which this one cannot see:
// the slot rows need no floor (a worker id's promise is its own, in any
// range).
func (s *session) changeRange(ctx context.Context, old string) error {
	if s.q.lockSlots != "" {
		// As in changeLayout: a renewal in flight holds its row, and the
		// look below waits for it.
		if _, err := s.drain(ctx, s.q.lockSlots); err != nil {
			return fmt.Errorf("lock the slots: %w", err)
		}
	}
	var live int64
	err := s.x.QueryRowContext(ctx, s.q.liveAny).Scan(&live)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("look for live slots: %w", err)
	}
	return fmt.Errorf("%w: ours is %s, the pool's is %s, and %s; instances that share the tables must share the range: "+
		"pass the pool's, or change the pool's with entflake range -set", ErrRange, rangeName(s.r.rangeText(), s.r.Workers),
		rangeName(old, s.r.Workers), s.holder(ctx, live))
}

// rangeName is a recorded range as an error names it.
func rangeName(rng string, workers int64) string {
	if rng == "" {
		return fmt.Sprintf("the whole layout (0..%d)", workers-1)
	}
	return strings.Replace(rng, "-", "..", 1)
}

// drain runs a query and reads its rows to the end (a locking read whose
// rows are not needed), and says how many there were.
func (s *session) drain(ctx context.Context, stmt string, args ...any) (n int64, err error) {
	rows, err := s.x.QueryContext(ctx, stmt, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

// makeRows makes the missing rows of the chunk that workerID is in, free
// and never held, and returns the new count of rows made (made is the count
// so far). The chunk's rows, the count of all rows, their lowest promise
// and the database's clock are read in one statement, one snapshot: a row
// deleted after it is left missing, and found by the next count. Rows are
// made with a promise of at least the pool's until (see deficit): above
// any promise a lost holder of a deleted row can have had, whichever chunk
// its row was in; once until has passed, that costs no wait. And at least
// the layout's floor less one, from the '__layout__' row (layoutRow), and
// the lowest promise of any row: a change of layout gives every row at
// least its floor less one, and no write lowers a promise below that, so
// the rows remember the floor should the '__layout__' row lose it (an edit
// that leaves it readable). The lowest promise is most often a row never
// held, at 0, or a release long past: it costs nothing.
func (s *session) makeRows(ctx context.Context, workerID, made int64, st *slots, layoutRow string) (int64, error) {
	lo := workerID - workerID%chunkRows
	hi := min(lo+chunkRows, s.r.Workers) - 1
	have := map[int64]bool{}
	var (
		count, nowMs int64
		lowest       sql.NullInt64
	)
	rows, err := s.x.QueryContext(ctx, fmt.Sprintf(s.q.chunkRows, lo, hi))
	if err != nil {
		return 0, fmt.Errorf("read the chunk's slot rows: %w", err)
	}
	for rows.Next() {
		var id sql.NullInt64
		if err := rows.Scan(&id, &count, &lowest, &nowMs); err != nil {
			rows.Close()
			return 0, fmt.Errorf("read the chunk's slot rows: %w", err)
		}
		if id.Valid {
			have[id.Int64] = true
		}
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return 0, fmt.Errorf("read the chunk's slot rows: %w", err)
	}
	rows.Close()
	if count > made {
		made = count // rows another instance made (see lockedOnce)
	} else {
		s.deficit(st, &made, count, nowMs)
	}
	_, layoutFloor := parseLayout(layoutRow)
	promise := max(layoutFloor-1, st.until, lowest.Int64, 0)
	var missing []int64
	for id := lo; id <= hi; id++ {
		if !have[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return made, nil
	}
	if _, err := s.x.ExecContext(ctx, s.makeRowsText(lo, missing, promise)); err != nil {
		return 0, fmt.Errorf("make slot rows %d..%d: %w", lo, hi, err)
	}
	if nowMs < st.until {
		s.deleted = append(s.deleted, Deleted{WorkerIDs: missing, Until: time.UnixMilli(st.until)})
	}
	// Every row that was missing is there now, made by this statement or,
	// skipped by it, by another instance since the read: all are counted,
	// so that the deletion of any is found (a row deleted in between makes
	// the next count read a deletion, which costs a floor and never a
	// duplicate).
	return made + int64(len(missing)), nil
}

// makeRowsText is the statement that makes the slot rows of ids (at least
// one, ascending, all in the chunk that starts at lo), free, never held,
// with promise: makeRows, or on MySQL and MariaDB makeRowsListed (see
// both in statements.go). TiDB speaks MySQL's dialect and has no
// statement-based binary log: it takes makeRows.
func (s *session) makeRowsText(lo int64, ids []int64, promise int64) string {
	return s.q.makeRowsText(lo, ids, promise, s.q.makeRowsListed != "" && !s.tidb)
}

// makeRowsText is makeRows with ids written as runs of consecutive worker
// ids, or, listed, makeRowsListed with a row for each id. A run of at
// least chunkSide ids is one makeRange; the ids of shorter runs go into one
// makeList. The server tests each of the chunk's 1,024 ids against every
// condition, so a chunk with rows missing here and there, one run each,
// would cost it hundreds of BETWEENs an id (every other row missing:
// PostgreSQL 64-75 ms, SQLite 24-27, TiDB 117-129, against 4-8, 2 and 27
// with the list); a whole chunk stays one BETWEEN, and there are at most
// chunkRows/chunkSide of them.
func (q *sqlText) makeRowsText(lo int64, ids []int64, promise int64, listed bool) string {
	var b strings.Builder
	if listed {
		b.WriteString(q.makeRowsListed)
		for i, id := range ids {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, q.makeRow, id, promise)
		}
		b.WriteString(q.makeRowsListedEnd)
		return b.String()
	}
	var conds, short []string
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if j-i+1 < chunkSide {
			for _, id := range ids[i : j+1] {
				short = append(short, strconv.FormatInt(id, 10))
			}
		} else {
			conds = append(conds, fmt.Sprintf(q.makeRange, ids[i], ids[j]))
		}
		i = j + 1
	}
	if len(short) > 0 {
		conds = append(conds, fmt.Sprintf(q.makeList, strings.Join(short, ", ")))
	}
	return fmt.Sprintf(q.makeRows, lo, promise, strings.Join(conds, " OR "))
}

// deficit compares the slot rows there are (count, at the database's
// clock nowMs) with the rows made: fewer means rows were deleted, perhaps
// while their holders lived. Then until moves to the database's clock +
// the longest TTL, above any promise those holders can have had (the cap),
// and made to the count; it reports whether it changed them. until never
// goes back: rows made after it has passed still start above it, so a
// deleted row made again later, in whatever chunk, never starts below its
// lost holder's promise, whatever the next holder's clock reads.
func (s *session) deficit(st *slots, made *int64, count, nowMs int64) bool {
	if count >= *made {
		return false
	}
	ttl := st.ttl
	if ttl <= 0 && !s.r.Forever {
		ttl = s.r.ttlMs()
	}
	st.until = max(st.until, nowMs+ttl)
	*made = count
	s.learn(*st) // a window a later try must not forget (see seen)
	return true
}

// lockedCount locks every slot row and counts them under that lock, then
// reads the database's clock (rule 3 of statements.go). countRows, which
// the locked take runs first, locks nothing: a row deleted after it is
// seen by the locked reads that follow (they find no row) and not by the
// count, and a decision that rests on "no row was deleted" (a change of
// layout, a cross-check that finds a row missing) would rest on a fact no
// longer true when its write lands. Under the lock no row can go until
// the take commits, and the clock read after it is above every renewal of
// a row deleted before: the window deficit sets from it covers their
// promises (the cap). The count is of the rows the locking read returns,
// not a COUNT of the transaction's snapshot, which MySQL's REPEATABLE
// READ took at countRows. SQLite needs no lock: the locked take holds the
// write lock, and countRows is the count.
func (s *session) lockedCount(ctx context.Context) (count, nowMs int64, err error) {
	locked := int64(0)
	if s.q.lockSlots != "" {
		if locked, err = s.drain(ctx, s.q.lockSlots); err != nil {
			return 0, 0, fmt.Errorf("lock the slots: %w", err)
		}
	}
	if err := s.x.QueryRowContext(ctx, s.q.countRows).Scan(&count, &nowMs); err != nil {
		return 0, 0, fmt.Errorf("count the slot rows: %w", err)
	}
	if s.q.lockSlots != "" {
		count = locked
	}
	return count, nowMs, nil
}

// Deleted says that slot rows were found deleted and made again, or that a
// pool's row was found missing or unreadable beside slot rows: their
// holders, if they lived, may have been promised IDs up to Until, so the
// rows' next holders start above it.
type Deleted struct {
	// WorkerIDs are the worker ids whose rows were made again with the
	// floor (every missing row of the chunk: which of them were deleted and
	// which were never made is not known); none when Markers says why.
	WorkerIDs []int64
	// Markers names the pool's rows ('__layout__', '__slots__') found
	// missing or unreadable: what they knew (the layout's floor, the count
	// of rows made, the longest TTL) is taken at its worst.
	Markers []string
	// Until is the floor, on the database's clock.
	Until time.Time
}

// errIsAny reports whether err is any of targets.
func errIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"entgo.io/ent/dialect"

	"github.com/entflake/entflake/chaos/internal/wire"
	"github.com/entflake/entflake/internal/dbtest"
	"github.com/entflake/entflake/internal/holddriver"
	"github.com/entflake/entflake/internal/lease"
	"github.com/entflake/entflake/schema"
)

// The statement matrix. A delayed statement is the fault that random
// minutes rarely line up and reviewers kept finding by hand: a read whose
// answer comes late, a claim that reaches the database after the row it
// read was taken, deleted and made again. Each cell holds one statement of
// one starter X (internal/holddriver, in X's own process: on its way to
// the database, "before", or its answer on the way back, "answer"), and
// while it is held another actor takes one action on the pool; then the
// statement goes on, every generator issues for a while, and the round is
// checked, IDs for collisions and the history by the oracle. A cell is
// named statement/phase×action and seeded from its name and CHAOS_SEED:
// CHAOS_MATRIX=claim/before×delete-row reruns it.
//
// The pool each cell starts from has a history, so that a floor lost
// shows up: G held worker g (512..1022) of the layout 0/10/12 and closed;
// in most cells C then changed the pool's layout to 0/11/11, in which X
// and the other actors take w = 2g, whose IDs are a quarter of g's. X's
// clock is behind by half a second to a second and a half, so that a
// floor lost puts X's IDs among G's.

// mctx is the pool's history before X starts.
type mctx int

const (
	// ctxPlain: G issued on worker g of 0/10/12 and closed; the pool has
	// that layout (X, with 0/11/11, changes it).
	ctxPlain mctx = iota
	// ctxChanged: then C took and released a worker id of 0/11/11, which
	// changed the pool's layout; the rows of 1024..2047 (w's chunk) are
	// not made yet.
	ctxChanged
	// ctxChangedMade: then M took and released worker id 2047, which made
	// w's chunk: w's row exists and was never held.
	ctxChangedMade
	// ctxLive: as ctxPlain, but G stays open: X's change of layout meets a
	// live holder of the old one, whose IDs w shares (g = w/2).
	ctxLive
	// ctxWidening: as ctxPlain, then the operator starts widening the pool
	// to 0/11/11 (lease.Widen): X is a starter of the wider layout, whose
	// take reads g's row (crossCheck).
	ctxWidening
	// ctxWideningLive: as ctxWidening, but G stays open: X's take meets a
	// live row of the old layout whose IDs w shares.
	ctxWideningLive
	// ctxWidenedNew: as ctxWidening, then N took w in the wider layout and
	// closed: w's row holds a promise of the wider layout, which a cancel
	// must give the old rows (raiseBelow).
	ctxWidenedNew
	// ctxNewRowLost: as ctxWidening, then N takes w in the wider layout and
	// issues; w's row is deleted under it; P, a starter of the old layout
	// on g's sibling, counts the rows (a deficit: the deletion's window
	// opens); N and P close, and the window passes. w's row is gone with
	// N's promise: only the window says how far N issued (issue 32's
	// finding 3, for a cancel).
	ctxNewRowLost
	// ctxMarkersLost: as ctxChangedMade, then both of the pool's rows are
	// deleted ('__layout__' and '__slots__'): X's locked take seeds them
	// and floors what it cannot know (rule 2).
	ctxMarkersLost
	// ctxHeldLost: as ctxMarkersLost, and every slot row ever held deleted
	// too: the rows never held that survive say nothing of the layout, and
	// X's take gives them the worst case as their promise (raiseNever).
	ctxHeldLost
	// ctxRange: as ctxChangedMade, but M leased with the worker range
	// 1024..2047, which the pool records: X, with none, moves the record
	// (changeRange), while no slot is live.
	ctxRange
)

// ctxNames name the contexts in cell names ("claim/before×none@widening")
// and notes.
var ctxNames = map[mctx]string{ctxPlain: "plain", ctxChanged: "changed", ctxChangedMade: "made", ctxLive: "live",
	ctxWidening: "widening", ctxWideningLive: "widening-live", ctxWidenedNew: "widened-new", ctxNewRowLost: "new-row-lost",
	ctxMarkersLost: "markers-lost", ctxHeldLost: "held-lost", ctxRange: "range"}

// xOp is what X does that sends the statement.
type xOp int

const (
	xTake    xOp = iota // X opens WithWorkerID(w)
	xLease              // X leases; the counter hands w out next
	xRenew              // X holds w; its next renewal
	xRelease            // X holds w, and closes
	// The operator's steps, run by the test's own process through a pool
	// whose statements it holds (operator); Y then takes the worker id the
	// step floored and issues.
	xCancel // the operator cancels the widening; Y (0/10/12) takes g
	xFinish // the operator finishes the widening; Y (0/11/11) takes w
)

// mstmt is a statement of the lease, as the matrix holds it.
type mstmt struct {
	name     string
	patterns []string // its text contains one of them (sqlText's statements; PostgreSQL's placeholders are $n)
	// ctxs are the pool's histories in which X's op sends the statement:
	// the row's own first (its cells' names carry no context), then those
	// of the matrix's third dimension (named "...@<context>").
	ctxs []mctx
	op   xOp
	// low: G's worker id is drawn from 256..511, so that w = 2g is a row of
	// the first chunk, made (and never held) before X starts.
	low bool
	// notOn are the dialects that never send the statement (SQLite's
	// locked take holds the database's write lock, and locks no row): the
	// row has no cells there.
	notOn []string
	// drop: the row has cells of the phase "drop" too, a write that does
	// not commit (held before it is sent, then never sent: the connection
	// is cut, and the server rolls back its transaction) while its slot
	// still reads as it did.
	drop bool
	// cause: a statement of X's (these patterns) is cut off once before
	// the row's (dropped: never sent), so that X sends the row's: the
	// read-back of a claim or a renewal whose answer was lost.
	cause []string
	// ahead: X's clock runs 3 s ahead of the database's, past its Margin,
	// so that the cap refuses its renewals' promises.
	ahead bool
	// liveAhead: the counter's next worker ids, w .. w+liveAhead-1, are
	// held live by others before X leases: its probes of the counter miss
	// and it searches the table.
	liveAhead int64
	// censusGap: X leases in the worker range w-4..w; the four worker ids
	// below w are held live by others and w's row is deleted, so the
	// counter's probes and the search's candidates find nothing free, and
	// the search's count (census) names w, a row missing, which X then
	// takes through the locked take.
	censusGap bool
}

var mstmts = []mstmt{
	// the slot's read, the row there
	{name: "lookup", patterns: []string{"SELECT s.fence, s.beats"}, op: xTake,
		ctxs: []mctx{ctxChangedMade, ctxChanged, ctxPlain, ctxLive, ctxWidening, ctxWideningLive, ctxWidenedNew, ctxMarkersLost, ctxRange}},
	// ... the row not made yet
	{name: "lookup-unmade", patterns: []string{"SELECT s.fence, s.beats"}, op: xTake,
		ctxs: []mctx{ctxChanged}},
	// ... of a pool X then changes the layout of
	{name: "lookup-old", patterns: []string{"SELECT s.fence, s.beats"}, op: xTake, low: true,
		ctxs: []mctx{ctxPlain}},
	// the compare-and-set alone
	{name: "claim", patterns: []string{"SET fence = fence + 1, beats = beats + 1, service_name"}, op: xTake, drop: true,
		ctxs: []mctx{ctxChangedMade, ctxChanged, ctxPlain, ctxWidening, ctxWidenedNew, ctxMarkersLost, ctxRange}},
	{name: "counter", patterns: []string{"SET worker_id = LAST_INSERT_ID(", "SET worker_id = (worker_id + 1)"}, op: xLease,
		ctxs: []mctx{ctxChangedMade, ctxChanged, ctxPlain, ctxWidening, ctxMarkersLost, ctxRange}},
	// the locked take's lock
	{name: "locked", patterns: []string{"WHERE service_name IN ('" + schema.LayoutService + "'"}, op: xTake,
		ctxs: []mctx{ctxChanged, ctxPlain, ctxLive, ctxWidening, ctxWideningLive, ctxWidenedNew, ctxMarkersLost, ctxRange}},
	// its count of the rows
	{name: "count", patterns: []string{"SELECT COUNT(*), "}, op: xTake,
		ctxs: []mctx{ctxChanged, ctxPlain, ctxLive, ctxWidening, ctxWideningLive, ctxWidenedNew, ctxMarkersLost, ctxRange}},
	// its rows made
	{name: "make-rows", patterns: []string{"INSERT INTO sys_sequence_slot"}, op: xTake,
		ctxs: []mctx{ctxChanged, ctxPlain, ctxWidening}},
	// its COMMIT
	{name: "commit", patterns: []string{"COMMIT"}, op: xTake, drop: true,
		ctxs: []mctx{ctxChanged, ctxPlain, ctxWidening, ctxWidenedNew, ctxMarkersLost, ctxRange}},
	// X's change of layout
	{name: "layout-change", patterns: []string{"SET promise_ms = CASE WHEN"}, op: xTake,
		ctxs: []mctx{ctxPlain}},
	{name: "write-marker", patterns: []string{"SET worker_id = ?, instance", "SET worker_id = $1, instance"}, op: xTake,
		ctxs: []mctx{ctxPlain, ctxChanged, ctxMarkersLost, ctxRange}},
	{name: "renew", patterns: []string{"promise_ms = GREATEST(promise_ms", "promise_ms = max(promise_ms"}, op: xRenew, drop: true,
		ctxs: []mctx{ctxChangedMade, ctxChanged, ctxPlain, ctxWidening, ctxWidenedNew, ctxMarkersLost, ctxRange}},
	// a renewal's COMMIT (its UPDATE ran)
	{name: "renew-commit", patterns: []string{"COMMIT"}, op: xRenew, drop: true,
		ctxs: []mctx{ctxChangedMade, ctxWidening, ctxRange}},
	// a release's COMMIT
	{name: "release-commit", patterns: []string{"COMMIT"}, op: xRelease, drop: true,
		ctxs: []mctx{ctxChangedMade, ctxWidening}},
	{name: "release", patterns: []string{"expires_ms = 0, promise_ms"}, op: xRelease, drop: true,
		ctxs: []mctx{ctxChangedMade, ctxChanged, ctxPlain, ctxWidening, ctxWidenedNew, ctxMarkersLost, ctxRange}},
	// The statements of a change of layout over a live holder of the old
	// one (issue 32's finding 4: a row deleted between the count and the
	// look for live holders), of a widening's take, cancel and finish
	// (findings 1 and 3), of a take over both pool rows lost (finding 2's
	// state), of a chunk's making and of a change of the worker range.
	// a change of layout's look for live slots
	{name: "live-other", patterns: []string{"WHERE (layout < "}, op: xTake,
		ctxs: []mctx{ctxLive, ctxPlain}},
	// its lock of every row (rule 3)
	{name: "lock-slots", patterns: []string{"SELECT worker_id FROM sys_sequence_slot FOR UPDATE"}, op: xTake, notOn: []string{dialect.SQLite},
		ctxs: []mctx{ctxLive, ctxPlain, ctxRange}},
	// its read of each layout's promises
	{name: "layout-max", patterns: []string{"SELECT layout, MAX(promise_ms), MAX(expires_ms)"}, op: xTake,
		ctxs: []mctx{ctxPlain, ctxMarkersLost}},
	// a widening's cross-check
	{name: "cross-rows", patterns: []string{"SELECT worker_id, expires_ms, promise_ms, instance, layout, "}, op: xTake,
		ctxs: []mctx{ctxWideningLive, ctxWidening, ctxWidenedNew}},
	// its fence of what it floors above
	{name: "fence-range", patterns: []string{"SET fence = fence + 1, beats = beats + 1, updated_at"}, op: xTake,
		ctxs: []mctx{ctxWidening, ctxWidenedNew}},
	// a cancel's floor of the old rows
	{name: "raise-below", patterns: []string{"(SELECT m FROM (SELECT COALESCE(MAX(promise_ms), 0) AS m"}, op: xCancel,
		ctxs: []mctx{ctxWidenedNew, ctxWidening, ctxNewRowLost}},
	// a finish's census
	{name: "live-outside", patterns: []string{"AND (s.worker_id < "}, op: xFinish,
		ctxs: []mctx{ctxWidening, ctxWidenedNew}},
	// the pool rows put back
	{name: "seed-markers", patterns: []string{"VALUES ('" + schema.LayoutService + "', 0, NULL, "}, op: xTake,
		ctxs: []mctx{ctxMarkersLost, ctxHeldLost}},
	// the floor of rows never held
	{name: "raise-never", patterns: []string{"WHERE layout IS NULL AND promise_ms < "}, op: xTake,
		ctxs: []mctx{ctxHeldLost}},
	// a chunk's read before its rows are made
	{name: "chunk-rows", patterns: []string{"(SELECT MIN(promise_ms) FROM sys_sequence_slot WHERE expires_ms < "}, op: xTake,
		ctxs: []mctx{ctxChanged, ctxPlain, ctxWidening}},
	// Statements sent only after another's answer was lost, a renewal
	// refused its promise, or probes of the counter missed: a claim's
	// read-back, a renewal's, a renewal that keeps its promise, the search.
	{name: "read-back", patterns: []string{"SELECT fence, instance FROM sys_sequence_slot WHERE worker_id = "}, op: xTake,
		cause: []string{"SET fence = fence + 1, beats = beats + 1, service_name"}, ctxs: []mctx{ctxChangedMade}}, // (a claim inside the locked take settles with its COMMIT)
	{name: "holder", patterns: []string{"SELECT fence, service_name, instance, expires_ms, promise_ms, layout, "}, op: xRenew,
		cause: []string{"COMMIT"}, ctxs: []mctx{ctxChangedMade, ctxWidening}},
	{name: "renew-keep", patterns: []string{" + ?, updated_at = ", " + $1, updated_at = "}, op: xRenew, ahead: true,
		ctxs: []mctx{ctxChangedMade}},
	{name: "candidates", patterns: []string{"SELECT worker_id, fence, beats, promise_ms, "}, op: xLease, liveAhead: 3,
		ctxs: []mctx{ctxChangedMade, ctxRange}},
	// the search's count, which names a missing row of the range
	{name: "census", patterns: []string{"(SELECT MIN(a.worker_id + 1) FROM sys_sequence_slot AS a"}, op: xLease, censusGap: true,
		ctxs: []mctx{ctxChangedMade}},
	// a change of the range's look for live slots
	{name: "live-any", patterns: []string{"SELECT worker_id FROM sys_sequence_slot WHERE expires_ms >= "}, op: xTake,
		ctxs: []mctx{ctxRange}},
}

var phases = []string{"before", "answer"}

// rowPhases are the phases of a row's cells: before and answer, and drop
// for the rows that have it.
func rowPhases(st mstmt) []string {
	if st.drop {
		return append(phases[:len(phases):len(phases)], "drop")
	}
	return phases
}

// actions are what another actor does while X's statement is held (see
// cell.act).
var actions = []string{"none", "take", "renew", "release", "delete-row", "delete-rows", "delete-layout", "edit-layout",
	"delete-slots", "edit-slots", "delete-row-layout", "forge-layout", "widen", "narrow", "epoch", "ttl", "clock-step",
	"widen-online", "lost-operate", "delete-cross", "cut-off"}

// actionNotOn are the dialects an action cannot be taken on (none now).
var actionNotOn = map[string][]string{}

// ciCells are the cells CI runs on each database: the cells that found
// issue 22's holes on the code before its fixes (the first six; the
// delete-row-layout cell, the class a review of the first fixes found by
// hand; the forge-layout cell, the class the long run's oracle found: see
// chaos/testdata/matrix-before.txt), and every statement and every action
// at least once. The whole matrix: CHAOS_MATRIX=all.
var ciCells = []string{
	"claim/before×delete-row", "lookup/answer×delete-rows", "lookup-unmade/answer×delete-layout",
	"locked/before×edit-layout", "claim/before×delete-slots", "counter/answer×edit-slots",
	"count/answer×take", "make-rows/before×renew", "commit/answer×release", "layout-change/before×widen",
	"write-marker/answer×narrow", "renew/before×delete-row", "release/answer×epoch", "claim/answer×ttl",
	"lookup/before×clock-step", "renew/answer×none", "lookup-unmade/before×edit-slots",
	"lookup-old/before×delete-row-layout", "lookup-unmade/answer×forge-layout",
	// Issue 25's online widening: X's claim, renewal and first read held
	// while the operator starts a widening, a starter of the wider layout
	// takes a worker id whose IDs are X's (or G's), and the operator tries
	// to finish.
	"claim/before×widen-online", "renew/answer×widen-online", "lookup-old/answer×widen-online",
	// Issue 32's range-online class, found by the long run's oracle: an
	// operator's change over a lost '__slots__' row.
	"claim/before×lost-operate",
	// Issue 32's findings as cells: a live holder's row deleted after the
	// take's count and before a change of layout looks for live holders
	// (finding 4) or a widening's cross-check reads the other layout's
	// rows (finding 1); a cancel over a new row deleted (finding 3); a
	// take over both pool rows lost (finding 2's state); and every other
	// statement of the widening, the cancel, the finish and the range once.
	"count/answer×delete-cross@live", "count/answer×delete-cross@widening-live", "raise-below/before×none@new-row-lost",
	"seed-markers/answer×take", "raise-never/before×none", "lock-slots/answer×renew", "layout-max/before×release",
	"fence-range/answer×renew", "live-outside/before×take", "chunk-rows/answer×delete-layout", "live-any/before×take",
	// Writes that do not commit while the slot still reads live: a
	// renewal's COMMIT cut off (the server rolls its UPDATE back), and the
	// holder then cut off for its TTL while another takes the slot (issue
	// 32's surviving mutant, 08); a claim and a release cut off.
	"renew-commit/drop×cut-off", "claim/drop×take", "release-commit/drop×take",
	// The read-backs after a lost answer, a capped renewal, the search
	// and its count.
	"read-back/answer×take", "holder/before×delete-row", "renew-keep/answer×none", "candidates/before×release",
	"census/answer×take",
	// The PostgreSQL cube's find: every slot row deleted over both pool
	// rows lost, after the take's count and before its read again (which
	// waits for no lock of the take's there). The take rolled back what it
	// had learnt and found a new pool; it now makes the row again.
	"write-marker/before×delete-rows@markers-lost",
}

var (
	layoutOld  = layout{0, 10, 12}
	layoutNew  = layout{0, 11, 11}
	layoutWide = layout{0, 12, 10}
)

// cellName names a cell: statement/phase×action, and "@context" for a
// context other than the row's own.
func cellName(st mstmt, phase, action string, ctx mctx) string {
	n := st.name + "/" + phase + "×" + action
	if ctx != st.ctxs[0] {
		n += "@" + ctxNames[ctx]
	}
	return n
}

// allCells is the whole cube: every row, phase, action and context of the
// row's.
func allCells() []string {
	var all []string
	for _, st := range mstmts {
		for _, ctx := range st.ctxs {
			for _, ph := range rowPhases(st) {
				for _, a := range actions {
					all = append(all, cellName(st, ph, a, ctx))
				}
			}
		}
	}
	return all
}

// matrixCells lists the cells CHAOS_MATRIX selects (selectCells), less
// those named in the file CHAOS_MATRIX_SKIP names, one a line, "#"
// starting a comment line (the cells an interrupted run of the cube got
// through, to go on from there: chaos/testdata/cube-*.txt).
func matrixCells(t *testing.T) []string {
	cells := slices.Clone(selectCells(t)) // DeleteFunc below must not touch ciCells
	f := os.Getenv("CHAOS_MATRIX_SKIP")
	if f == "" {
		return cells
	}
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatalf("CHAOS_MATRIX_SKIP: %v", err)
	}
	all := allCells()
	skip := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			if !slices.Contains(all, line) {
				t.Fatalf("CHAOS_MATRIX_SKIP=%s names %q, which is no cell of the matrix", f, line)
			}
			skip[line] = true
		}
	}
	n := len(cells)
	left := slices.DeleteFunc(cells, func(c string) bool { return skip[c] })
	t.Logf("CHAOS_MATRIX_SKIP=%s: %d of %d cells skipped, %d left", f, n-len(left), n, len(left))
	if len(left) == 0 {
		t.Fatalf("CHAOS_MATRIX_SKIP=%s leaves no cell to run", f)
	}
	return left
}

// selectCells lists the cells CHAOS_MATRIX selects: the CI cells when it
// is empty, every cell for "all", else those matching any of its
// comma-separated path.Match patterns.
func selectCells(t *testing.T) []string {
	sel := os.Getenv("CHAOS_MATRIX")
	all := allCells()
	switch sel {
	case "":
		for _, c := range ciCells {
			if !slices.Contains(all, c) {
				t.Fatalf("CI cell %q is not in the matrix", c)
			}
		}
		return ciCells
	case "all":
		return all
	}
	var out []string
	for _, c := range all {
		for _, p := range strings.Split(sel, ",") {
			if ok, err := path.Match(p, c); err != nil {
				t.Fatalf("CHAOS_MATRIX=%q: %v", sel, err)
			} else if ok {
				out = append(out, c)
				break
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("CHAOS_MATRIX=%q selects no cell", sel)
	}
	return out
}

func findCell(name string) (mstmt, string, string, mctx) {
	for _, st := range mstmts {
		for _, ctx := range st.ctxs {
			for _, ph := range rowPhases(st) {
				for _, a := range actions {
					if cellName(st, ph, a, ctx) == name {
						return st, ph, a, ctx
					}
				}
			}
		}
	}
	panic("no cell " + name)
}

// matrixTally counts a database's cells by result.
type matrixTally struct {
	mu                     sync.Mutex
	pass, fail, notApplied []string
	// excluded are the cells of a documented exclusion (newPool): run,
	// their breaches reported apart, neither a pass nor a failure.
	excluded []string
	// none are the cells of a statement the database's dialect never sends
	// (mstmt.notOn): not run, not counted as cells.
	none []string
}

func (m *matrixTally) add(name, result string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch result {
	case "pass":
		m.pass = append(m.pass, name)
	case "fail":
		m.fail = append(m.fail, name)
	case "excluded":
		m.excluded = append(m.excluded, name)
	default:
		m.notApplied = append(m.notApplied, name)
	}
}

func (m *matrixTally) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	slices.Sort(m.fail)
	slices.Sort(m.notApplied)
	slices.Sort(m.excluded)
	return fmt.Sprintf("%d cells: %d pass, %d fail %v, %d not applied %v, %d a documented exclusion (the pool made new) %v "+
		"(and %d of statements this dialect never sends)",
		len(m.pass)+len(m.fail)+len(m.notApplied)+len(m.excluded), len(m.pass), len(m.fail), m.fail, len(m.notApplied), m.notApplied,
		len(m.excluded), m.excluded, len(m.none))
}

// TestMatrix runs the statement matrix's cells (see matrixCells) on every
// database: each must apply its fault (its statement held, its action
// taken), write IDs, and show no duplicate and no oracle breach.
// CHAOS_MATRIX_PARALLEL cells run at once (2).
func TestMatrix(t *testing.T) {
	cells := matrixCells(t)
	seed := envSeed(t, 22)
	par := envInt(t, "CHAOS_MATRIX_PARALLEL", 2)
	childBin(t)
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		tally := &matrixTally{}
		sem := make(chan struct{}, par)
		t.Run("cells", func(t *testing.T) {
			for _, name := range cells {
				if st, _, a, _ := findCell(name); slices.Contains(st.notOn, b.Dialect) || slices.Contains(actionNotOn[a], b.Dialect) {
					tally.none = append(tally.none, name) // no such statement here: no cell
					continue
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					sem <- struct{}{}
					defer func() { <-sem }()
					res := runCell(t, b, name, seed)
					tally.add(name, res)
				})
			}
		})
		t.Logf("matrix on %s (seed %d): %s", b.Name, seed, tally)
	})
}

// runCell runs one cell and reports "pass", "fail" or "not applied" (a
// failure too: the cell proves nothing).
func runCell(t *testing.T, b dbtest.Backend, name string, seed uint64) string {
	st, phase, action, ctx := findCell(name)
	rep := newReport(b.Name)
	db := b.Fresh(t)
	createTables(t, db.DB, b.Dialect)
	cseed := seed ^ fnv64(name)
	r := newRound(t, b, db, cseed, rep)
	c := &cell{r: r, st: st, phase: phase, action: action, ctx: ctx, rng: rand.New(rand.NewPCG(cseed, 0x6d6174))}
	excluded := newPool(st, phase, action, ctx)
	if excluded { // as TestExclusions' rounds: every duplicate and breach reported apart
		r.excluded, r.excludeAll = append(r.excluded, func(dupGroup) bool { return true }), true
	}
	start := time.Now()
	err := c.run()
	r.quitAll()
	v := r.check()
	rep.add(r, v, time.Since(start))
	t.Logf("cell %s on %s (seed %d): %s\n%s", name, b.Name, cseed, c.notes(), rep)
	switch {
	case err != nil:
		t.Errorf("cell %s on %s: not applied: %v", name, b.Name, err)
		return "not applied"
	case v.ids == 0:
		t.Errorf("cell %s on %s: no ID written", name, b.Name)
		return "not applied"
	case excluded:
		t.Logf("cell %s on %s: the pool made new, a documented exclusion: %d duplicate IDs, %d oracle breaches, reported apart (not a pass)",
			name, b.Name, v.excluded, v.oracle.Breaches())
		return "excluded"
	case v.dups > 0 || v.disorder > 0 || v.oracle.Breaches() > 0:
		t.Errorf("cell %s on %s: %d duplicate IDs, %d out of order, %d oracle breaches (%d overlaps, %d outside)",
			name, b.Name, v.dups, v.disorder, v.oracle.Breaches(), v.oracle.Overlaps, v.oracle.Outside)
		return "fail"
	}
	return "pass"
}

// newPool reports whether a cell is the documented exclusion of a pool
// made new (docs/guarantees.md, "The pool's own rows"): both pool rows
// are lost in its context, and its action deletes every slot row while
// X's locked take has not yet counted them, or after that take's
// transaction rolled back. X's take then finds no trace of the pool (no
// slot row, no pool row with what a take writes), which is a new pool by
// definition, and the IDs of holders whose rows went with it may be issued
// again (chaos's wipe-tables exclusion). Two ways, one rule each:
//   - a statement sent before the locked take's count is held (lookup,
//     counter, the lock, the markers' seed, the count itself before it
//     runs): the deletion lands before X has seen the rows;
//   - a write of X's take dropped (never sent: its connection is cut, and
//     the server rolls back the transaction it was part of, pool rows and
//     all): over lost pool rows every take is the locked one, so its claim
//     and its COMMIT are in that transaction, and X's take starts again
//     after the deletion (the cube found both: commit/drop and, in its
//     third sitting, claim/drop×delete-rows@markers-lost). X's retake
//     remembers the pool it saw (lockedOnce's seen; TestRetakeRemembersPool
//     in internal/lease), but another starter that opens between the
//     deletion and the retake finds no trace of it, makes a new pool, and
//     the retake then claims a row of that pool (on PostgreSQL, Z does).
//
// From the count on, with its answer held, X has seen the rows and floors
// above them: a deletion that waits for X's lock lands after X commits, and
// one that does not (PostgreSQL's plain reads lock nothing) is found at X's
// read again, which makes the row again above the window. Those cells are
// cells like any other (the PostgreSQL cube's write-marker cells found the
// take rolling back there, and the pool made new, before that).
func newPool(st mstmt, phase, action string, ctx mctx) bool {
	if action != "delete-rows" || (ctx != ctxMarkersLost && ctx != ctxHeldLost) {
		return false
	}
	if phase == "drop" && st.op == xTake {
		return true
	}
	switch st.name {
	case "lookup", "counter", "locked", "seed-markers": // sent before the locked take's count
		return true
	case "count":
		return phase != "answer"
	}
	return false
}

// cell is one run of a cell.
type cell struct {
	r             *round
	st            mstmt
	phase, action string
	ctx           mctx // the pool's history before X starts
	rng           *rand.Rand

	x, o *proc // X's process, and the other actors'
	// rangeLo, rangeHi: the worker range every generator of the layout
	// 0/11/11 leases in from when it is set (censusGap's rows); 0, 0: none.
	rangeLo, rangeHi int64
	g, w             int64 // G's worker id (0/10/12), and the slot X takes (0/11/11)
	xg               *genState
	logMu            sync.Mutex
	logLine          []string
}

func (c *cell) note(format string, args ...any) {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	c.logLine = append(c.logLine, fmt.Sprintf(format, args...))
}

func (c *cell) notes() string {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	return strings.Join(c.logLine, "; ")
}

// mate is another worker id of w's chunk.
func (c *cell) mate() int64 { return c.w ^ 1 }

// spec is a generator of layout l on worker (or leasing, -1) that must
// lease. X renews ten times a second (so that a renewal is soon there to
// hold); the other actors once a second, as holders renew seldom in
// production (every 10 s by default): a holder that lost its row learns
// of it only then, and what a delayed statement of X's does meanwhile is
// what the cell looks at.
func (c *cell) spec(service string, l layout, worker int64) wire.GenSpec {
	s := c.r.spec(service, worker)
	s.ClockSeqBits, s.WorkerBits, s.SequenceBits = l.CS, l.W, l.S
	if service != "x" {
		s = withBeat(s, slowBeat)
	}
	if l == layoutNew {
		s.RangeLo, s.RangeHi = c.rangeLo, c.rangeHi
	}
	return s
}

// openWait opens a generator in p and waits up to d for its open to end;
// it notes how.
func (c *cell) openWait(p *proc, who string, s wire.GenSpec, d time.Duration) *genState {
	g := p.open(s)[0]
	ev, err := g.wait(d)
	switch {
	case err != nil:
		c.note("%s: %v", who, shorten(err.Error()))
	default:
		c.note("%s holds %d (%s)", who, ev.Worker, ev.State)
	}
	return g
}

func shorten(s string) string {
	if len(s) > 600 {
		return s[:600] + "..."
	}
	return s
}

// closeWait closes a generator and waits up to 30 s for it (a loaded
// machine can be slow to), reporting whether it closed.
func (c *cell) closeWait(p *proc, g *genState) bool {
	p.close(g)
	return waitFor(30*time.Second, func() bool { _, _, cl, _ := g.snapshot(); return cl != nil })
}

// exec runs a statement on the pool's own connection, bounded: it may wait
// for a lock X holds, and then lands after X's statement goes on.
func (c *cell) exec(q string) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	res, err := c.r.db.ExecContext(ctx, q)
	if err != nil {
		c.note("%s: %v", shorten(q), err)
		return
	}
	n, _ := res.RowsAffected()
	c.note("%s: %d rows", shorten(q), n)
}

// history makes the pool's history (see mctx).
func (c *cell) history() error {
	c.g = 512 + c.rng.Int64N(511)
	if c.st.low {
		c.g = 256 + c.rng.Int64N(256)
	}
	c.w = 2 * c.g
	c.note("context: %s", ctxNames[c.ctx])
	gs := c.openWait(c.o, "G", c.spec("g", layoutOld, c.g), 20*time.Second)
	if ready, _, _, _ := gs.snapshot(); ready == nil {
		return fmt.Errorf("G did not open")
	}
	time.Sleep(300 * time.Millisecond)
	live := c.ctx == ctxLive || c.ctx == ctxWideningLive
	if !live && !c.closeWait(c.o, gs) {
		return fmt.Errorf("G did not close")
	}
	switch c.ctx {
	case ctxPlain, ctxLive:
		return nil
	case ctxWidening, ctxWideningLive, ctxWidenedNew, ctxNewRowLost:
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := lease.Widen(ctx, c.r.db.DB, c.r.b.Dialect, layoutNew.String(), true); err != nil {
			return fmt.Errorf("the widening did not start: %w", err)
		}
		c.note("the pool widens to %s", layoutNew)
		if c.ctx != ctxWidenedNew && c.ctx != ctxNewRowLost {
			return nil
		}
		ns := c.openWait(c.o, "N", c.spec("n", layoutNew, c.w), 20*time.Second)
		if ready, _, _, _ := ns.snapshot(); ready == nil {
			return fmt.Errorf("N did not take w")
		}
		time.Sleep(300 * time.Millisecond)
		if c.ctx == ctxNewRowLost {
			c.exec(fmt.Sprintf("DELETE FROM sys_sequence_slot WHERE worker_id = %d", c.w))
			ps := c.openWait(c.o, "P", c.spec("p", layoutOld, c.g^1), 20*time.Second)
			if ready, _, _, _ := ps.snapshot(); ready == nil {
				return fmt.Errorf("P did not take g's sibling")
			}
			c.closeWait(c.o, ps)
		}
		if !c.closeWait(c.o, ns) {
			return fmt.Errorf("N did not close")
		}
		if c.ctx == ctxNewRowLost {
			// The window: the database's clock at P's count plus the
			// longest TTL (2 s), and a second to spare on a loaded machine.
			time.Sleep(3 * time.Second)
		}
		return nil
	}
	cs := c.openWait(c.o, "C", c.spec("c", layoutNew, c.rng.Int64N(1024)), 20*time.Second)
	if ready, _, _, _ := cs.snapshot(); ready == nil {
		return fmt.Errorf("C did not change the layout")
	}
	if !c.closeWait(c.o, cs) {
		return fmt.Errorf("C did not close")
	}
	if c.ctx == ctxChanged {
		return nil
	}
	mspec := c.spec("m", layoutNew, 2047)
	if c.ctx == ctxRange {
		mspec.RangeLo, mspec.RangeHi = 1024, 2047
	}
	ms := c.openWait(c.o, "M", mspec, 20*time.Second)
	if ready, _, _, _ := ms.snapshot(); ready == nil {
		return fmt.Errorf("M did not make w's chunk")
	}
	if !c.closeWait(c.o, ms) {
		return fmt.Errorf("M did not close")
	}
	if c.ctx == ctxMarkersLost || c.ctx == ctxHeldLost {
		c.exec("DELETE FROM sys_sequence WHERE service_name IN ('" + schema.LayoutService + "', '" + schema.SlotsService + "')")
	}
	if c.ctx == ctxHeldLost {
		c.exec("DELETE FROM sys_sequence_slot WHERE layout IS NOT NULL")
	}
	return nil
}

// run runs the cell: the history, X's statement held, the action, the
// statement let go, a while of issuing.
func (c *cell) run() error {
	c.o = c.r.spawn("others", "main", nil, "", 1)
	c.x = c.r.spawn("x", "main", nil, "", 1)
	if err := c.history(); err != nil {
		return err
	}
	offset := -between(c.rng, 500*time.Millisecond, 1500*time.Millisecond)
	if c.st.ahead {
		offset = 3 * time.Second
	}
	if !c.x.setClock(offset, 5*time.Second) {
		return fmt.Errorf("X's clock step was not applied")
	}
	xs := c.spec("x", layoutNew, c.w)
	if c.st.op == xLease {
		xs = c.spec("x", layoutNew, -1)
		for v := c.w; v < c.w+c.st.liveAhead; v++ {
			if g := c.openWait(c.o, "L", c.spec("l", layoutNew, v), 20*time.Second); !g.settled() {
				return fmt.Errorf("L did not take %d", v)
			}
		}
		if _, err := c.r.db.Exec(fmt.Sprintf("UPDATE sys_sequence SET worker_id = %d WHERE service_name = '__global__'", c.w-1)); err != nil {
			return err
		}
		if c.st.censusGap {
			// L, X and the actors lease in one range, which the pool
			// records at L's first take: a change of the pool's range
			// waits for no slot to be live.
			c.rangeLo, c.rangeHi = c.w-4, c.w
			for v := c.w - 4; v < c.w; v++ {
				if g := c.openWait(c.o, "L", c.spec("l", layoutNew, v), 20*time.Second); !g.settled() {
					return fmt.Errorf("L did not take %d", v)
				}
			}
			c.exec(fmt.Sprintf("DELETE FROM sys_sequence_slot WHERE worker_id = %d", c.w))
			// The counter moves modulo the range's size (5) and names an
			// offset in it: from 4, X's three probes are w-4, w-3, w-2.
			c.exec("UPDATE sys_sequence SET worker_id = 4 WHERE service_name = '__global__'")
			xs = c.spec("x", layoutNew, -1)
		}
	}
	xs.LeaseTimeoutMs = 10_000
	hold := wire.Hold{Name: "cell", Patterns: c.st.patterns, Phase: c.phase}
	if c.st.op == xCancel || c.st.op == xFinish {
		return c.operate(hold)
	}
	// armHolds arms the cause's hold, if any, first: holds catch the
	// statements they match oldest first.
	armHolds := func() error {
		if c.st.cause != nil {
			if err := c.x.arm(wire.Hold{Name: "cause", Patterns: c.st.cause, Phase: "drop"}); err != nil {
				return err
			}
			defer func() {
				go func() { // cut off at once once held: its caller gets ErrCut
					if c.x.heldQuery("cause", 15*time.Second) != "" {
						c.x.releaseHold("cause")
					}
				}()
			}()
		}
		return c.x.arm(hold)
	}
	switch c.st.op {
	case xTake, xLease:
		if err := armHolds(); err != nil {
			return err
		}
		c.xg = c.x.open(xs)[0]
	case xRenew, xRelease:
		c.xg = c.openWait(c.x, "X", xs, 20*time.Second)
		if ready, _, _, _ := c.xg.snapshot(); ready == nil {
			return fmt.Errorf("X did not open")
		}
		time.Sleep(200 * time.Millisecond)
		if err := armHolds(); err != nil {
			return err
		}
		if c.st.op == xRelease {
			c.x.close(c.xg)
		}
	}
	q := c.x.heldQuery("cell", 15*time.Second)
	if q == "" {
		c.x.releaseHold("cell")
		return fmt.Errorf("X never sent %s", c.st.name)
	}
	c.note("X held at %q", shorten(q))
	c.actWhileHeld("X", func() { c.x.releaseHold("cell") })
	if c.st.op != xRelease {
		if _, err := c.xg.wait(30 * time.Second); err != nil {
			c.note("X: %v", shorten(err.Error()))
		} else {
			ready, _, _, _ := c.xg.snapshot()
			c.note("X holds %d (%s)", ready.Worker, ready.State)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	return nil
}

// actWhileHeld takes the cell's action while who's statement is held, for
// up to 8 s (an action may wait for a lock who holds: who then goes on
// first), lets the statement go with release, and waits for the action.
// The statement goes on at once when the action is done: its effect (a row
// deleted under its holder, made again by another) lasts only until the
// holder's next renewal.
func (c *cell) actWhileHeld(who string, release func()) {
	acted := make(chan struct{})
	go func() {
		defer close(acted)
		c.act()
	}()
	select {
	case <-acted:
	case <-time.After(8 * time.Second):
		c.note("the action waits for %s (a lock it holds): %s goes on first", who, who)
	}
	release()
	<-acted
}

// operate runs the cell with the operator as X: the test's own process
// cancels or finishes the widening through a pool of its own whose
// statement it holds while the action is taken; then Y takes the worker id
// whose floor the step set (a cancel's g of the old layout, a finish's w of
// the wider one) and issues, above every ID the holders before it issued.
func (c *cell) operate(hold wire.Hold) error {
	phase, err := holddriver.ParsePhase(hold.Phase)
	if err != nil {
		return err
	}
	held := make(chan string, 1)
	ctl := holddriver.NewControl(func(_, query string) {
		select {
		case held <- query:
		default:
		}
	})
	if err := ctl.Arm(holddriver.Hold{Name: hold.Name, Patterns: hold.Patterns, Phase: phase}); err != nil {
		return err
	}
	defer ctl.ReleaseAll()
	db := sql.OpenDB(holddriver.Connector(c.r.db.DB.Driver(), c.r.db.DSN, ctl))
	defer db.Close()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var err error
		if c.st.op == xCancel {
			_, err = lease.CancelWiden(ctx, db, c.r.b.Dialect, true)
		} else {
			_, err = lease.FinishWiden(ctx, db, c.r.b.Dialect, true)
		}
		done <- err
	}()
	var q string
	select {
	case q = <-held:
	case err := <-done:
		return fmt.Errorf("the operator's step ended without sending %s: %v", c.st.name, err)
	case <-time.After(15 * time.Second):
		return fmt.Errorf("the operator's step never sent %s", c.st.name)
	}
	c.note("the operator held at %q", shorten(q))
	c.actWhileHeld("the operator", func() { ctl.Release(hold.Name) })
	c.note("the operator's step: %v", <-done)
	ys := c.spec("y", layoutOld, c.g)
	if c.st.op == xFinish {
		ys = c.spec("y", layoutNew, c.w)
	}
	ys.LeaseTimeoutMs = 10_000
	c.openWait(c.o, "Y", ys, 20*time.Second)
	time.Sleep(1500 * time.Millisecond)
	return nil
}

// act takes the cell's action while X's statement is held.
func (c *cell) act() {
	o, w := c.o, c.w
	holder := func() { c.openWait(o, "H", c.spec("h", layoutNew, w), 4*time.Second) }
	deleteRows := func(all bool) {
		if all {
			c.exec("DELETE FROM sys_sequence_slot")
		} else {
			c.exec(fmt.Sprintf("DELETE FROM sys_sequence_slot WHERE worker_id IN (%d, %d)", w, c.mate()))
		}
	}
	// remake has Z take w's mate, whose locked take makes the rows of the
	// chunk again (w's too): it waits for w's row, not for Z, which may
	// then wait for its floor.
	remake := func() {
		o.open(c.spec("z", layoutNew, c.mate()))
		ok := waitFor(4*time.Second, func() bool { s, err := readSlot(c.r.db.DB, w); return err == nil && s.exists })
		c.note("Z opens; w's row made again: %v", ok)
	}
	switch c.action {
	case "none":
		time.Sleep(between(c.rng, 200*time.Millisecond, 800*time.Millisecond))
	case "take":
		holder()
	case "renew":
		before, _ := readSlot(c.r.db.DB, w)
		holder()
		ok := waitFor(3*time.Second, func() bool {
			s, err := readSlot(c.r.db.DB, w)
			return err == nil && s.exists && s.beats != before.beats
		})
		c.note("a renewal of slot %d seen: %v", w, ok)
	case "release":
		h := c.openWait(o, "H", c.spec("h", layoutNew, w), 4*time.Second)
		time.Sleep(300 * time.Millisecond)
		c.closeWait(o, h)
	case "delete-row", "delete-rows":
		holder()
		deleteRows(c.action == "delete-rows")
		remake()
	case "delete-layout":
		c.exec("DELETE FROM sys_sequence WHERE service_name = '" + schema.LayoutService + "'")
	case "edit-layout":
		switch c.rng.IntN(3) {
		case 0:
			c.exec("UPDATE sys_sequence SET instance = NULL WHERE service_name = '" + schema.LayoutService + "'")
		case 1: // the floor stripped: the text still reads
			var text sql.NullString
			_ = c.r.db.QueryRow("SELECT instance FROM sys_sequence WHERE service_name = '" + schema.LayoutService + "'").Scan(&text)
			l, _, _ := strings.Cut(text.String, " floor=")
			c.exec(fmt.Sprintf("UPDATE sys_sequence SET instance = '%s' WHERE service_name = '%s'", l, schema.LayoutService))
		default:
			c.exec("UPDATE sys_sequence SET instance = '0/12/10 2024-01-01T00:00:00.000Z' WHERE service_name = '" + schema.LayoutService + "'")
		}
	case "delete-slots", "edit-slots":
		holder()
		deleteRows(false)
		switch {
		case c.action == "delete-slots":
			c.exec("DELETE FROM sys_sequence WHERE service_name = '" + schema.SlotsService + "'")
		case c.rng.IntN(2) == 0:
			c.exec("UPDATE sys_sequence SET worker_id = -1 WHERE service_name = '" + schema.SlotsService + "'")
		default:
			c.exec("UPDATE sys_sequence SET instance = NULL WHERE service_name = '" + schema.SlotsService + "'")
		}
		remake()
	case "delete-row-layout":
		// A holder of the pool's layout on the worker id whose bits w
		// shares (the pool may have another layout than X's), then its
		// row and the '__layout__' row deleted: nothing that survives in
		// the slot rows tells which layout it had.
		l, hw := layoutNew, w
		var text sql.NullString
		_ = c.r.db.QueryRow("SELECT instance FROM sys_sequence WHERE service_name = '" + schema.LayoutService + "'").Scan(&text)
		if strings.HasPrefix(text.String, layoutOld.String()+" ") {
			l, hw = layoutOld, w/2
		}
		c.openWait(o, "H", c.spec("h", l, hw), 4*time.Second)
		c.exec(fmt.Sprintf("DELETE FROM sys_sequence_slot WHERE worker_id = %d", hw))
		c.exec("DELETE FROM sys_sequence WHERE service_name = '" + schema.LayoutService + "'")
	case "forge-layout":
		// A holder of the pool's layout lives; the '__layout__' row is
		// edited to name another layout (the copy in '__slots__' still says
		// the pool's), and a starter of that layout takes the worker id
		// whose bits are the holder's: the pool's two rows disagree, and
		// what the slots say must decide, not the edited row.
		var text sql.NullString
		_ = c.r.db.QueryRow("SELECT instance FROM sys_sequence WHERE service_name = '" + schema.LayoutService + "'").Scan(&text)
		l, hw, to := layoutNew, w, layoutWide
		if strings.HasPrefix(text.String, layoutOld.String()+" ") {
			l, hw, to = layoutOld, w/2, layoutNew
		}
		c.openWait(o, "H", c.spec("h", l, hw), 4*time.Second)
		tag, _, _ := strings.Cut(text.String, " floor=")
		_, epoch, _ := strings.Cut(tag, " ")
		c.exec(fmt.Sprintf("UPDATE sys_sequence SET instance = '%s %s' WHERE service_name = '%s'", to, epoch, schema.LayoutService))
		c.openWait(o, "F", c.spec("forged", to, 2*hw), 4*time.Second)
	case "widen":
		c.openWait(o, "W", c.spec("wide", layoutWide, 2*w+c.rng.Int64N(2)), 4*time.Second)
	case "narrow":
		c.openWait(o, "N", c.spec("narrow", layoutOld, w/2), 4*time.Second)
	case "widen-online":
		// The operator starts widening the pool online by one worker bit;
		// a starter of the wider layout takes a worker id whose IDs are
		// X's (2w or 2w+1, on a pool of X's layout), or, on a pool X has
		// not moved to its layout yet, G's (w's sibling: X's w is itself
		// the wider layout's there); then the operator tries to finish,
		// which stands only once no slot of the old layout lives.
		var text sql.NullString
		_ = c.r.db.QueryRow("SELECT instance FROM sys_sequence WHERE service_name = '" + schema.LayoutService + "'").Scan(&text)
		to, v := layoutWide, 2*w+c.rng.Int64N(2)
		if strings.HasPrefix(text.String, layoutOld.String()+" ") {
			to, v = layoutNew, w^1
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := lease.Widen(ctx, c.r.db.DB, c.r.b.Dialect, to.String(), true)
		c.note("widening to %s: %v", to, err)
		c.openWait(o, "W", c.spec("wide", to, v), 4*time.Second)
		_, err = lease.FinishWiden(ctx, c.r.db.DB, c.r.b.Dialect, true)
		c.note("finish: %v", err)
	case "lost-operate":
		// Two actions that alone show nothing (issue 32's range-online
		// breach): H lives on w; w's row and its mate's are deleted and
		// '__slots__' made unreadable; P's take of another worker id puts
		// the row back, its window over w's holder; '__slots__' is made
		// unreadable again, and the operator starts (or cancels) a
		// widening before any take; then w's row is made again. The
		// change must not write back the lost row as one without a window.
		holder()
		deleteRows(false)
		unreadable := "UPDATE sys_sequence SET instance = NULL WHERE service_name = '" + schema.SlotsService + "'"
		c.exec(unreadable)
		c.openWait(o, "P", c.spec("p", layoutNew, w^4), 4*time.Second)
		c.exec(unreadable)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := lease.Widen(ctx, c.r.db.DB, c.r.b.Dialect, layoutWide.String(), true)
		if errors.Is(err, lease.ErrWidening) {
			_, err = lease.CancelWiden(ctx, c.r.db.DB, c.r.b.Dialect, true)
		}
		c.note("the operator's change over the lost row: %v", err)
		remake()
	case "delete-cross":
		// The row of the other layout whose IDs w shares (g, old worker
		// id w/2: G's, live in the contexts where G stays open) is
		// deleted: a take that read the pool's count before must not take
		// the missing row for one never there (rule 3).
		c.exec(fmt.Sprintf("DELETE FROM sys_sequence_slot WHERE worker_id = %d", c.g))
	case "cut-off":
		// X's renewals from now on never reach the database (each is
		// cut off before it is sent, and the server rolls its
		// transaction back), while its reads do: each renewal's read-back
		// finds the slot X's and live, with the promise the database
		// kept. When X's slot has expired on the database's clock, H
		// takes w: X must have stopped at the promise the database kept,
		// not at one it asked for and lost.
		renewals := mstmts[slices.IndexFunc(mstmts, func(st mstmt) bool { return st.name == "renew" })].patterns
		if err := c.x.arm(wire.Hold{Name: "cut-off", Patterns: renewals, Phase: "drop", Count: 1 << 20}); err != nil {
			c.note("cut-off: %v", err)
			return
		}
		time.Sleep(2300 * time.Millisecond) // the TTL, 2 s
		holder()
		c.x.releaseHold("cut-off")
	case "epoch":
		s := c.spec("epoch", layoutNew, c.mate())
		shift := between(c.rng, 500*time.Millisecond, 3*time.Second)
		if c.rng.IntN(2) == 0 {
			shift = -shift
		}
		s.EpochMs = epochOf(s) + shift.Milliseconds()
		c.openWait(o, "E", s, 4*time.Second)
	case "ttl":
		s := withBeat(c.spec("ttl", layoutNew, c.mate()), beat{Interval: 100, Retry: 50, Timeout: 500, Margin: 300, TTL: 4000})
		c.openWait(o, "T", s, 4*time.Second)
	case "clock-step":
		c.x.mu.Lock()
		off := time.Duration(c.x.offset)
		c.x.mu.Unlock()
		step := between(c.rng, 300*time.Millisecond, 2*time.Second)
		if c.rng.IntN(2) == 0 {
			step = -step
		}
		c.note("X's clock steps %v", step)
		c.x.setClock(off+step, 3*time.Second)
	}
}

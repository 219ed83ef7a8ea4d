package chaos

import (
	"slices"
	"strings"
	"testing"

	"entgo.io/ent/dialect"

	"github.com/entflake/entflake/internal/lease"
)

// matrixCovers names, for each row of the matrix (mstmts), the lease's
// statements it holds (their names in internal/lease's sqlText).
var matrixCovers = map[string][]string{
	"lookup": {"readSlot"}, "lookup-unmade": {"readSlot"}, "lookup-old": {"readSlot"},
	"claim":   {"claim", "claimLocked"},
	"counter": {"counter", "counterDurable"},
	"locked":  {"lockMarkers"}, "count": {"countRows"}, "make-rows": {"makeRows", "makeRowsListed"},
	"layout-change": {"convert"}, "write-marker": {"writeMarker"},
	"renew": {"renew"}, "release": {"release"},
	"commit":         {}, // the locked take's COMMIT, no statement of sqlText
	"renew-commit":   {}, // a renewal's COMMIT
	"release-commit": {}, // a release's COMMIT
	"live-other":     {"liveOther"}, "lock-slots": {"lockSlots"}, "layout-max": {"layoutMax", "layoutMaxLocked"},
	"cross-rows": {"crossRows"}, "fence-range": {"fenceRange"}, "raise-below": {"raiseBelow"},
	"live-outside": {"liveOutside"}, "seed-markers": {"seedMarkers"}, "raise-never": {"raiseNever"},
	"chunk-rows": {"chunkRows"}, "live-any": {"liveAny"},
	"read-back": {"readBack"}, "holder": {"holder"}, "renew-keep": {"renewKeep"}, "candidates": {"candidates"},
	"census": {"census"},
}

// outsideMatrix are the lease's statements that no row of the matrix
// holds, each with why. A statement the lease gains must get a row, or a
// line here: TestMatrixHoldsEveryStatement fails until it does.
var outsideMatrix = map[string]string{
	"migrateLock":       "Migrate's lock around the application's migration: no ID depends on it",
	"migrateUnlock":     "Migrate's lock around the application's migration: no ID depends on it",
	"selectedDB":        "setup: which database the connection uses, for the error that names it",
	"exists":            "setup: whether the tables exist; a wrong answer creates them IF NOT EXISTS, or fails the take",
	"seed":              "setup: the counter row, which only says where a search for a free slot starts",
	"audit":             "the services' audit rows: no floor or take reads them",
	"holders":           "a report (entflake holders): it writes nothing",
	"poolLayout":        "a report (the pool's capacity gauge): it reads the '__layout__' row, locks nothing, writes nothing",
	"makeRange":         "part of makeRows' text (a run of worker ids)",
	"makeList":          "part of makeRows' text (worker ids of short runs)",
	"makeRow":           "part of makeRowsListed's text (a row's values)",
	"makeRowsListedEnd": "part of makeRowsListed's text (its conflict clause)",
}

// TestMatrixHoldsEveryStatement: every statement the lease sends, in each
// dialect, is held by a row of the matrix or named in outsideMatrix with
// why; each row's patterns match the statements it says it holds; no
// name is stale. A new statement cannot be forgotten.
func TestMatrixHoldsEveryStatement(t *testing.T) {
	rows := map[string]mstmt{}
	for _, st := range mstmts {
		rows[st.name] = st
		if _, ok := matrixCovers[st.name]; !ok {
			t.Errorf("matrix row %q: matrixCovers does not say which statements it holds", st.name)
		}
	}
	seen := map[string]bool{}
	for _, d := range []string{dialect.MySQL, dialect.Postgres, dialect.SQLite} {
		stmts := lease.Statements(d)
		covered := map[string]bool{}
		for row, names := range matrixCovers {
			st, ok := rows[row]
			if !ok {
				t.Errorf("matrixCovers names %q, which is no row of the matrix", row)
				continue
			}
			for _, name := range names {
				text, ok := stmts[name]
				if !ok {
					continue // not a statement of this dialect (counterDurable)
				}
				covered[name] = true
				if !slices.ContainsFunc(st.patterns, func(p string) bool { return strings.Contains(text, p) }) {
					t.Errorf("%s: row %q says it holds %s, whose text matches none of its patterns: %.80s", d, row, name, text)
				}
			}
		}
		for name := range stmts {
			seen[name] = true
			_, outside := outsideMatrix[name]
			switch {
			case covered[name] && outside:
				t.Errorf("%s: %s is held by the matrix and listed outside it", d, name)
			case !covered[name] && !outside:
				t.Errorf("%s: statement %s is in no row of the matrix: give it one, or say in outsideMatrix why not", d, name)
			}
		}
	}
	for name := range outsideMatrix {
		if !seen[name] {
			t.Errorf("outsideMatrix names %s, which the lease no longer has", name)
		}
	}
	// A row's patterns hold only its own statements: one that matched
	// another statement sent before its own would hold that one instead.
	for _, d := range []string{dialect.MySQL, dialect.Postgres, dialect.SQLite} {
		for name, text := range lease.Statements(d) {
			for _, st := range mstmts {
				if slices.Contains(matrixCovers[st.name], name) {
					continue
				}
				for _, p := range st.patterns {
					if strings.Contains(text, p) {
						t.Errorf("%s: row %q's pattern %q matches %s too, which it does not hold", d, st.name, p, name)
					}
				}
			}
		}
	}
	t.Logf("%d statements: %d held by the matrix's %d rows, %d outside it", len(seen), len(seen)-len(outsideMatrix), len(mstmts), len(outsideMatrix))
}

// TestMatrixContextsNamed: every context a row names has a name, and no
// two cells of the cube share one.
func TestMatrixContextsNamed(t *testing.T) {
	for _, st := range mstmts {
		for _, c := range st.ctxs {
			if ctxNames[c] == "" {
				t.Errorf("row %q: context %d has no name", st.name, c)
			}
		}
	}
	seen := map[string]bool{}
	for _, c := range allCells() {
		if seen[c] {
			t.Errorf("two cells are named %q", c)
		}
		seen[c] = true
	}
	t.Logf("the cube: %d cells a database", len(seen))
}

package chaos

import (
	"os"
	"strconv"
	"testing"
	"time"

	"entgo.io/ent/dialect"

	"github.com/entflake/entflake/internal/dbtest"
)

// envInt reads a positive integer setting, or def.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// envSeed is CHAOS_SEED, or def.
func envSeed(t *testing.T, def uint64) uint64 {
	t.Helper()
	v := os.Getenv("CHAOS_SEED")
	if v == "" {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("CHAOS_SEED=%q: want an unsigned integer", v)
	}
	return n
}

// TestScenarios runs each named scenario on each database it applies to
// (those that need a proxy skip SQLite) and asserts that its generators
// wrote no ID twice. Before the fixes of issue 15 each fails with a count.
// CHAOS_SCENARIO_RUNS repeats each (seeds CHAOS_SEED, +1, ...).
func TestScenarios(t *testing.T) {
	runs := envInt(t, "CHAOS_SCENARIO_RUNS", 1)
	seed := envSeed(t, 15)
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
				if sc.proxy && b.Dialect == dialect.SQLite {
					t.Logf("%s needs a proxy to the server: not on SQLite", sc.name)
					return
				}
				for i := range runs {
					s := seed + uint64(i)
					rep := newReport(b.Name)
					db := b.Fresh(t)
					createTables(t, db.DB, b.Dialect)
					r := newRound(t, b, db, s, rep)
					start := time.Now()
					applied := r.runEpisode(sc, 1, s)
					r.quitAll()
					v := r.check()
					rep.add(r, v, time.Since(start))
					t.Log(rep)
					if !applied {
						t.Errorf("scenario %s seed %d on %s: its fault was not applied (see the notes): the run proves nothing", sc.name, s, b.Name)
						continue
					}
					if v.ids == 0 {
						t.Errorf("scenario %s seed %d on %s: no ID written", sc.name, s, b.Name)
					}
					if v.dups > 0 || v.disorder > 0 {
						t.Errorf("scenario %s (hole %d) seed %d on %s: %d duplicate IDs, %d out of order (%d more excluded)",
							sc.name, sc.hole, s, b.Name, v.dups, v.disorder, v.excluded)
					}
					if n := v.oracle.Breaches(); n > 0 {
						t.Errorf("scenario %s (hole %d) seed %d on %s: the oracle found %d breaches",
							sc.name, sc.hole, s, b.Name, n)
					}
				}
			})
		})
	}
}

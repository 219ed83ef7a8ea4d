package chaos

import (
	"fmt"
	"testing"
	"time"

	"github.com/entflake/entflake/internal/dbtest"
)

// TestOracleSeesPlantedBreach plants a breach that no two equal IDs
// reveal, and shows that the oracle reports it and the collision checker
// does not. H holds worker w and is killed: its slot's promise (the
// highest millisecond it may have issued in) is about 1.7 s past its last
// renewal, though it issued nothing after the kill. Once the slot expires,
// X takes w, its clock set to halfway between the kill and H's promise:
// IDs there repeat none of H's (H was dead), and yet they lie in H's
// acknowledged range, below X's floor. X skips its floor
// (leasetrace.Hooks.SkipFloor). The control run, without the skip, waits
// for the floor, and the oracle finds nothing.
func TestOracleSeesPlantedBreach(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		for _, skip := range []bool{true, false} {
			t.Run(fmt.Sprintf("skip=%v", skip), func(t *testing.T) {
				rep := newReport(b.Name)
				db := b.Fresh(t)
				createTables(t, db.DB, b.Dialect)
				r := newRound(t, b, db, ciSeed, rep)
				ph, px := r.spawn("planted", "main", nil, "", 1), r.spawn("planted", "main", nil, "", 1)
				const w = 600
				if _, err := ph.open(r.spec("h", w))[0].wait(20 * time.Second); err != nil {
					t.Fatalf("H: %v", err)
				}
				time.Sleep(500 * time.Millisecond)
				if !ph.kill() {
					t.Fatal("H was not running")
				}
				killed := time.Now()
				var s slotRow
				if !waitFor(10*time.Second, func() bool {
					var err error
					s, err = readSlot(db.DB, w)
					live, lerr := liveWorkers(db.DB, b.Dialect)
					return err == nil && lerr == nil && !live[w]
				}) {
					t.Fatal("H's slot did not expire")
				}
				mid := killed.Add(time.Until(time.UnixMilli(s.promise)) / 2)
				if time.UnixMilli(s.promise).Before(time.Now()) {
					mid = killed.Add(time.UnixMilli(s.promise).Sub(killed) / 2)
				}
				if !px.setClock(time.Until(mid), 5*time.Second) {
					t.Fatal("X's clock step was not applied")
				}
				sx := r.spec("x", w)
				sx.SkipFloor = skip
				if _, err := px.open(sx)[0].wait(20 * time.Second); err != nil {
					t.Fatalf("X: %v", err)
				}
				time.Sleep(1500 * time.Millisecond)
				r.quitAll()
				v := r.check()
				rep.add(r, v, 0)
				t.Logf("H killed at %d, its promise %d, X's clock at %d:\n%s", killed.UnixMilli(), s.promise, mid.UnixMilli(), rep)
				if v.ids == 0 {
					t.Fatal("no ID written")
				}
				if v.dups != 0 {
					t.Errorf("%d duplicate IDs: the plant was meant to repeat none of H's", v.dups)
				}
				switch {
				case skip && v.oracle.Outside == 0:
					t.Errorf("the oracle missed the planted breach (X's IDs below its floor)")
				case !skip && v.oracle.Breaches() != 0:
					t.Errorf("the oracle reports %d breaches in the control run: %v", v.oracle.Breaches(), v.oracle.Examples)
				}
			})
		}
	})
}

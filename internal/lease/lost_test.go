package lease

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// State the pool's rows keep and the slot rows can say again (issue 32,
// findings 2 and 3): when it is lost, it is derived from what survives,
// and taken at its worst.

// TestWideningMarkLost (finding 2): old 300 and new 1204 (whose IDs are
// old 301's) both live while the pool widens, then both pool rows lost
// (deleted; or '__layout__' deleted and '__slots__' made unreadable). The
// slot rows still hold both layouts: the pool is taken to widen, and a
// take of a worker id whose IDs a live slot of the other layout issues is
// refused, whichever layout asks first, and one whose IDs none issues is
// taken, in either layout. Before, the first take put one
// layout back with no widening, and the next starter of that layout
// claimed a worker id the other layout's live holder was issuing IDs of.
func TestWideningMarkLost(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		losses := map[string][]string{
			"both deleted": {"DELETE FROM sys_sequence WHERE service_name IN ('__layout__', '__slots__')"},
			"layout deleted, slots unreadable": {"DELETE FROM sys_sequence WHERE service_name = '__layout__'",
				"UPDATE sys_sequence SET instance = NULL WHERE service_name = '__slots__'"},
		}
		for name, loss := range losses {
			for _, oldFirst := range []bool{true, false} {
				db := b.Fresh(t)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				take(t, holder(db.DB, b.Dialect, "old300@h@1@1", testLayout, 300))
				_, err := Widen(ctx, db.DB, b.Dialect, wideLayout, true)
				require.NoError(t, err)
				settle(t, b)
				take(t, holder(db.DB, b.Dialect, "new1204@h@1@1", wideLayout, 1204)) // 1204>>2 == 301
				for _, stmt := range loss {
					_, err := db.ExecContext(ctx, stmt)
					require.NoError(t, err, stmt)
				}
				old301 := holder(db.DB, b.Dialect, "old301@h@1@1", testLayout, 301)
				new1200 := holder(db.DB, b.Dialect, "new1200@h@1@1", wideLayout, 1200) // 1200>>2 == 300
				order := []Request{old301, new1200}
				if !oldFirst {
					order = []Request{new1200, old301}
				}
				for _, r := range order {
					s, err := tryTake(r)
					require.Error(t, err, "%s, old first %v: %s took worker id %d (floor %d) while the other layout's live slot issues its IDs",
						name, oldFirst, r.Layout, s.WorkerID, s.Floor)
					assert.True(t, errIsAny(err, ErrHeld, ErrLayout, ErrFloorAhead), "%s: %v", name, err)
				}
				// And the widening goes on: worker ids whose IDs no live slot
				// of the other layout issues are taken, in either layout.
				take(t, holder(db.DB, b.Dialect, "old5@h@1@1", testLayout, 5))
				take(t, holder(db.DB, b.Dialect, "new2000@h@1@1", wideLayout, 2000)) // 2000>>2 == 500
				layout, slots := poolTexts(t, db.DB)
				assert.Contains(t, layout, " widen=0/12/10", "%s: the widening put back", name)
				assert.Contains(t, slots, " widen=0/12/10", "%s: and its copy", name)
				cancel()
			}
		}
	})
}

// TestCancelFloorsDeletedRows (finding 3): new 1024 (whose IDs are old
// 256's) issues, its row is deleted and its holder stops; a take counts
// the deficit and the window passes; the cancel then floors the old rows
// above every promise it can know of, the deleted row's holder's
// included (below the window's end: the cap of claim and renew). Before,
// it floored them above the new rows left only, row 256 kept its promise
// of 0, and an old starter whose clock was behind issued the new holder's
// IDs again.
func TestCancelFloorsDeletedRows(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		short := func(r Request) Request {
			r.TTL, r.Horizon = 2*time.Second, time.Second
			return r
		}
		take(t, short(holder(db.DB, b.Dialect, "old10@h@1@1", testLayout, 10)))
		_, err := Widen(ctx, db.DB, b.Dialect, wideLayout, true)
		require.NoError(t, err)
		settle(t, b)
		lost := take(t, short(holder(db.DB, b.Dialect, "new1024@h@1@1", wideLayout, 1024)))
		_, err = db.ExecContext(ctx, "DELETE FROM sys_sequence_slot WHERE worker_id = 1024")
		require.NoError(t, err)
		// A take counts the rows, and finds one missing.
		_, err = tryTake(short(holder(db.DB, b.Dialect, "old11@h@1@1", testLayout, 11)))
		if err != nil {
			require.ErrorIs(t, err, ErrFloorAhead)
		}
		// The cancel waits for the window to pass.
		for {
			_, err = CancelWiden(ctx, db.DB, b.Dialect, true)
			if err == nil {
				break
			}
			require.ErrorIs(t, err, ErrWidening)
			require.NoError(t, ctx.Err(), "the cancel never went through: %v", err)
			time.Sleep(200 * time.Millisecond)
		}
		var promise int64
		require.NoError(t, db.QueryRowContext(ctx, "SELECT promise_ms FROM sys_sequence_slot WHERE worker_id = 256").Scan(&promise))
		assert.GreaterOrEqual(t, promise, lost.Promise, "row 256 floored above the deleted new row's holder's promise")
		s, err := tryTake(short(holder(db.DB, b.Dialect, "old256@h@1@1", testLayout, 256)))
		if err == nil {
			assert.Greater(t, s.Floor, lost.Promise, "old 256 starts above the IDs new 1024 issued")
		} else if !errors.Is(err, ErrFloorAhead) {
			t.Fatalf("old 256: %v", err)
		}
	})
}

// TestOperatorKeepsLostSlotsRow (issue 32, the range-online breach): a
// holder's row is deleted while it lives; a take finds the '__slots__' row
// unreadable, counts the rows that survive and covers the missing one with
// its window (until); the '__slots__' row is made unreadable again, and an
// operator's change (a range set, a widening started or cancelled) runs
// before any take. Before, the change wrote the row back as it read it,
// NULL read as nothing: a readable row with no window and the count of the
// rows that survive, so the row made again for the next holder started
// below the lost holder's promise. Now the change refuses while a pool's
// row is lost, and the next take puts it back at its worst.
func TestOperatorKeepsLostSlotsRow(t *testing.T) {
	changes := map[string]func(ctx context.Context, db *sql.DB, d string) error{
		"range": func(ctx context.Context, db *sql.DB, d string) error {
			_, err := SetRange(ctx, db, d, 0, 511, false, true)
			return err
		},
		"widen": func(ctx context.Context, db *sql.DB, d string) error {
			_, err := Widen(ctx, db, d, wideLayout, true)
			return err
		},
		"cancel": func(ctx context.Context, db *sql.DB, d string) error {
			_, err := CancelWiden(ctx, db, d, true)
			return err
		},
	}
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		for name, change := range changes {
			db := b.Fresh(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			if name == "cancel" {
				_, err := Widen(ctx, db.DB, b.Dialect, wideLayout, true)
				require.Error(t, err, "no pool yet")
			}
			lost := take(t, holder(db.DB, b.Dialect, "lost5@h@1@1", testLayout, 5))
			if name == "cancel" {
				_, err := Widen(ctx, db.DB, b.Dialect, wideLayout, true)
				require.NoError(t, err)
				settle(t, b)
			}
			unreadable := "UPDATE sys_sequence SET instance = NULL WHERE service_name = '__slots__'"
			for _, stmt := range []string{"DELETE FROM sys_sequence_slot WHERE worker_id = 5", unreadable} {
				_, err := db.ExecContext(ctx, stmt)
				require.NoError(t, err, stmt)
			}
			// This take puts the row back, with the window over row 5.
			take(t, holder(db.DB, b.Dialect, "other7@h@1@1", testLayout, 7))
			_, err := db.ExecContext(ctx, unreadable)
			require.NoError(t, err)
			_, err = WidenStatus(ctx, db.DB, b.Dialect)
			require.NoError(t, err, "%s: a status, which writes nothing, goes on", name)
			if _, err = SetRange(ctx, db.DB, b.Dialect, 0, 511, false, false); !errors.Is(err, ErrWidening) {
				require.NoError(t, err, "%s: and so does a dry run (a range refuses while the pool widens)", name)
			}
			err = change(ctx, db.DB, b.Dialect)
			require.ErrorIs(t, err, ErrNoPool, "%s: a change over a lost '__slots__' row", name)
			assert.Contains(t, err.Error(), "__slots__", name)
			s, err := tryTake(holder(db.DB, b.Dialect, "next5@h@1@1", testLayout, 5))
			if err == nil {
				assert.Greater(t, s.Floor, lost.Promise, "%s: the next holder of row 5 starts above the lost holder's promise", name)
			} else {
				require.ErrorIs(t, err, ErrFloorAhead, name)
			}
			cancel()
		}
	})
}

// TestCancelFloorsUnmadeRows: a pool of 2,048 worker ids widens to 4,096;
// new 3000 (whose IDs are old 1500's) issues and gives its slot back, and
// the widening is cancelled. Old 1500's row was never made (its chunk,
// 1024-2047, never used): the cancel had no row to floor, and the row
// made later must still start above new 3000's promise, which the pool's
// layout floor now carries for every row made after the cancel.
func TestCancelFloorsUnmadeRows(t *testing.T) {
	const narrow, wide = "0/11/11 2024-01-01T00:00:00.000Z", "0/12/10 2024-01-01T00:00:00.000Z"
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		req := func(instance, layout string, workers, id int64) Request {
			r := request(db.DB, b.Dialect, "unmade")
			r.Instance, r.Layout, r.Workers, r.Explicit, r.WorkerID = instance, layout, workers, true, id
			r.TTL, r.Horizon = 2*time.Second, time.Second
			return r
		}
		old5 := req("old5@h@1@1", narrow, 2048, 5)
		s5 := take(t, old5)
		_, err := Widen(ctx, db.DB, b.Dialect, wide, true)
		require.NoError(t, err)
		settle(t, b)
		new3000 := req("new3000@h@1@1", wide, 4096, 3000)
		s := take(t, new3000)
		require.NoError(t, Renew(ctx, new3000.Holding(s), 2000, time.Now().UnixMilli()+1000))
		promise := time.Now().UnixMilli() + 1000
		release(t, new3000, s, promise)
		release(t, old5, s5, s5.Promise)
		var made int
		require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM sys_sequence_slot WHERE worker_id = 1500").Scan(&made))
		require.Zero(t, made, "old 1500's row was never made")
		_, err = CancelWiden(ctx, db.DB, b.Dialect, true)
		require.NoError(t, err)
		got, err := tryTake(req("old1500@h@1@1", narrow, 2048, 1500))
		if err != nil {
			require.ErrorIs(t, err, ErrFloorAhead)
			return
		}
		assert.Greater(t, got.Floor, promise, "old 1500 starts above the IDs new 3000 issued")
	})
}

// TestAuditSparesPoolRows: an audit upsert under a name the server
// compares equal to one of the lease's own rows (MySQL's PAD SPACE
// collation ignores the trailing space) leaves that row as it was: the
// server judges which row it met, and the statement spares the lease's
// rows by the server's own comparison. schema.ValidateService refuses such
// a name first; this is the statement's own guard.
func TestAuditSparesPoolRows(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		take(t, request(db.DB, b.Dialect, "svc"))
		row := func() (int64, string) {
			var w int64
			var inst sql.NullString
			require.NoError(t, db.QueryRowContext(ctx, "SELECT worker_id, instance FROM sys_sequence WHERE service_name = '__layout__'").Scan(&w, &inst))
			return w, inst.String
		}
		w0, inst0 := row()
		require.NoError(t, Audit(ctx, db.DB, b.Dialect, "__layout__ ", "intruder@h@1@1", 77))
		w1, inst1 := row()
		assert.Equal(t, w0, w1, "the '__layout__' row's TTL copy")
		assert.Equal(t, inst0, inst1, "the '__layout__' row's layout")
	})
}

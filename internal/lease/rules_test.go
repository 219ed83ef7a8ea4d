package lease

// The two rules of statements.go's header, each with the holes an outside
// review of issue 22 found that broke it (a test each that failed before
// the fix), and the rolling upgrade's collision on making rows.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
	"github.com/entflake/entflake/schema"
)

// holdFirst makes h hold the first statement whose text contains pattern
// before it is sent, until the returned release is called; held is closed
// once it is held.
func holdFirst(h *hooks, pattern string) (held <-chan struct{}, release func()) {
	blocked, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.set(func(q string) {
		if strings.Contains(q, pattern) {
			once.Do(func() { close(blocked); <-gate })
		}
	}, nil)
	var rel sync.Once
	return blocked, func() { rel.Do(func() { h.set(nil, nil); close(gate) }) }
}

type takeResult struct {
	slot Slot
	err  error
}

func goTakeWith(r Request, d time.Duration) <-chan takeResult {
	out := make(chan takeResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		s, err := Take(ctx, r)
		out <- takeResult{s, err}
	}()
	return out
}

// takeHeld starts r's take and returns once its first statement containing
// pattern is held on its way to the database (who and what name the take
// and the statement in a failure); release lets the statement go.
func takeHeld(t *testing.T, h *hooks, pattern string, r Request, who, what string) (<-chan takeResult, func()) {
	t.Helper()
	held, release := holdFirst(h, pattern)
	out := goTakeWith(r, 20*time.Second)
	select {
	case <-held:
	case res := <-out:
		release()
		t.Fatalf("%s ended before %s: %+v", who, what, res)
	}
	return out, release
}

// TestDelayedClaimOverRemadeRow (rule 1): X reads slot w, never held, and
// its claim is held on its way to the database. Meanwhile H takes w (and
// would issue), w's row is deleted, and a third starter's locked take makes
// the row again. Before the fix, the row came back with beats 0 and fence
// 0, as X had read it, and X's delayed claim matched: X held w with floor
// 1 from its stale read while H issued under it. Now a row is made with an
// incarnation above any beats it had, and the claim names the promise it
// read: X's claim matches nothing, and X, reading again, finds the row
// made again with a floor above H's promise.
func TestDelayedClaimOverRemadeRow(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		if b.Dialect == dialect.MySQL && dbtest.TiDB(t) {
			// Every claim runs inside the locked take there, which holds the
			// pool's rows: no take makes rows again while it is held.
			t.Skip("TiDB: every claim runs in the locked take, which no other take passes")
		}
		db := b.Fresh(t)
		hdb, h := hooked(t, db.Driver, db.DSN)
		const w, mate = 500, 501 // one chunk
		rz := named(request(db.DB, b.Dialect, "z"), "z@h@1@1")
		rz.Explicit, rz.WorkerID = true, 900
		take(t, rz) // makes the chunk of rows

		rx := named(request(hdb, b.Dialect, "x"), "x@h@2@2")
		rx.Explicit, rx.WorkerID = true, w
		xs, release := takeHeld(t, h, "SET fence = fence + 1", rx, "X's take", "its claim was held")
		defer release()

		rh := named(request(db.DB, b.Dialect, "h"), "h@h@3@3")
		rh.Explicit, rh.WorkerID = true, w
		sh := take(t, rh)
		_, err := db.Exec(fmt.Sprintf("DELETE FROM sys_sequence_slot WHERE worker_id IN (%d, %d)", w, mate))
		require.NoError(t, err)
		rm := named(request(db.DB, b.Dialect, "m"), "m@h@4@4")
		rm.Explicit, rm.WorkerID = true, mate
		// Its locked take makes w's row again (and finds the floor of the
		// rows made a TTL ahead: the rows stay made).
		mctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = Take(mctx, rm)
		cancel()
		if err != nil && !errors.Is(err, ErrFloorAhead) {
			t.Fatal(err)
		}
		require.True(t, slotOf(t, db.DB, w).fence == 0, "w's row made again, not held")
		release()

		x := <-xs
		if x.err == nil {
			assert.Greater(t, x.slot.Floor, sh.Promise, "X holds worker %d with floor %d, under H's promise %d",
				w, x.slot.Floor, sh.Promise)
		} else {
			assert.ErrorIs(t, x.err, ErrFloorAhead)
		}
	})
}

// TestLayoutRowDeleted (rule 2): worker 750 of layout 0/10/12 issues and
// closes; a 0/11/11 starter changes the layout, which then holds the
// floor; the '__layout__' row is deleted; a 0/11/11 starter with worker
// 1500 (the bits of worker 750 of the old layout) and a clock 1.3 s behind
// takes it. Before the fix the locked take put the row back with no
// layout, the change saw only its own layout's rows, and 1500 was made
// with floor 0: IDs repeated at once. Now the lost row is a deficit: 1500
// starts above every promise in the table.
func TestLayoutRowDeleted(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		ctx := context.Background()
		const l0, l1 = "0/10/12 2024-01-01T00:00:00.000Z", "0/11/11 2024-01-01T00:00:00.000Z"
		r0 := named(request(db.DB, b.Dialect, "old"), "old@h@1@1")
		r0.Explicit, r0.WorkerID, r0.Layout, r0.TTL, r0.Horizon = true, 750, l0, 2*time.Second, 1500*time.Millisecond
		s0 := take(t, r0)
		time.Sleep(300 * time.Millisecond)
		last := time.Now().UnixMilli() // the last millisecond it issued in
		require.NoError(t, Release(ctx, holding(db.DB, b.Dialect, s0), last))

		r1 := named(request(db.DB, b.Dialect, "new"), "new@h@2@2")
		r1.Explicit, r1.WorkerID, r1.Layout, r1.Workers, r1.TTL, r1.Horizon = true, 100, l1, 2048, 2*time.Second, 1500*time.Millisecond
		s1 := take(t, r1)
		require.NoError(t, Release(ctx, holding(db.DB, b.Dialect, s1), s1.Floor))

		_, err := db.Exec("DELETE FROM sys_sequence WHERE service_name = '" + schema.LayoutService + "'")
		require.NoError(t, err)

		r2 := named(request(db.DB, b.Dialect, "new"), "new@h@3@3")
		r2.Explicit, r2.WorkerID, r2.Layout, r2.Workers, r2.TTL, r2.Horizon = true, 1500, l1, 2048, 2*time.Second, 1500*time.Millisecond
		r2.Now = func() time.Time { return time.Now().Add(-1300 * time.Millisecond) }
		var deleted []Deleted
		r2.Deleted = func(d Deleted) { deleted = append(deleted, d) }
		s2, err := Take(ctx, r2)
		if err == nil {
			assert.Greater(t, s2.Floor, last, "worker 1500 of 0/11/11 starts at %d, below the last ID of worker 750 of 0/10/12 (%d)",
				s2.Floor, last)
		} else {
			assert.ErrorIs(t, err, ErrFloorAhead)
		}
		found := false
		for _, d := range deleted {
			found = found || len(d.Markers) > 0 && d.Markers[0] == schema.LayoutService
		}
		assert.True(t, found, "the lost row is told: %+v", deleted)
	})
}

// TestMarkerRowsLost (rule 2): each of the pool's rows, deleted or made
// unreadable, beside slot rows: a holder's row is deleted too (its holder
// would go on until its next renewal), and the row made again must start
// above the holder's promise, whichever marker is gone.
func TestMarkerRowsLost(t *testing.T) {
	edits := map[string]string{
		"slots deleted":    "DELETE FROM sys_sequence WHERE service_name = '" + schema.SlotsService + "'",
		"slots blanked":    "UPDATE sys_sequence SET instance = NULL WHERE service_name = '" + schema.SlotsService + "'",
		"slots count lost": "UPDATE sys_sequence SET worker_id = -1 WHERE service_name = '" + schema.SlotsService + "'",
		"layout deleted":   "DELETE FROM sys_sequence WHERE service_name = '" + schema.LayoutService + "'",
		"layout blanked":   "UPDATE sys_sequence SET instance = NULL WHERE service_name = '" + schema.LayoutService + "'",
		"both deleted":     "DELETE FROM sys_sequence WHERE service_name IN ('" + schema.LayoutService + "', '" + schema.SlotsService + "')",
	}
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		for name, edit := range edits {
			for _, rows := range []string{"its row", "every row"} {
				if name == "both deleted" && rows == "every row" {
					continue // every row of both tables but the counter: a documented exclusion
				}
				t.Run(name+"/"+rows, func(t *testing.T) { markerLost(t, b, edit, rows == "every row", name == "both deleted") })
			}
		}
	})
}

// markerLost: see TestMarkerRowsLost. all deletes every slot row, not
// only the holder's: then no slot row is left to say the pool was used,
// and the pool row that survives must. both: both pool rows are lost.
func markerLost(t *testing.T, b dbtest.Backend, edit string, all, both bool) {
	db := b.Fresh(t)
	rh := named(request(db.DB, b.Dialect, "h"), "h@h@1@1")
	rh.Explicit, rh.WorkerID = true, 40
	sh := take(t, rh)
	// The holder's row goes first, then the marker: no take came
	// between to count the deletion.
	del := "DELETE FROM sys_sequence_slot WHERE worker_id = 40"
	if all {
		del = "DELETE FROM sys_sequence_slot"
	}
	_, err := db.Exec(del)
	require.NoError(t, err)
	_, err = db.Exec(edit)
	require.NoError(t, err)
	rx := named(request(db.DB, b.Dialect, "x"), "x@h@2@2")
	rx.Explicit, rx.WorkerID = true, 40
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	sx, err := Take(ctx, rx)
	if err == nil {
		assert.Greater(t, sx.Floor, sh.Promise, "worker 40 taken again at %d, under its lost holder's promise %d", sx.Floor, sh.Promise)
	} else {
		assert.ErrorIs(t, err, ErrFloorAhead)
	}
	if all {
		return
	}
	ry := named(request(db.DB, b.Dialect, "y"), "y@h@3@3")
	ry.Explicit, ry.WorkerID = true, 41
	if both {
		// Nothing tells the layout the lost holder had: the rows never
		// held (41 is one) start above the worst case too.
		sy, err := Take(ctx, ry)
		if err == nil {
			assert.Greater(t, sy.Floor, sh.Promise, "worker 41, never held, taken at %d with both pool rows lost", sy.Floor)
		} else {
			assert.ErrorIs(t, err, ErrFloorAhead)
		}
		return
	}
	// A take of a row that survived is not held up by it.
	sy := take(t, ry)
	assert.LessOrEqual(t, sy.Floor, time.Now().UnixMilli()+1000, "a surviving row's floor is its own")
}

// TestMakeRowsMeetsAnOlderInstance: in a rolling upgrade an instance of an
// older entflake inserts a missing slot row (it takes no lock of the
// pool's rows) while this version's locked take inserts the same chunk.
// Before the fix the chunk's INSERT met the duplicate key, the take ended
// ErrUndecided, and the starter fell back to the hash. Now the rows that
// exist are skipped, and counted: a later deletion of the older
// instance's row is found.
func TestMakeRowsMeetsAnOlderInstance(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		if b.Dialect == dialect.SQLite {
			// The locked take holds SQLite's write lock from its BEGIN
			// IMMEDIATE: no insert comes between its read and its write.
			t.Skip("SQLite runs one writer at a time: the race cannot happen")
		}
		db := b.Fresh(t)
		hdb, h := hooked(t, db.Driver, db.DSN)
		rz := named(request(db.DB, b.Dialect, "z"), "z@h@1@1")
		take(t, rz) // tables and the pool's rows
		_, err := db.Exec("DELETE FROM sys_sequence_slot")
		require.NoError(t, err)
		// Let the deficit's window pass: the rows are made with no floor.
		_, err = db.Exec("UPDATE sys_sequence SET worker_id = 0, instance = 'ttl=60000 until=0' WHERE service_name = '" + schema.SlotsService + "'")
		require.NoError(t, err)

		rx := named(request(hdb, b.Dialect, "x"), "x@h@2@2")
		rx.Explicit, rx.WorkerID = true, 10
		xs, release := takeHeld(t, h, "INSERT INTO sys_sequence_slot", rx, "X's take", "its rows were held")
		defer release()
		// An older instance's own insert of one row of the chunk.
		_, err = db.Exec("INSERT INTO sys_sequence_slot (worker_id, fence, beats, taken_ms, expires_ms, promise_ms, updated_at) " +
			"VALUES (11, 0, 0, 0, 0, 0, CURRENT_TIMESTAMP)")
		require.NoError(t, err)
		release()
		x := <-xs
		require.NoError(t, x.err)
		assert.Equal(t, int64(10), x.slot.WorkerID)

		// The older instance's row is counted: its deletion is a deficit.
		_, err = db.Exec("DELETE FROM sys_sequence_slot WHERE worker_id = 11")
		require.NoError(t, err)
		ry := named(request(db.DB, b.Dialect, "y"), "y@h@3@3")
		ry.Explicit, ry.WorkerID = true, 11
		var deleted []Deleted
		ry.Deleted = func(d Deleted) { deleted = append(deleted, d) }
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		sy, err := Take(ctx, ry)
		if err == nil {
			assert.Greater(t, sy.Floor, time.Now().UnixMilli(), "row 11 made again with a floor")
		} else if !errors.Is(err, ErrFloorAhead) {
			t.Fatal(err)
		}
		assert.NotEmpty(t, deleted, "the deletion of the older instance's row is found")
	})
}

// The holes a hostile review of this file's first fixes found, each a
// test that failed then.

const (
	ruleL0 = "0/10/12 2024-01-01T00:00:00.000Z"
	ruleL1 = "0/11/11 2024-01-01T00:00:00.000Z"
)

// TestLayoutChangeReadsLatestPromises: a layout change (T, 0/11/11) on MySQL runs in a
// REPEATABLE READ transaction whose snapshot is taken by countRows, before
// it locks the slot rows (lockSlots). Old holder H (0/10/12, worker 100)
// renews (raising its promise) and then releases (its last ms above the
// promise it had at T's snapshot) while T waits before lockSlots. T's liveOther (a locking,
// current read) sees the slot released; its layoutMax (a plain read) sees
// the old promise; convert overwrites the old row's promise with the stale
// floor. T's worker 200 (= H's bits) starts at or below H's last ms.
func TestLayoutChangeReadsLatestPromises(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		if b.Dialect == dialect.SQLite {
			t.Skip("the locked take holds SQLite's write lock: no renewal comes between")
		}
		db := b.Fresh(t)
		ctx := context.Background()
		rh := named(request(db.DB, b.Dialect, "h"), "h@h@1@1")
		rh.Explicit, rh.WorkerID, rh.Layout, rh.TTL, rh.Horizon = true, 100, ruleL0, 3*time.Second, 200*time.Millisecond
		sh := take(t, rh)
		p1 := sh.Promise
		hh := holding(db.DB, b.Dialect, sh)

		hdb, hk := hooked(t, db.Driver, db.DSN)
		rt := named(request(hdb, b.Dialect, "t"), "t@h@2@2")
		rt.Explicit, rt.WorkerID, rt.Layout, rt.Workers, rt.TTL, rt.Horizon = true, 200, ruleL1, 2048, 3*time.Second, 2*time.Second
		ts, release := takeHeld(t, hk, "SELECT worker_id FROM sys_sequence_slot FOR UPDATE", rt, "T", "lockSlots")
		defer release()
		// H renews (the database acknowledges a higher promise), goes on
		// issuing past p1, and closes.
		time.Sleep(time.Until(time.UnixMilli(p1 + 50)))
		require.NoError(t, Renew(ctx, hh, 3000, time.Now().UnixMilli()+2000))
		last := time.Now().UnixMilli()
		require.Greater(t, last, p1)
		require.NoError(t, Release(ctx, hh, last))
		release()
		r := <-ts
		require.NoError(t, r.err)
		t.Logf("%s: H promise at T's snapshot %d, H's last ms %d, T's floor on worker 200 of 0/11/11: %d", b.Name, p1, last, r.slot.Floor)
		assert.Greater(t, r.slot.Floor, last, "worker 200 of 0/11/11 starts at %d, at or below worker 100 of 0/10/12's last ms %d: %d ms of IDs can repeat",
			r.slot.Floor, last, last-r.slot.Floor+1)
	})
}

// TestNewChunkNotHeldUpByLiveRows: a layout of 2048 workers whose
// first chunk (0..1023) is all held by live instances (each renewal
// promises about Horizon past its clock). The next starter needs a row of
// the second chunk; makeRows floors the new rows at MIN(promise_ms) of all
// rows, which, when every row is live, is about Horizon ahead: the starter
// cannot take a fresh, never-used worker id within its lease timeout.
func TestNewChunkNotHeldUpByLiveRows(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		r0 := named(request(db.DB, b.Dialect, "a"), "a@h@1@1")
		r0.Workers, r0.Layout = 2048, ruleL1
		take(t, r0) // the tables, the pool's rows, chunk 0
		// Every row of chunk 0 held, as 1024 live holders' rows look
		// (promise about 70 s ahead, as with the default heartbeat).
		now := time.Now().UnixMilli()
		_, err := db.Exec(fmt.Sprintf("UPDATE sys_sequence_slot SET fence = 1, instance = 'live', layout = '%s', "+
			"expires_ms = %d, promise_ms = %d", ruleL1, now+80000, now+70000))
		require.NoError(t, err)

		rx := named(request(db.DB, b.Dialect, "x"), "x@h@2@2")
		rx.Workers, rx.Layout = 2048, ruleL1
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		sx, err := Take(ctx, rx)
		t.Logf("%s: the 1025th starter: worker %d floor %v err %v", b.Name, sx.WorkerID,
			time.Duration(sx.Floor-time.Now().UnixMilli())*time.Millisecond, err)
		require.NoError(t, err, "a never-used worker id of a new chunk cannot be taken")
		assert.Less(t, sx.Floor, time.Now().UnixMilli()+1000)
	})
}

// holdL0 has H take worker 100 of 0/10/12 (ruleL0), the pool's layout in
// the tests of a pool row lost or edited beside a live holder.
func holdL0(t *testing.T, db *dbtest.DB, b dbtest.Backend) Slot {
	t.Helper()
	rh := named(request(db.DB, b.Dialect, "h"), "h@h@1@1")
	rh.Explicit, rh.WorkerID, rh.Layout = true, 100, ruleL0
	return take(t, rh)
}

// takeL1 is X's take of worker 200 of 0/11/11 (ruleL1), whose bits are
// worker 100's of 0/10/12, within 3 s; id is X's instance tag.
func takeL1(db *dbtest.DB, b dbtest.Backend, id string) (Slot, error) {
	rx := named(request(db.DB, b.Dialect, "x"), id)
	rx.Explicit, rx.WorkerID, rx.Layout, rx.Workers = true, 200, ruleL1, 2048
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return Take(ctx, rx)
}

// TestLayoutRowLostBesideAnotherLayout: H (0/10/12, worker 100) is live; its
// row and the '__layout__' row are deleted (the '__slots__' row is
// intact). X (0/11/11) takes worker 200, which has H's worker bits. The
// lost '__layout__' row beside rows that all have no layout (never held)
// reads as a repair: no conversion, no refusal while the deletion's window
// lasts; worker 200's row, made before, keeps its promise of 0.
func TestLayoutRowLostBesideAnotherLayout(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		sh := holdL0(t, db, b)
		_, err := db.Exec("DELETE FROM sys_sequence_slot WHERE worker_id = 100")
		require.NoError(t, err)
		_, err = db.Exec("DELETE FROM sys_sequence WHERE service_name = '" + schema.LayoutService + "'")
		require.NoError(t, err)

		sx, err := takeL1(db, b, "x@h@2@2")
		t.Logf("%s: H (worker 100 of 0/10/12) promised %d; X (worker 200 of 0/11/11): floor %d err %v", b.Name, sh.Promise, sx.Floor, err)
		if err == nil {
			assert.Greater(t, sx.Floor, sh.Promise, "worker 200 of 0/11/11 taken at %d, under the live worker 100 of 0/10/12's promise %d",
				sx.Floor, sh.Promise)
		} else {
			assert.True(t, errors.Is(err, ErrFloorAhead) || errors.Is(err, ErrLayout), "%v", err)
		}
	})
}

// TestLayoutRowForged: the pool is 0/10/12 and H holds worker 100 of it;
// the '__layout__' row is edited to name 0/11/11 (the copy in '__slots__'
// still says 0/10/12). A 0/11/11 starter X then asks for worker 200, whose
// bits are H's. Before the fix X trusted the edited row, saw no change of
// layout, overwrote the copy and claimed 200 under H's live lease (the
// chaos suite's long run, seed 131 on SQLite: two holdings overlapped).
// The two rows disagree: X's take is a change, and is refused while H
// lives.
func TestLayoutRowForged(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		sh := holdL0(t, db, b)
		_, err := db.Exec("UPDATE sys_sequence SET instance = '" + ruleL1 + "' WHERE service_name = '" + schema.LayoutService + "'")
		require.NoError(t, err)

		sx, err := takeL1(db, b, "x@h@2@2")
		require.ErrorIs(t, err, ErrLayout, "X (worker 200 of 0/11/11) took floor %d beside the live worker 100 of 0/10/12 (promise %d)",
			sx.Floor, sh.Promise)
		assert.Contains(t, err.Error(), "slot 100", "the refusal names the live slot of the pool's layout")
		var copyText string
		require.NoError(t, db.QueryRow("SELECT instance FROM sys_sequence WHERE service_name = '"+schema.SlotsService+"'").Scan(&copyText))
		assert.Contains(t, copyText, "layout="+strings.ReplaceAll(ruleL0, " ", "@"), "the refused take keeps the copy of the pool's layout")
	})
}

// TestLayoutRowForgedCopyLost: as TestLayoutRowForged, but the copy in
// '__slots__' is unreadable when '__layout__' is edited: written by an
// older entflake (no layout= key), made NULL, or the row deleted. With no
// copy to disagree, the slot rows decide: H's row says 0/10/12, so X's
// take is a change from it, refused while H lives (found by a review of
// the first fix: X took floor 1 beside H on all three databases).
func TestLayoutRowForgedCopyLost(t *testing.T) {
	edits := []struct{ name, sql string }{
		{"older-writer", "UPDATE sys_sequence SET instance = 'ttl=60000 until=0' WHERE service_name = '" + schema.SlotsService + "'"},
		{"null", "UPDATE sys_sequence SET instance = NULL WHERE service_name = '" + schema.SlotsService + "'"},
		{"deleted", "DELETE FROM sys_sequence WHERE service_name = '" + schema.SlotsService + "'"},
	}
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
				db := b.Fresh(t)
				sh := holdL0(t, db, b)
				_, err := db.Exec(e.sql)
				require.NoError(t, err)
				_, err = db.Exec("UPDATE sys_sequence SET instance = '" + ruleL1 + "' WHERE service_name = '" + schema.LayoutService + "'")
				require.NoError(t, err)
				for i := range 2 { // the second take meets what the first wrote back
					sx, err := takeL1(db, b, fmt.Sprintf("x@h@2@%d", i))
					require.ErrorIs(t, err, ErrLayout, "take %d: X (worker 200 of 0/11/11) took floor %d beside the live worker 100 of 0/10/12 (promise %d)",
						i, sx.Floor, sh.Promise)
				}
			})
		})
	}
}

// TestLayoutCopyEditedAlone: only the copy in '__slots__' is edited, to
// the pool's split with an earlier epoch, on a pool that once saw a
// deletion (its window's end stays recorded). The slot rows say the pool's
// layout, so the copy is the edited row: a starter of the pool's layout
// rewrites it and takes a slot, instead of a change from the copy whose
// floor, shifted by the epochs' difference, would refuse every starter
// (found by a review of the first fix).
func TestLayoutCopyEditedAlone(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		ctx := context.Background()
		const p = "0/10/12 2024-06-01T00:00:00.000Z"
		short := func(id string) Request {
			r := named(request(db.DB, b.Dialect, "a"), id)
			r.Layout, r.TTL, r.Horizon = p, time.Second, 500*time.Millisecond
			return r
		}
		r0 := short("a@h@1@1")
		r0.Explicit, r0.WorkerID = true, 5
		s0 := take(t, r0)
		require.NoError(t, Release(ctx, holding(db.DB, b.Dialect, s0), time.Now().UnixMilli()))
		_, err := db.Exec("DELETE FROM sys_sequence_slot WHERE worker_id = 5")
		require.NoError(t, err)
		r1 := short("a@h@1@2")
		r1.Explicit, r1.WorkerID = true, 6
		s1 := take(t, r1) // sees the deletion: a window until the clock + TTL
		require.NoError(t, Release(ctx, holding(db.DB, b.Dialect, s1), time.Now().UnixMilli()))
		time.Sleep(1500 * time.Millisecond) // the window passes
		_, err = db.Exec("UPDATE sys_sequence SET instance = REPLACE(instance, 'layout=0/10/12@2024-06-01', 'layout=0/10/12@2024-01-01') " +
			"WHERE service_name = '" + schema.SlotsService + "'")
		require.NoError(t, err)

		tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err = Take(tctx, short("a@h@1@3"))
		require.NoError(t, err, "a starter of the pool's own layout, after the copy alone was edited")
		var text string
		require.NoError(t, db.QueryRow("SELECT instance FROM sys_sequence WHERE service_name = '"+schema.SlotsService+"'").Scan(&text))
		assert.Contains(t, text, "layout=0/10/12@2024-06-01", "the edited copy is written back as the slot rows say")
	})
}

// TestLayoutRowForgedEarlierCopy: the pool is 0/10/12 (epoch E0); H's
// row is deleted while H lives, and '__layout__' is edited to 0/10/12 with
// epoch E0+1h; the copy keeps E0. X of 0/11/11 at E0+1h, which neither
// row names, changes the layout: from the copy, whose epoch is the
// earlier, so that X's time fields must start above H's, which they
// reach an hour from now: refused (from the edited row, X took the slot
// and repeated an hour of H's time fields: found by a review).
func TestLayoutRowForgedEarlierCopy(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		const l1, l2 = "0/10/12 2024-01-01T01:00:00.000Z", "0/11/11 2024-01-01T01:00:00.000Z"
		e0, e2 := int64(1704067200000), int64(1704067200000+3600000)
		rh := named(request(db.DB, b.Dialect, "h"), "h@h@1@1")
		rh.Explicit, rh.WorkerID, rh.Layout, rh.TTL, rh.Horizon = true, 100, ruleL0, 2*time.Second, 1500*time.Millisecond
		sh := take(t, rh)
		_, err := db.Exec("DELETE FROM sys_sequence_slot WHERE worker_id = 100")
		require.NoError(t, err)
		_, err = db.Exec("UPDATE sys_sequence SET instance = '" + l1 + "' WHERE service_name = '" + schema.LayoutService + "'")
		require.NoError(t, err)
		// The first take finds H's row deleted and opens a window of a TTL;
		// the second comes after it.
		for i := range 2 {
			if i == 1 {
				time.Sleep(2500 * time.Millisecond)
			}
			rx := named(request(db.DB, b.Dialect, "x"), fmt.Sprintf("x@h@2@%d", i))
			rx.Explicit, rx.WorkerID, rx.Layout, rx.Workers, rx.TTL, rx.Horizon = true, 200, l2, 2048, 2*time.Second, 1500*time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			sx, err := Take(ctx, rx)
			cancel()
			if err == nil {
				assert.Greater(t, sx.Floor-e2, sh.Promise-e0,
					"worker 200 of 0/11/11 (epoch +1h) starts at time field %d, within H's (worker 100 of 0/10/12, up to %d)", sx.Floor-e2, sh.Promise-e0)
				return
			}
			require.ErrorIs(t, err, ErrLayout)
			if i == 1 {
				// X's time fields reach H's an hour from now: refused, naming that.
				assert.Contains(t, err.Error(), "ahead of this clock")
			}
		}
	})
}

// TestLayoutRowLostDoesNotStick: the pool is 0/10/12; its only holder
// released (nothing of 0/10/12 is live), and the '__layout__' row is then
// deleted. 0/11/11 starters come, each retrying about every TTL/2 (as
// the background take does). Each locked take finds the '__layout__' row
// lost, moves until to its own clock + TTL, is refused (ErrLayout: "slot
// rows were found deleted") and writes the row back still unknown: the next
// starter slides the window again. No 0/11/11 starter ever succeeds.
func TestLayoutRowLostDoesNotStick(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		ctx := context.Background()
		const ttl = 2 * time.Second
		r0 := named(request(db.DB, b.Dialect, "old"), "old@h@1@1")
		r0.Layout, r0.TTL, r0.Horizon = ruleL0, ttl, 1500*time.Millisecond
		s0 := take(t, r0)
		require.NoError(t, Release(ctx, holding(db.DB, b.Dialect, s0), time.Now().UnixMilli()))
		time.Sleep(100 * time.Millisecond)
		_, err := db.Exec("DELETE FROM sys_sequence WHERE service_name = '" + schema.LayoutService + "'")
		require.NoError(t, err)

		start := time.Now()
		var last error
		for i := 0; time.Since(start) < 4*ttl; i++ {
			r1 := named(request(db.DB, b.Dialect, "new"), fmt.Sprintf("new@h@2@%d", i))
			r1.Layout, r1.Workers, r1.TTL, r1.Horizon = ruleL1, 2048, ttl, 1500*time.Millisecond
			tctx, cancel := context.WithTimeout(ctx, time.Second)
			s1, err := Take(tctx, r1)
			cancel()
			if err == nil {
				t.Logf("%s: 0/11/11 starter %d took worker %d after %v", b.Name, i, s1.WorkerID, time.Since(start).Round(time.Millisecond))
				return
			}
			last = err
			t.Logf("%s: %v: %v", b.Name, time.Since(start).Round(time.Millisecond), err)
			time.Sleep(ttl / 2)
		}
		var text string
		_ = db.QueryRow("SELECT instance FROM sys_sequence WHERE service_name = '" + schema.SlotsService + "'").Scan(&text)
		t.Errorf("%s: no 0/11/11 starter succeeded in %v (4 TTLs) after the '__layout__' row was deleted; last: %v; __slots__: %q",
			b.Name, time.Since(start).Round(time.Millisecond), last, text)
	})
}

// TestFreshPoolTwoStarters: two starters on a fresh database. A's
// locked take has seeded the pool's rows and made chunk 0 but not yet
// committed (held before its claim) when B's locked take starts. On
// PostgreSQL (READ COMMITTED) B's first lockMarkers sees no pool row (A's
// are not committed) and locks nothing; B's seed then waits for A's
// commit and does nothing; B computed "lost" from the first read, and the
// count finds A's 1024 rows: a deficit on a brand-new pool, told at ERROR
// ("pool rows found missing or unreadable"), with a window of a TTL.
func TestFreshPoolTwoStarters(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		hdb, h := hooked(t, db.Driver, db.DSN)
		ra := named(request(hdb, b.Dialect, "a"), "a@h@1@1")
		ra.Workers, ra.Layout = 2048, ruleL1
		as, release := takeHeld(t, h, "SET fence = fence + 1", ra, "A", "its claim")
		defer release()
		rb := named(request(db.DB, b.Dialect, "b"), "b@h@2@2")
		rb.Workers, rb.Layout = 2048, ruleL1
		var deleted []Deleted
		var mu sync.Mutex
		rb.Deleted = func(d Deleted) { mu.Lock(); deleted = append(deleted, d); mu.Unlock() }
		bs := goTakeWith(rb, 20*time.Second)
		time.Sleep(500 * time.Millisecond) // B waits on A's rows
		release()
		ra1, rb1 := <-as, <-bs
		require.NoError(t, ra1.err)
		require.NoError(t, rb1.err)
		var text string
		require.NoError(t, db.QueryRow("SELECT instance FROM sys_sequence WHERE service_name = '"+schema.SlotsService+"'").Scan(&text))
		t.Logf("%s: A worker %d, B worker %d; B told %+v; __slots__ %q", b.Name, ra1.slot.WorkerID, rb1.slot.WorkerID, deleted, text)
		assert.Empty(t, deleted, "a fresh pool read as one whose rows were lost")
		// A fixed id of the second chunk, at once.
		rc := named(request(db.DB, b.Dialect, "c"), "c@h@3@3")
		rc.Workers, rc.Layout, rc.Explicit, rc.WorkerID = 2048, ruleL1, true, 1500
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := Take(ctx, rc)
		assert.NoError(t, err, "worker 1500 of a fresh pool")
	})
}

// TestLayoutRowLostEpochLater: as TestLayoutRowLostBesideAnotherLayout, with the
// same bit split and the epoch moved an hour later: the repair skips the
// refusal of an epoch moved later than IDs issued, and the deleted row is
// made again at until in Unix ms, not shifted by the epochs' difference.
func TestLayoutRowLostEpochLater(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		const later = "0/10/12 2024-01-01T01:00:00.000Z"
		e0, e1 := int64(1704067200000), int64(1704067200000+3600000)
		rh := named(request(db.DB, b.Dialect, "h"), "h@h@1@1")
		rh.Explicit, rh.WorkerID, rh.Layout, rh.TTL, rh.Horizon = true, 100, ruleL0, 2*time.Second, 1500*time.Millisecond
		sh := take(t, rh)
		_, err := db.Exec("DELETE FROM sys_sequence_slot WHERE worker_id = 100")
		require.NoError(t, err)
		_, err = db.Exec("DELETE FROM sys_sequence WHERE service_name = '" + schema.LayoutService + "'")
		require.NoError(t, err)

		rx := named(request(db.DB, b.Dialect, "x"), "x@h@2@2")
		rx.Explicit, rx.WorkerID, rx.Layout, rx.TTL, rx.Horizon = true, 100, later, 2*time.Second, 1500*time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
		defer cancel()
		sx, err := Take(ctx, rx)
		t.Logf("%s: H's last time field %d; X's first %d; err %v", b.Name, sh.Promise-e0, sx.Floor-e1, err)
		if err == nil {
			assert.Greater(t, sx.Floor-e1, sh.Promise-e0, "worker 100 with the epoch an hour later repeats H's time fields")
		} else {
			assert.True(t, errors.Is(err, ErrFloorAhead) || errors.Is(err, ErrLayout), "%v", err)
		}
	})
}

// TestWarmTakeStatements: what a warm take sends (held: the same as
// on 9598c36, before issue 22's fixes).
func TestWarmTakeStatements(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		hdb, h := hooked(t, db.Driver, db.DSN)
		take(t, request(db.DB, b.Dialect, "a"))
		var mu sync.Mutex
		var qs []string
		h.set(func(q string) { mu.Lock(); qs = append(qs, strings.Fields(q)[0]); mu.Unlock() }, nil)
		take(t, named(request(hdb, b.Dialect, "b"), "b@h@2@2"))
		h.set(nil, nil)
		t.Logf("%s: warm take: %d statements: %v", b.Name, len(qs), qs)
		// The session's SET, the counter, the slot's read, the claim
		// (prepared and executed by go-sql-driver: two), the session put
		// back; on PostgreSQL the counter, the read, the claim; on SQLite
		// busy_timeout read and set around the same three.
		// (The hook sees a statement go-sql-driver prepares twice: its
		// ExecContext declines it, then it is prepared.) On TiDB every
		// claim runs in the locked take: its isolation's SET, START, the
		// pool rows' lock, the count, the read, the claim, COMMIT.
		want := map[string]int{dialect.MySQL: 6, dialect.Postgres: 3, dialect.SQLite: 6}[b.Dialect]
		if b.Dialect == dialect.MySQL && dbtest.TiDB(t) {
			want = 12
		}
		assert.Len(t, qs, want, "a warm take's statements: %v", qs)
	})
}

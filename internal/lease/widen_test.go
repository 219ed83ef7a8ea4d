package lease

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// wideLayout is testLayout with two more worker bits.
const wideLayout = "0/12/10 2024-01-01T00:00:00.000Z"

// holder is a request of layout l (testLayout or wideLayout), explicit
// when id >= 0.
// settle waits, on TiDB, for the background commit of the secondary keys
// of the transaction a widening just committed, before a test writes one
// of its rows from outside the lease. Seen with the embedded store
// (unistore) that tidb/run starts: client-go commits the secondaries in
// the background after the primary; a write that meets one first resolves
// that key alone (its lock says txnSize 0), the background commit of its
// batch then fails ("2PC failed commit key after primary key committed":
// the store's commit of a key so resolved finds neither lock nor record),
// and the batch's other keys, locked FOR UPDATE and not written, stay
// locked. Plain reads skip such locks; a later locking read waits about a
// second for each (the census's and lockedCount's lock of every row: some 17
// minutes for 1,023), which is what failed TestWidenFinishSeesDeletion and
// TestWidenFencesWhatItFloors under load (3 runs of 30; the log's lock
// waits named keys of committed transactions, one key a second). The
// lease itself has no such pause: its statements are what the tests
// check. Whether a TiKV cluster leaves such locks is not known here (none
// runs here); docs/databases.md says what TiDB is tested on.
func settle(t *testing.T, b dbtest.Backend) {
	t.Helper()
	if b.Dialect == dialect.MySQL && dbtest.TiDB(t) {
		time.Sleep(time.Second)
	}
}

func holder(db *sql.DB, d, instance, layout string, id int64) Request {
	r := request(db, d, "widen")
	r.Instance, r.Layout = instance, layout
	if layout == wideLayout {
		r.Workers = 4096
	}
	if id >= 0 {
		r.Explicit, r.WorkerID = true, id
	}
	return r
}

func tryTake(r Request) (Slot, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return Take(ctx, r)
}

func release(t testing.TB, r Request, s Slot, lastMs int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, Release(ctx, r.Holding(s), lastMs))
}

// TestWiden: the steps of a widening from 10 to 12 worker bits while
// holders of both layouts live: a new worker id is refused while its old
// one lives and taken above its promise once it is free, an old one is
// refused while one of its new ones lives, the new layout's takes stay off
// the old layout's rows and shared IDs, and the widening finishes only
// once no old slot lives, flooring the old rows for the new layout.
func TestWiden(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_, err := Widen(ctx, db.DB, b.Dialect, wideLayout, false)
		require.ErrorIs(t, err, ErrNoPool)

		old := map[int64]Request{}
		oldSlots := map[int64]Slot{}
		for _, w := range []int64{10, 300, 301} {
			r := holder(db.DB, b.Dialect, fmt.Sprintf("old%d@h@1@1", w), testLayout, w)
			old[w], oldSlots[w] = r, take(t, r)
		}
		// Without a widening, the wider layout is a change, refused.
		_, err = tryTake(holder(db.DB, b.Dialect, "early@h@1@1", wideLayout, -1))
		require.ErrorIs(t, err, ErrLayout)
		assert.Contains(t, err.Error(), "(a wider worker field moves online: entflake widen -to 0/12/10)")

		for _, bad := range []string{"0/12/10 2025-01-01T00:00:00.000Z", "0/9/13 2024-01-01T00:00:00.000Z", "1/11/10 2024-01-01T00:00:00.000Z",
			"0/10/12 2024-01-01T00:00:00.000Z"} {
			_, err := Widen(ctx, db.DB, b.Dialect, bad, true)
			require.ErrorIs(t, err, ErrLayout, bad)
		}
		w, err := Widen(ctx, db.DB, b.Dialect, wideLayout, false)
		require.NoError(t, err)
		assert.False(t, w.Applied)
		assert.Equal(t, map[string]int{testLayout: 3}, w.Live)
		require.Len(t, w.Shared, 2, "old worker ids 256 and up share IDs with the new layout's")
		assert.Equal(t, []int64{300, 301}, []int64{w.Shared[0].WorkerID, w.Shared[1].WorkerID})
		layout, _ := poolTexts(t, db.DB)
		assert.Equal(t, testLayout, layout, "a dry run changes nothing")
		w, err = Widen(ctx, db.DB, b.Dialect, wideLayout, true)
		require.NoError(t, err)
		assert.True(t, w.Applied)
		layout, slots := poolTexts(t, db.DB)
		assert.Equal(t, testLayout+" widen=0/12/10@2024-01-01T00:00:00.000Z", layout)
		assert.Contains(t, slots, " widen=0/12/10@2024-01-01T00:00:00.000Z")

		// No range moves during a widening.
		_, err = SetRange(ctx, db.DB, b.Dialect, 0, 511, false, true)
		require.ErrorIs(t, err, ErrWidening)
		_, err = tryTake(ranged(db.DB, b.Dialect, "ranged@h@1@1", 0, 511))
		require.ErrorIs(t, err, ErrRange)

		// New worker ids under a live old one, or on the old layout's rows.
		for _, v := range []int64{1200, 1203, 1204} {
			_, err := tryTake(holder(db.DB, b.Dialect, "new@h@1@1", wideLayout, v))
			require.ErrorIs(t, err, ErrHeld, "%d", v)
			assert.Contains(t, err.Error(), fmt.Sprintf("issues IDs of worker id %d of %q, which is live", v>>2, testLayout))
		}
		_, err = tryTake(holder(db.DB, b.Dialect, "new@h@1@1", wideLayout, 40))
		require.ErrorIs(t, err, ErrHeld)
		assert.Contains(t, err.Error(), "until the pool's widening is finished")

		// 301 stops, having issued up to a millisecond 3 s ahead: a new
		// worker id under it starts above that.
		last := time.Now().Add(3 * time.Second).UnixMilli()
		release(t, old[301], oldSlots[301], last)
		delete(old, 301)
		r1205 := holder(db.DB, b.Dialect, "new1205@h@1@1", wideLayout, 1205)
		ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Minute)
		s1205, err := Take(ctx2, r1205)
		cancel2()
		require.NoError(t, err)
		assert.Equal(t, last+1, s1205.Floor, "above the old slot's promise")

		// The old slot is refused while its new one lives.
		_, err = tryTake(holder(db.DB, b.Dialect, "old301b@h@1@1", testLayout, 301))
		require.ErrorIs(t, err, ErrHeld)
		assert.Contains(t, err.Error(), fmt.Sprintf("issues IDs of worker id 1205 of %q, which is live", wideLayout))

		// Takes of either layout that are not explicit keep off them all.
		var news []int64
		for i := range 6 {
			s := take(t, holder(db.DB, b.Dialect, fmt.Sprintf("n%d@h@1@1", i), wideLayout, -1))
			news = append(news, s.WorkerID)
			assert.GreaterOrEqual(t, s.WorkerID, int64(1024))
			assert.NotEqual(t, int64(300), s.WorkerID>>2)
			assert.NotEqual(t, int64(1205), s.WorkerID)
		}
		for i := range 4 {
			r := holder(db.DB, b.Dialect, fmt.Sprintf("o%d@h@1@1", i), testLayout, -1)
			s := take(t, r)
			old[s.WorkerID], oldSlots[s.WorkerID] = r, s
			assert.NotContains(t, []int64{10, 300, 301}, s.WorkerID)
			for _, v := range news {
				assert.NotEqual(t, v>>2, s.WorkerID)
			}
		}

		// Finishing waits for the old layout's instances; cancelling for
		// the new one's.
		_, err = FinishWiden(ctx, db.DB, b.Dialect, true)
		require.ErrorIs(t, err, ErrWidening)
		assert.Contains(t, err.Error(), Count(len(old), "slot")+" of the old layout")
		_, err = CancelWiden(ctx, db.DB, b.Dialect, true)
		require.ErrorIs(t, err, ErrWidening)
		top := int64(0)
		for id, r := range old {
			last := time.Now().UnixMilli() + 3000 + id
			top = max(top, last)
			release(t, r, oldSlots[id], last)
		}
		w, err = FinishWiden(ctx, db.DB, b.Dialect, false)
		require.NoError(t, err)
		assert.False(t, w.Applied)
		assert.Equal(t, map[string]int{wideLayout: 7}, w.Live)
		w, err = FinishWiden(ctx, db.DB, b.Dialect, true)
		require.NoError(t, err)
		assert.True(t, w.Applied)
		layout, slots = poolTexts(t, db.DB)
		assert.Contains(t, layout, wideLayout+" floor=")
		assert.NotContains(t, slots, "widen=")

		// Now the whole new layout is the pool's, floored above the old
		// layout's IDs; the old layout is a change, refused.
		ctx3, cancel3 := context.WithTimeout(context.Background(), 30*time.Second)
		s40, err := Take(ctx3, holder(db.DB, b.Dialect, "new40@h@1@1", wideLayout, 40))
		cancel3()
		require.NoError(t, err)
		assert.Greater(t, s40.Floor, top, "above every old promise")
		_, err = tryTake(holder(db.DB, b.Dialect, "late-old@h@1@1", testLayout, -1))
		require.ErrorIs(t, err, ErrLayout)
	})
}

// TestWidenCancel: a widening cancelled before any new instance lived
// leaves the old layout the pool's, with all its worker ids, and refuses
// the new one again.
func TestWidenCancel(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		take(t, holder(db.DB, b.Dialect, "a@h@1@1", testLayout, 700))
		_, err := Widen(ctx, db.DB, b.Dialect, wideLayout, true)
		require.NoError(t, err)
		settle(t, b)
		nr := holder(db.DB, b.Dialect, "n@h@1@1", wideLayout, -1)
		ns := take(t, nr)
		_, err = CancelWiden(ctx, db.DB, b.Dialect, true)
		require.ErrorIs(t, err, ErrWidening)
		lastNew := time.Now().UnixMilli()
		release(t, nr, ns, lastNew)
		w, err := CancelWiden(ctx, db.DB, b.Dialect, true)
		require.NoError(t, err)
		assert.True(t, w.Applied)
		layout, _ := poolTexts(t, db.DB)
		pt := parsePoolText(layout)
		assert.Equal(t, testLayout, pt.layout, "the old layout stays")
		assert.Empty(t, pt.widen, "and widens no more")
		assert.Greater(t, pt.floor, lastNew, "rows made later start above the new layout's last IDs")
		_, err = tryTake(holder(db.DB, b.Dialect, "n2@h@1@1", wideLayout, -1))
		require.ErrorIs(t, err, ErrLayout)
		take(t, holder(db.DB, b.Dialect, "b@h@1@1", testLayout, 701))

		// A new instance that issued under an old worker id, then the
		// cancel: the old worker id's next take starts above its IDs,
		// which after the cancel no take reads from the new row.
		_, err = Widen(ctx, db.DB, b.Dialect, wideLayout, true)
		require.NoError(t, err)
		settle(t, b)
		vr := holder(db.DB, b.Dialect, "v@h@1@1", wideLayout, 4*300+3)
		vs := take(t, vr)
		last := time.Now().Add(2 * time.Second).UnixMilli()
		release(t, vr, vs, last)
		_, err = CancelWiden(ctx, db.DB, b.Dialect, true)
		require.NoError(t, err)
		ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel2()
		s300, err := Take(ctx2, holder(db.DB, b.Dialect, "c@h@1@1", testLayout, 300))
		require.NoError(t, err)
		assert.Greater(t, s300.Floor, last, "above the new layout's IDs under it")
	})
}

// TestWidenTo4096: a pool widened online from 10 to 12 worker bits holds
// 4,096 live holders once the widening is finished, all distinct, and the
// next take finds every worker id held.
func TestWidenTo4096(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		if dbtest.TiDB(t) {
			// Every take there is the locked take, one at a time on the
			// pool's rows: 4,096 of them take four minutes. The issue asks
			// 4,096 of MariaDB and PostgreSQL; TestWiden and TestWidenFleet
			// run on TiDB.
			t.Skip("TiDB: 4,096 takes one at a time take minutes; TestWiden and TestWidenFleet cover TiDB")
		}
		db := b.Fresh(t)
		db.SetMaxOpenConns(16)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		long := func(r Request) Request { r.TTL = 20 * time.Minute; return r }
		var olds []Request
		var oldSlots []Slot
		for i := range 8 {
			r := long(holder(db.DB, b.Dialect, fmt.Sprintf("old%d@h@1@1", i), testLayout, int64(i*130)))
			olds, oldSlots = append(olds, r), append(oldSlots, take(t, r))
		}
		_, err := Widen(ctx, db.DB, b.Dialect, "0/12/10", true)
		require.NoError(t, err)
		settle(t, b)
		held := map[int64]bool{}
		for i := range 8 {
			s := take(t, long(holder(db.DB, b.Dialect, fmt.Sprintf("early%d@h@1@1", i), wideLayout, -1)))
			held[s.WorkerID] = true
		}
		for i, r := range olds {
			release(t, r, oldSlots[i], time.Now().UnixMilli())
		}
		_, err = FinishWiden(ctx, db.DB, b.Dialect, true)
		require.NoError(t, err)

		var (
			mu   sync.Mutex
			errs []error
			wg   sync.WaitGroup
			next atomic.Int64
		)
		for range 8 {
			wg.Go(func() {
				for n := next.Add(1); n <= 4096-8; n = next.Add(1) {
					s, err := Take(ctx, long(holder(db.DB, b.Dialect, fmt.Sprintf("fill%d@h@1@1", n), wideLayout, -1)))
					mu.Lock()
					if err != nil {
						errs = append(errs, err)
					} else {
						if held[s.WorkerID] {
							errs = append(errs, fmt.Errorf("worker id %d taken twice", s.WorkerID))
						}
						held[s.WorkerID] = true
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		require.Empty(t, errs)
		require.Len(t, held, 4096)
		for id := range held {
			require.True(t, id >= 0 && id < 4096, "%d", id)
		}
		_, err = tryTake(long(holder(db.DB, b.Dialect, "one-more@h@1@1", wideLayout, -1)))
		require.ErrorIs(t, err, ErrAllHeld)
	})
}

// The holes a review of the widening found (each failed on the code
// before its fix, on MariaDB, PostgreSQL and SQLite).

// TestWidenRowDeleted: a row of the other layout that shares a slot's IDs
// deleted while its holder lives (either way round): the take reads no
// row there, and must start above the deletion window (the lost holder's
// promise is below it), or be refused.
func TestWidenRowDeleted(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		for _, c := range []struct {
			name                  string
			first, second         Request
			deleted               int64
			secondLayout, deleter string
		}{
			{name: "old row", deleted: 300},
			{name: "new row", deleted: 1200},
		} {
			db := b.Fresh(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			var held Slot
			if c.deleted == 300 {
				held = take(t, holder(db.DB, b.Dialect, "old300@h@1@1", testLayout, 300))
				_, err := Widen(ctx, db.DB, b.Dialect, wideLayout, true)
				require.NoError(t, err)
				settle(t, b)
				take(t, holder(db.DB, b.Dialect, "n1500@h@1@1", wideLayout, 1500)) // the new chunk made before the deletion
			} else {
				take(t, holder(db.DB, b.Dialect, "old10@h@1@1", testLayout, 10))
				_, err := Widen(ctx, db.DB, b.Dialect, wideLayout, true)
				require.NoError(t, err)
				settle(t, b)
				held = take(t, holder(db.DB, b.Dialect, "new1200@h@1@1", wideLayout, 1200))
			}
			_, err := db.ExecContext(ctx, fmt.Sprintf("DELETE FROM sys_sequence_slot WHERE worker_id = %d", c.deleted))
			require.NoError(t, err)
			next := holder(db.DB, b.Dialect, "new1200@h@1@1", wideLayout, 1200)
			if c.deleted == 1200 {
				next = holder(db.DB, b.Dialect, "old300@h@1@1", testLayout, 300)
			}
			s, err := tryTake(next)
			if err == nil {
				assert.Greater(t, s.Floor, held.Promise, "%s: the take starts above the lost holder's promise", c.name)
			} else {
				require.ErrorIs(t, err, ErrFloorAhead, c.name)
			}
			// Neither the finish nor the cancel runs over the deletion.
			_, err = FinishWiden(ctx, db.DB, b.Dialect, true)
			require.ErrorIs(t, err, ErrWidening, c.name)
			_, err = CancelWiden(ctx, db.DB, b.Dialect, true)
			require.ErrorIs(t, err, ErrWidening, c.name)
			cancel()
		}
	})
}

// TestWidenFinishSeesDeletion: an old row deleted under its live holder,
// then the finish, with no take in between to count the rows: refused,
// not a pool whose new rows start below that holder's promise.
func TestWidenFinishSeesDeletion(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		take(t, holder(db.DB, b.Dialect, "old100@h@1@1", testLayout, 100))
		_, err := Widen(ctx, db.DB, b.Dialect, wideLayout, true)
		require.NoError(t, err)
		settle(t, b)
		_, err = db.ExecContext(ctx, "DELETE FROM sys_sequence_slot WHERE worker_id = 100")
		require.NoError(t, err)
		_, err = FinishWiden(ctx, db.DB, b.Dialect, true)
		require.ErrorIs(t, err, ErrWidening)
		assert.Contains(t, err.Error(), "slot rows were deleted")
		_, err = CancelWiden(ctx, db.DB, b.Dialect, true)
		require.ErrorIs(t, err, ErrWidening)
	})
}

// TestWidenEditedAway: the '__layout__' row edited to drop the widening
// (its copy in '__slots__' still names it): the widening stands, and an
// old take under a live new holder is refused.
func TestWidenEditedAway(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		take(t, holder(db.DB, b.Dialect, "old10@h@1@1", testLayout, 10))
		_, err := Widen(ctx, db.DB, b.Dialect, wideLayout, true)
		require.NoError(t, err)
		settle(t, b)
		take(t, holder(db.DB, b.Dialect, "new1200@h@1@1", wideLayout, 1200))
		_, err = db.ExecContext(ctx, dbtest.Rebind(b.Dialect, "UPDATE sys_sequence SET instance = ? WHERE service_name = '__layout__'"), testLayout)
		require.NoError(t, err)
		_, err = tryTake(holder(db.DB, b.Dialect, "old300@h@1@1", testLayout, 300))
		require.ErrorIs(t, err, ErrHeld)
		assert.Contains(t, err.Error(), "issues IDs of worker id 1200")
		layout, slots := poolTexts(t, db.DB)
		assert.Contains(t, layout, " widen=0/12/10@", "put back from the copy")
		assert.Contains(t, slots, " widen=0/12/10@")
	})
}

// TestWidenManyBits: a widening by more bits than the old layout has
// (0/2/20 to 0/5/17): old worker 0's new workers straddle 2^W, and the
// old take of 0 still checks those from 2^W up.
func TestWidenManyBits(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		const from, to = "0/2/20 2024-01-01T00:00:00.000Z", "0/5/17 2024-01-01T00:00:00.000Z"
		mk := func(inst, layout string, workers, id int64) Request {
			r := request(db.DB, b.Dialect, "widen")
			r.Instance, r.Layout, r.Workers, r.Explicit, r.WorkerID = inst, layout, workers, true, id
			return r
		}
		take(t, mk("old3@h@1@1", from, 4, 3))
		_, err := Widen(ctx, db.DB, b.Dialect, to, true)
		require.NoError(t, err)
		settle(t, b)
		take(t, mk("new5@h@1@1", to, 32, 5)) // 5>>3 == 0: IDs of old worker 0
		_, err = tryTake(mk("old0@h@1@1", from, 4, 0))
		require.ErrorIs(t, err, ErrHeld)
	})
}

// TestWidenFencesWhatItFloors: a take under an expired slot of the other
// layout moves that slot's fence, so that a renewal its holder sent
// before the slot expired (whose NOW, fixed at its start, still reads it
// live) cannot revive it once the take has committed; a cancel fences the
// wider layout's rows the same way.
func TestWidenFencesWhatItFloors(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		fence := func(id int64) int64 {
			var f int64
			require.NoError(t, db.QueryRow(fmt.Sprintf("SELECT fence FROM sys_sequence_slot WHERE worker_id = %d", id)).Scan(&f))
			return f
		}
		or := holder(db.DB, b.Dialect, "old300@h@1@1", testLayout, 300)
		take(t, or)
		_, err := Widen(ctx, db.DB, b.Dialect, wideLayout, true)
		require.NoError(t, err)
		settle(t, b)
		_, err = db.ExecContext(ctx, "UPDATE sys_sequence_slot SET expires_ms = 1, promise_ms = 1 WHERE worker_id = 300") // expired, long ago
		require.NoError(t, err)
		before := fence(300)
		nr := holder(db.DB, b.Dialect, "new1200@h@1@1", wideLayout, 1200)
		ns := take(t, nr)
		assert.Equal(t, before+1, fence(300), "the old slot is fenced")

		release(t, nr, ns, time.Now().UnixMilli())
		before = fence(1200)
		_, err = CancelWiden(ctx, db.DB, b.Dialect, true)
		require.NoError(t, err)
		assert.Equal(t, before+1, fence(1200), "the cancel fences the new rows")
		// The rows it fenced that were never held are not holders
		// (issue 33, item 3): every slot Holders lists was held.
		_, hs, err := Holders(ctx, db.DB, b.Dialect)
		require.NoError(t, err)
		ids := map[int64]bool{}
		for _, h := range hs {
			ids[h.WorkerID] = true
			assert.NotEmpty(t, h.Instance, "worker id %d (fence %d) listed, never held", h.WorkerID, h.Fence)
		}
		assert.Equal(t, map[int64]bool{300: true, 1200: true}, ids)
	})
}

package lease

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// ranged is request with a worker range and an instance tag of its own.
func ranged(db *sql.DB, d, instance string, lo, hi int64) Request {
	r := request(db, d, "ranged")
	r.Instance, r.Lo, r.Hi = instance, lo, hi
	return r
}

// poolTexts reads the instance columns of the pool's two rows.
func poolTexts(t testing.TB, db *sql.DB) (layout, slots string) {
	t.Helper()
	require.NoError(t, db.QueryRow("SELECT instance FROM sys_sequence WHERE service_name = '__layout__'").Scan(&layout))
	require.NoError(t, db.QueryRow("SELECT instance FROM sys_sequence WHERE service_name = '__slots__'").Scan(&slots))
	return layout, slots
}

// TestRangeTakes: takes with a range hand out its worker ids and no
// other, many at once, and say that the range is full when it is; a
// released one is handed out again.
func TestRangeTakes(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		db.SetMaxOpenConns(8)
		var n atomic.Int64
		vals := takeConcurrently(t, 6, func(ctx context.Context) (int64, error) {
			l, err := Take(ctx, ranged(db.DB, b.Dialect, fmt.Sprintf("r%d@h@1@1", n.Add(1)), 700, 705))
			return l.WorkerID, err
		})
		slices.Sort(vals)
		assert.Equal(t, seq(700, 705), vals, "six takes of 700..705 hold all six")

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r := ranged(db.DB, b.Dialect, "seventh@h@1@1", 700, 705)
		_, err := Take(ctx, r)
		require.ErrorIs(t, err, ErrAllHeld)
		assert.Contains(t, err.Error(), "6 of 6 live in the worker range 700..705")

		// Release 703: the next take of the range gets it.
		var h Holding
		require.NoError(t, db.QueryRow("SELECT fence, instance FROM sys_sequence_slot WHERE worker_id = 703").Scan(&h.Fence, &h.Instance))
		h.DB, h.Dialect, h.WorkerID = db.DB, b.Dialect, 703
		require.NoError(t, Release(ctx, h, 0))
		assert.Equal(t, int64(703), take(t, r).WorkerID)

		layout, slots := poolTexts(t, db.DB)
		assert.Equal(t, testLayout+" range=700-705", layout)
		assert.Contains(t, slots, " range=700-705")
	})
}

// TestRangeRefused: while a slot is live, a take with another range than
// the pool's, or with none, is refused with ErrRange, naming both and a
// holder; with none live, the record becomes the take's.
func TestRangeRefused(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		first := ranged(db.DB, b.Dialect, "a@h@1@1", 0, 511)
		s := take(t, first)
		require.LessOrEqual(t, s.WorkerID, int64(511))

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, c := range []struct {
			name   string
			lo, hi int64
			ours   string
		}{
			{"other region", 512, 1023, "512..1023"},
			{"overlapping", 256, 767, "256..767"},
			{"none", 0, 0, "the whole layout (0..1023)"},
			{"whole layout given", 0, 1023, "the whole layout (0..1023)"},
		} {
			_, err := Take(ctx, ranged(db.DB, b.Dialect, "b@h@1@1", c.lo, c.hi))
			require.ErrorIs(t, err, ErrRange, c.name)
			assert.NotErrorIs(t, err, ErrUndecided, c.name)
			assert.Contains(t, err.Error(), "ours is "+c.ours+", the pool's is 0..511", c.name)
			assert.Contains(t, err.Error(), `instance "a@h@1@1"`, c.name)
		}
		layout, _ := poolTexts(t, db.DB)
		assert.Equal(t, testLayout+" range=0-511", layout, "the refusals left the record")

		// The same range is taken in, beside the live holder.
		assert.NotEqual(t, s.WorkerID, take(t, ranged(db.DB, b.Dialect, "c@h@1@1", 0, 511)).WorkerID)

		// Nothing live: the next take's range becomes the pool's.
		_, err := db.Exec("UPDATE sys_sequence_slot SET expires_ms = 0")
		require.NoError(t, err)
		s = take(t, ranged(db.DB, b.Dialect, "d@h@1@1", 512, 1023))
		assert.GreaterOrEqual(t, s.WorkerID, int64(512))
		layout, slots := poolTexts(t, db.DB)
		assert.Equal(t, testLayout+" range=512-1023", layout)
		assert.Contains(t, slots, " range=512-1023")
		_, err = Take(ctx, ranged(db.DB, b.Dialect, "e@h@1@1", 0, 511))
		require.ErrorIs(t, err, ErrRange)

		// And back to none, once nothing is live: no range recorded.
		_, err = db.Exec("UPDATE sys_sequence_slot SET expires_ms = 0")
		require.NoError(t, err)
		take(t, request(db.DB, b.Dialect, "whole"))
		layout, slots = poolTexts(t, db.DB)
		assert.Equal(t, testLayout, layout)
		assert.NotContains(t, slots, "range=")
	})
}

// TestRangeRowLost: the '__layout__' row deleted, or its range edited
// away, beside live holders: the copy in '__slots__' puts the range back,
// and a take with the pool's range is not refused (nor one with another
// range taken in).
func TestRangeRowLost(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		for _, edit := range []string{
			"DELETE FROM sys_sequence WHERE service_name = '__layout__'",
			"UPDATE sys_sequence SET instance = NULL WHERE service_name = '__layout__'",
		} {
			db := b.Fresh(t)
			take(t, ranged(db.DB, b.Dialect, "a@h@1@1", 100, 200))
			_, err := db.Exec(edit)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err = Take(ctx, ranged(db.DB, b.Dialect, "x@h@1@1", 300, 400))
			cancel()
			require.ErrorIs(t, err, ErrRange, edit)
			s := take(t, ranged(db.DB, b.Dialect, "b@h@1@1", 100, 200))
			assert.True(t, s.WorkerID >= 100 && s.WorkerID <= 200, edit)
			layout, _ := poolTexts(t, db.DB)
			assert.True(t, strings.HasPrefix(layout, testLayout+" range=100-200"), "%s: %q", edit, layout)
		}
	})
}

// TestSetRange: the operator's change of a live pool's range: a dry run
// says what it would do and changes nothing; the change lists the live
// slots outside the new range, takes of the new range are taken in at
// once, and takes of the old one refused; a range that does not fit the
// layout, or a database without a pool, is refused.
func TestSetRange(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := SetRange(ctx, db.DB, b.Dialect, 0, 511, false, false)
		require.ErrorIs(t, err, ErrNoPool)

		var held []int64
		for i := range 4 {
			held = append(held, take(t, ranged(db.DB, b.Dialect, fmt.Sprintf("a%d@h@1@1", i), 500, 520)).WorkerID)
		}
		slices.Sort(held)

		c, err := SetRange(ctx, db.DB, b.Dialect, 0, 0, true, false)
		require.NoError(t, err)
		assert.Equal(t, RangeChange{Layout: testLayout, Workers: 1024, From: "500-520", To: "500-520", NowMs: c.NowMs}, c)

		c, err = SetRange(ctx, db.DB, b.Dialect, 0, 501, false, false)
		require.NoError(t, err)
		assert.False(t, c.Applied)
		assert.Equal(t, "500-520", c.From)
		assert.Equal(t, "0-501", c.To)
		var outside []int64
		for _, h := range c.Outside {
			outside = append(outside, h.WorkerID)
			assert.Equal(t, StateLive, h.State(c.NowMs))
		}
		var above []int64
		for _, id := range held {
			if id > 501 {
				above = append(above, id)
			}
		}
		require.NotEmpty(t, above)
		assert.Equal(t, above, outside, "the live slots above 501")
		layout, _ := poolTexts(t, db.DB)
		assert.Equal(t, testLayout+" range=500-520", layout, "a dry run changes nothing")

		c, err = SetRange(ctx, db.DB, b.Dialect, 0, 501, false, true)
		require.NoError(t, err)
		assert.True(t, c.Applied)
		assert.Len(t, c.Outside, len(above))
		layout, slots := poolTexts(t, db.DB)
		assert.Equal(t, testLayout+" range=0-501", layout)
		assert.Contains(t, slots, " range=0-501")

		s := take(t, ranged(db.DB, b.Dialect, "new@h@1@1", 0, 501))
		assert.LessOrEqual(t, s.WorkerID, int64(501))
		_, err = Take(ctx, ranged(db.DB, b.Dialect, "old@h@1@1", 500, 520))
		require.ErrorIs(t, err, ErrRange)

		// The old range's holders still renew: their slots are theirs.
		var h Holding
		require.NoError(t, db.QueryRow(fmt.Sprintf("SELECT fence, instance FROM sys_sequence_slot WHERE worker_id = %d", above[0])).
			Scan(&h.Fence, &h.Instance))
		h.DB, h.Dialect, h.WorkerID = db.DB, b.Dialect, above[0]
		require.NoError(t, Renew(ctx, h, time.Minute.Milliseconds(), time.Now().UnixMilli()))

		// Back to the whole layout.
		c, err = SetRange(ctx, db.DB, b.Dialect, 0, 0, false, true)
		require.NoError(t, err)
		assert.Equal(t, "", c.To)
		assert.Empty(t, c.Outside)
		layout, _ = poolTexts(t, db.DB)
		assert.Equal(t, testLayout, layout)

		for _, r := range [][2]int64{{5, 5}, {9, 3}, {-1, 10}, {0, 1024}} {
			_, err := SetRange(ctx, db.DB, b.Dialect, r[0], r[1], false, true)
			require.Error(t, err, "%v", r)
			assert.Contains(t, err.Error(), "worker range", "%v", r)
		}
	})
}

// TestRangeRequest: a request's range is checked before any I/O.
func TestRangeRequest(t *testing.T) {
	db := dbtest.SQLite(t)
	ctx := context.Background()
	for _, c := range []struct {
		lo, hi int64
		want   string
	}{
		{-1, 5, "negative"},
		{5, 5, "fewer than two"},
		{6, 5, "fewer than two"},
		{0, 1024, "past the layout's last worker id, 1023"},
	} {
		_, err := Take(ctx, ranged(db.DB, "sqlite3", "a@h@1@1", c.lo, c.hi))
		require.Error(t, err)
		assert.Contains(t, err.Error(), c.want)
	}
	r := ranged(db.DB, "sqlite3", "a@h@1@1", 10, 20)
	r.Explicit, r.WorkerID = true, 21
	_, err := Take(ctx, r)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "worker id 21 is outside 10..20")
	r.WorkerID = 20
	assert.Equal(t, int64(20), take(t, r).WorkerID)
}

// TestRangeLifetime: the lifetime lease's counter runs through the range.
func TestRangeLifetime(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		r := ranged(db.DB, b.Dialect, "life@h@1@1", 40, 42)
		var got []int64
		wrapped := 0
		for range 7 {
			l := mustTakeForLife(t, r)
			got = append(got, l.WorkerID)
			if l.Wrapped {
				wrapped++
			}
		}
		assert.Equal(t, []int64{41, 42, 40, 41, 42, 40, 41}, got)
		assert.Equal(t, 2, wrapped)
	})
}

// TestRangeChangeOrdersClaims: a claim read before the operator's change
// of range and sent after it commits matches nothing (it compares the
// '__layout__' row, which records the range), and the take, read again,
// is refused: no slot is claimed under a range the pool no longer has.
// And a claim sent while the change holds the pool's rows waits for it,
// and is refused the same way.
func TestRangeChangeOrdersClaims(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		take(t, ranged(db.DB, b.Dialect, "live@h@1@1", 500, 520)) // live throughout
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if !dbtest.TiDB(t) {
			claimAfterChange(t, b, db)
			_, err := SetRange(ctx, db.DB, b.Dialect, 500, 520, false, true)
			require.NoError(t, err)
		}
		// (On TiDB every claim runs inside the locked take, which holds the
		// pool's rows: a change cannot commit between its read and its
		// claim, and the hook above would wait for itself.)

		// The change holds the pool's rows while a take of the old range
		// runs; the take waits, then is refused.
		hdb2, h2 := hooked(t, db.Driver, db.DSN)
		done := make(chan error, 1)
		h2.set(func(q string) {
			if !strings.Contains(q, "s.expires_ms >= k.now_ms") {
				return
			}
			go func() {
				tctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, err := Take(tctx, ranged(db.DB, b.Dialect, "during@h@1@1", 500, 520))
				done <- err
			}()
			time.Sleep(300 * time.Millisecond) // the take reaches the pool's rows' lock, or is on its way
		}, nil)
		c, err := SetRange(ctx, hdb2, b.Dialect, 0, 499, false, true)
		require.NoError(t, err)
		require.True(t, c.Applied)
		err = <-done
		require.ErrorIs(t, err, ErrRange)
		for _, o := range c.Outside {
			assert.NotEqual(t, "during@h@1@1", o.Instance)
		}
	})
}

// claimAfterChange is TestRangeChangeOrdersClaims's first case: the
// operator's change commits between a take's read and its claim.
func claimAfterChange(t *testing.T, b dbtest.Backend, db *dbtest.DB) {
	hdb, h := hooked(t, db.Driver, db.DSN)
	changed := false
	h.set(func(q string) {
		if changed || !strings.HasPrefix(q, "UPDATE sys_sequence_slot SET fence = fence + 1") {
			return
		}
		changed = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := SetRange(ctx, db.DB, b.Dialect, 0, 499, false, true)
		require.NoError(t, err)
		require.True(t, c.Applied)
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Take(ctx, ranged(hdb, b.Dialect, "late@h@1@1", 500, 520))
	require.True(t, changed, "the claim was sent")
	require.ErrorIs(t, err, ErrRange, "took %d", s.WorkerID)
	var n int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM sys_sequence_slot WHERE instance = 'late@h@1@1'").Scan(&n))
	assert.Zero(t, n, "no slot claimed by the late take")
}

// TestCheckRanges: overlapping ranges are found pairwise, with the worker
// ids they share; gaps are the worker ids no pool has; pools of another
// layout or epoch, or one that widens, are refused, naming it.
func TestCheckRanges(t *testing.T) {
	const l = testLayout
	p := func(rng string) PoolRange { return PoolRange{Layout: l, Workers: 1024, From: rng} }
	_, ov, gaps, err := CheckRanges([]PoolRange{p("0-511"), p("0-600")})
	require.NoError(t, err)
	assert.Equal(t, []RangeOverlap{{A: 0, B: 1, Lo: 0, Hi: 511}}, ov)
	assert.Equal(t, []RangeGap{{Lo: 601, Hi: 1023}}, gaps)

	_, ov, gaps, err = CheckRanges([]PoolRange{p("512-1023"), p("0-511")})
	require.NoError(t, err)
	assert.Empty(t, ov)
	assert.Empty(t, gaps)

	_, ov, gaps, err = CheckRanges([]PoolRange{p("600-700"), p(""), p("10-20")})
	require.NoError(t, err)
	assert.Equal(t, []RangeOverlap{{0, 1, 600, 700}, {1, 2, 10, 20}}, ov, "no range is the whole layout")
	assert.Empty(t, gaps)

	_, _, gaps, err = CheckRanges([]PoolRange{p("100-199"), p("300-399")})
	require.NoError(t, err)
	assert.Equal(t, []RangeGap{{0, 99}, {200, 299}, {400, 1023}}, gaps)

	other := p("512-1023")
	other.Layout = "0/10/12 2025-01-01T00:00:00.000Z"
	_, _, _, err = CheckRanges([]PoolRange{p("0-511"), other})
	require.ErrorIs(t, err, ErrRangesIncomparable)
	assert.Contains(t, err.Error(), "pool 2's layout")
	assert.Contains(t, err.Error(), "another epoch")
	// A region widened to 12 bits beside one on 10: compared in 12 bits,
	// where old worker w issues the IDs of new workers 4w..4w+3.
	wide := PoolRange{Layout: "0/12/10 2024-01-01T00:00:00.000Z", Workers: 4096, From: "0-2047"}
	l12, ov, gaps, err := CheckRanges([]PoolRange{p("512-1023"), wide})
	require.NoError(t, err)
	assert.Equal(t, wide.Layout, l12)
	assert.Empty(t, ov)
	assert.Empty(t, gaps)
	_, ov, _, err = CheckRanges([]PoolRange{p("500-1023"), wide})
	require.NoError(t, err)
	assert.Equal(t, []RangeOverlap{{0, 1, 2000, 2047}}, ov, "old 500..511 are new 2000..2047")
	narrow := p("0-99")
	narrow.Layout, narrow.Workers = "0/9/13 2024-01-01T00:00:00.000Z", 512
	_, _, _, err = CheckRanges([]PoolRange{narrow, wide, p("")})
	require.NoError(t, err, "9 and 10 bits both widen to 12")
	odd := p("")
	odd.Layout = "1/9/12 2024-01-01T00:00:00.000Z"
	_, _, _, err = CheckRanges([]PoolRange{odd, p("")})
	require.ErrorIs(t, err, ErrRangesIncomparable, "another clock-sequence field")
	wid := p("")
	wid.Widen = "0/12/10 2024-01-01T00:00:00.000Z"
	_, _, _, err = CheckRanges([]PoolRange{p("0-511"), wid})
	require.ErrorIs(t, err, ErrRangesIncomparable)
	assert.Contains(t, err.Error(), "pool 2 widens")
}

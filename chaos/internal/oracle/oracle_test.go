package oracle

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/chaos/internal/wire"
)

// epoch is 0 here, so that a time field reads as its Unix ms.
const epoch = 0

// id makes an ID of layout l: Unix ms, worker, sequence.
func id(l Layout, ms, worker, seq int64) int64 {
	l = l.orDefault()
	return (ms-epoch)<<22 | worker<<l.S | seq
}

var def = Layout{0, 10, 12}

func held(n, w, f, floor, p int64) wire.HistEvent {
	return wire.HistEvent{K: "held", W: w, F: f, Floor: floor, P: p, N: n}
}

func stream(name string, l Layout, ids []int64, evs ...wire.HistEvent) *Stream {
	return &Stream{Name: name, Pool: "main", Layout: l, EpochMs: epoch, IDs: ids, Events: evs}
}

func TestDisjointHoldingsPass(t *testing.T) {
	a := stream("a", def, []int64{id(def, 1100, 7, 0), id(def, 1500, 7, 0)}, held(0, 7, 1, 1001, 2000))
	b := stream("b", def, []int64{id(def, 2100, 7, 0)}, held(0, 7, 2, 2001, 3000))
	r := Check([]*Stream{a, b})
	assert.Zero(t, r.Breaches(), r.Examples)
	assert.EqualValues(t, 3, r.Checked)
	assert.EqualValues(t, 1, r.Pairs)
	assert.Equal(t, 2, r.Holdings)
}

// An overlap is a breach even when no two IDs are equal: that is what a
// collision checker cannot see.
func TestOverlapWithoutCollision(t *testing.T) {
	a := stream("a", def, []int64{id(def, 1100, 7, 0)}, held(0, 7, 1, 1001, 2000))
	b := stream("b", def, []int64{id(def, 1900, 7, 0)}, held(0, 7, 2, 1500, 3000))
	r := Check([]*Stream{a, b})
	assert.EqualValues(t, 1, r.Overlaps)
	assert.Zero(t, r.Outside)
	require.Len(t, r.Examples, 1)
	assert.Contains(t, r.Examples[0].Detail, "1500..2000")
}

func TestReleaseEndsARange(t *testing.T) {
	// a promised up to 2000 but closed after issuing up to 1200: b may
	// start at 1201.
	a := stream("a", def, []int64{id(def, 1100, 7, 0), id(def, 1200, 7, 0)}, held(0, 7, 1, 1001, 2000),
		wire.HistEvent{K: "ended", W: 7, F: 1, Last: 1200, N: 2})
	b := stream("b", def, []int64{id(def, 1201, 7, 0)}, held(0, 7, 2, 1201, 3000))
	assert.Zero(t, Check([]*Stream{a, b}).Breaches())
	// Without the end, the ranges meet.
	a.Events = a.Events[:1]
	assert.EqualValues(t, 1, Check([]*Stream{a, b}).Overlaps)
}

func TestIDsOutsideTheirRange(t *testing.T) {
	evs := []wire.HistEvent{held(0, 7, 1, 1001, 2000), {K: "promised", W: 7, F: 1, P: 4000, N: 2}}
	cases := map[string]struct {
		ids  []int64
		want int64
	}{
		"inside":                     {[]int64{id(def, 1001, 7, 0), id(def, 1999, 7, 1), id(def, 3999, 7, 0)}, 0},
		"below the floor":            {[]int64{id(def, 1000, 7, 0)}, 1},
		"past the first promise":     {[]int64{id(def, 2001, 7, 0)}, 1},                                           // written before the renewal was reported
		"another worker id":          {[]int64{id(def, 1500, 8, 0)}, 1},                                           // never held
		"past the promise, reported": {[]int64{id(def, 1500, 7, 0), id(def, 1600, 7, 1), id(def, 4001, 7, 0)}, 1}, // past even the renewed one
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := Check([]*Stream{stream("a", def, c.ids, evs...)})
			assert.Equal(t, c.want, r.Outside, r.Examples)
			assert.Zero(t, r.Overlaps)
		})
	}
}

// A held event tells only about the IDs written after it.
func TestIDBeforeItsHolding(t *testing.T) {
	s := stream("a", def, []int64{id(def, 1500, 7, 0), id(def, 1501, 7, 0)}, held(1, 7, 1, 1001, 2000))
	r := Check([]*Stream{s})
	assert.EqualValues(t, 1, r.Outside)
	assert.EqualValues(t, 1, r.Checked)
	assert.True(t, strings.Contains(r.Examples[0].Detail, "held after this ID"), r.Examples[0].Detail)
}

func TestUncoordinatedCountedApart(t *testing.T) {
	s := stream("a", def, []int64{id(def, 1500, 9, 0), id(def, 1600, 9, 0)},
		wire.HistEvent{K: "uncoordinated", W: 9, From: 1400, N: 0})
	r := Check([]*Stream{s})
	assert.Zero(t, r.Breaches())
	assert.EqualValues(t, 2, r.Uncoordinated)
}

// With 10 and 12 worker bits, new worker 4w+k issues a quarter of old
// worker w's IDs: those pairs meet, no others.
func TestLayoutsMeetWhereBitsAgree(t *testing.T) {
	wide := Layout{0, 12, 10}
	old := stream("old", def, nil, held(0, 3, 1, 1001, 2000))
	for v := int64(10); v <= 17; v++ {
		nw := stream("new", wide, nil, held(0, v, 1, 1500, 3000))
		want := int64(0)
		if v/4 == 3 {
			want = 1
		}
		assert.Equal(t, want, Check([]*Stream{old, nw}).Overlaps, "new worker %d", v)
	}
	// A clock-sequence layout (5/5/12) keeps the worker field where the
	// default's low 5 bits are: worker 3 of it meets worker 3, 35, 67 ...
	cs := Layout{5, 5, 12}
	for _, w := range []int64{3, 35, 67, 4} {
		d := stream("d", def, nil, held(0, w, 1, 1001, 2000))
		c := stream("c", cs, nil, held(0, 3, 1, 1500, 3000))
		want := int64(1)
		if w == 4 {
			want = 0
		}
		assert.Equal(t, want, Check([]*Stream{d, c}).Overlaps, "default worker %d", w)
	}
}

// The time field is in each layout's own epoch: a range 3 s later in an
// epoch 3 s later is the same time field.
func TestEpochsShiftTheTimeField(t *testing.T) {
	a := stream("a", def, nil, held(0, 7, 1, 1001, 2000))
	b := stream("b", def, nil, held(0, 7, 2, 4001, 5000))
	b.EpochMs = epoch + 3000
	assert.EqualValues(t, 1, Check([]*Stream{a, b}).Overlaps)
	b.EpochMs = epoch
	assert.Zero(t, Check([]*Stream{a, b}).Overlaps)
}

func TestPoolsApart(t *testing.T) {
	a := stream("a", def, nil, held(0, 7, 1, 1001, 2000))
	b := stream("b", def, nil, held(0, 7, 1, 1001, 2000))
	b.Pool = "other"
	assert.Zero(t, Check([]*Stream{a, b}).Breaches())
}

// One generator's holdings never meet each other: its IDs increase.
func TestOneGeneratorsHoldings(t *testing.T) {
	a := stream("a", def, nil, held(0, 7, 1, 1001, 2000), held(0, 7, 3, 1500, 3000))
	assert.Zero(t, Check([]*Stream{a}).Breaches())
}

package chaos

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/chaos/internal/oracle"
	"github.com/entflake/entflake/chaos/internal/wire"
)

// report is what rounds found: it sums any number of them (a long run is
// many rounds), and prints itself.
type report struct {
	mu         sync.Mutex
	backend    string
	seeds      []uint64
	rounds     int
	wall       time.Duration
	faults     map[string]*tally // by kind: drawn, applied
	streams    int
	ids        int64
	dups       int64 // duplicate IDs not excluded: an ID written k times counts k-1
	exclusions int64 // duplicate IDs that a documented exclusion explains
	disorder   int64 // IDs not above their generator's previous one (per clock sequence)
	partial    int   // ID files whose last write was cut short
	pairs      map[string]int64
	errs       map[string]int64 // NextID errors by kind
	inserts    [3]int64         // rows inserted through ent, inserts that failed, tripwire collisions
	openErrs   map[string]int   // OpenDB errors by kind
	opened     int
	oracle     oracle.Result // the history's check (see package oracle); its examples are the first round's
	oracleExcl int64         // breaches the oracle found in rounds of a documented exclusion
	scenarios  map[string]*scenTally
	notes      []string
	examples   []string
	logs       []string // the child logs of the first duplicate's processes
}

// tally counts one kind of fault.
type tally struct{ drawn, applied int }

// scenTally counts one named scenario's runs.
type scenTally struct {
	runs, applied int
	dups, excl    int64
}

func newReport(backend string) *report {
	return &report{backend: backend, faults: map[string]*tally{}, pairs: map[string]int64{}, errs: map[string]int64{},
		openErrs: map[string]int{}, scenarios: map[string]*scenTally{}}
}

// fault records a drawn fault, applied or not (with why not).
func (rep *report) fault(kind string, applied bool, why string) {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	t := rep.faults[kind]
	if t == nil {
		t = &tally{}
		rep.faults[kind] = t
	}
	t.drawn++
	if applied {
		t.applied++
	} else if why != "" && len(rep.notes) < 40 {
		rep.notes = append(rep.notes, kind+" not applied: "+why)
	}
}

func (rep *report) note(format string, args ...any) {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	if len(rep.notes) < 40 {
		rep.notes = append(rep.notes, fmt.Sprintf(format, args...))
	}
}

func (rep *report) scenario(name string) *scenTally {
	s := rep.scenarios[name]
	if s == nil {
		s = &scenTally{}
		rep.scenarios[name] = s
	}
	return s
}

// dupGroup is one ID written more than once, and where.
type dupGroup struct {
	id      int64
	streams []*stream
}

// verdict is the check of one round.
type verdict struct {
	// oracle is the check of the round's history against the model
	// (package oracle); oracleExcluded is set in a round of a documented
	// exclusion, whose breaches are reported apart.
	oracle                        oracle.Result
	oracleExcluded                bool
	ids, dups, excluded, disorder int64
	streams, partial              int
	byLabel                       map[string]int64 // duplicates (not excluded) with a stream of that label
	exclByLabel                   map[string]int64
	pairs                         map[string]int64 // duplicates (not excluded) by the labels of their streams
	groups                        []dupGroup       // the first few, for examples
}

// check reads every ID file of the round and checks the two properties:
// no ID appears twice among the generators of one pool (one database's
// tables), and each generator's IDs increase (per clock-sequence value
// under BumpClockSequence, whose IDs after a bump are smaller by design).
// Duplicates that an exclusion rule of the round explains are counted
// apart. A generator whose open failed has no file.
func (r *round) check() verdict {
	r.mu.Lock()
	streams := append([]*stream(nil), r.streams...)
	rules := append([]func(dupGroup) bool(nil), r.excluded...)
	r.mu.Unlock()
	v := verdict{byLabel: map[string]int64{}, exclByLabel: map[string]int64{}, pairs: map[string]int64{}}
	type rec struct {
		id int64
		s  int32
	}
	byPool := map[string][]rec{}
	var hist []*oracle.Stream
	for i, s := range streams {
		ids, partial, err := wire.ReadIDs(s.file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			r.t.Errorf("read %s: %v", s.file, err)
			continue
		}
		evs, histPartial, err := wire.ReadHist(s.gs.hist)
		if err != nil {
			r.t.Errorf("read %s: %v", s.gs.hist, err)
		}
		if histPartial {
			v.partial++
		}
		hist = append(hist, &oracle.Stream{Name: fmt.Sprintf("%s/%s gen %d (%s)", s.label, s.proc, s.spec.ID, s.spec.Service),
			Pool: s.pool, Layout: oracle.Layout{CS: s.spec.ClockSeqBits, W: s.spec.WorkerBits, S: s.spec.SequenceBits},
			EpochMs: epochOf(s.spec), IDs: ids, Events: evs})
		v.streams++
		if partial {
			v.partial++
		}
		v.ids += int64(len(ids))
		prev := map[int64]int64{}
		shift := uint(s.spec.WorkerBits + s.spec.SequenceBits)
		mask := int64(1)<<s.spec.ClockSeqBits - 1
		for _, id := range ids {
			seq := (id >> shift) & mask
			if p, ok := prev[seq]; ok && id <= p {
				v.disorder++
				if len(v.groups) < 3 {
					r.t.Logf("%s gen %d: ID %d after %d", s.proc, s.spec.ID, id, p)
				}
			}
			prev[seq] = id
			byPool[s.pool] = append(byPool[s.pool], rec{id, int32(i)})
		}
	}
	v.oracle, v.oracleExcluded = oracle.Check(hist), r.excludeAll
	for _, recs := range byPool {
		slices.SortFunc(recs, func(a, b rec) int { return cmp.Compare(a.id, b.id) })
		for i := 0; i < len(recs); {
			j := i + 1
			for j < len(recs) && recs[j].id == recs[i].id {
				j++
			}
			if j-i > 1 {
				g := dupGroup{id: recs[i].id}
				for _, x := range recs[i:j] {
					g.streams = append(g.streams, streams[x.s])
				}
				n := int64(j - i - 1)
				excluded := false
				for _, rule := range rules {
					excluded = excluded || rule(g)
				}
				labels := map[string]bool{}
				for _, s := range g.streams {
					labels[s.label] = true
				}
				key := strings.Join(slices.Sorted(maps.Keys(labels)), "×")
				if excluded {
					v.excluded += n
					for l := range labels {
						v.exclByLabel[l] += n
					}
				} else {
					v.dups += n
					v.pairs[key] += n
					for l := range labels {
						v.byLabel[l] += n
					}
				}
				if len(v.groups) < 5 {
					v.groups = append(v.groups, g)
				}
			}
			i = j
		}
	}
	return v
}

// add sums a round's verdict and its streams' counts into the report.
func (rep *report) add(r *round, v verdict, wall time.Duration) {
	r.mu.Lock()
	streams := append([]*stream(nil), r.streams...)
	r.mu.Unlock()
	rep.mu.Lock()
	defer rep.mu.Unlock()
	rep.rounds++
	rep.seeds = append(rep.seeds, r.seed)
	rep.wall += wall
	rep.streams += v.streams
	rep.ids += v.ids
	rep.dups += v.dups
	rep.exclusions += v.excluded
	rep.disorder += v.disorder
	rep.partial += v.partial
	rep.addOracle(v)
	for _, s := range streams {
		ready, openErr, _, st := s.gs.snapshot()
		if ready != nil {
			rep.opened++
		}
		if openErr != nil {
			rep.openErrs[openErr.Kind]++
		}
		if st != nil {
			for k, n := range st.Errors {
				rep.errs[k] += n
			}
			rep.inserts[0] += st.Inserts
			rep.inserts[1] += st.InsertErrors
			rep.inserts[2] += st.Collisions
		}
	}
	// What the processes of the first duplicate logged, for a start.
	if len(v.groups) > 0 && len(rep.examples) == 0 {
		seen := map[string]bool{}
		for _, s := range v.groups[0].streams {
			if !seen[s.proc] {
				seen[s.proc] = true
				rep.logs = append(rep.logs, fmt.Sprintf("log of %s (its last lines):\n%s", s.proc,
					logTail(filepath.Join(r.dir, s.proc+".log"), 6)))
			}
		}
	}
	for _, g := range v.groups {
		if len(rep.examples) >= 8 {
			break
		}
		var where []string
		for _, s := range g.streams {
			where = append(where, fmt.Sprintf("%s/%s gen %d (%s, worker %s)", s.label, s.proc, s.spec.ID, s.spec.Service, workerOf(s)))
		}
		rep.examples = append(rep.examples, fmt.Sprintf("ID %d in %s", g.id, strings.Join(where, " and ")))
	}
	for k, n := range v.pairs {
		rep.pairs[k] += n
	}
	// An episode's label is its scenario's name and its number.
	for l, n := range v.byLabel {
		if i := strings.LastIndexByte(l, '#'); i > 0 {
			rep.scenario(l[:i]).dups += n
		}
	}
	for l, n := range v.exclByLabel {
		if i := strings.LastIndexByte(l, '#'); i > 0 {
			rep.scenario(l[:i]).excl += n
		}
	}
}

// addOracle sums a round's oracle check.
func (rep *report) addOracle(v verdict) {
	if v.oracleExcluded {
		rep.oracleExcl += v.oracle.Breaches()
		return
	}
	o := &rep.oracle
	o.Holdings += v.oracle.Holdings
	o.Pairs += v.oracle.Pairs
	o.Checked += v.oracle.Checked
	o.Uncoordinated += v.oracle.Uncoordinated
	o.Overlaps += v.oracle.Overlaps
	o.Outside += v.oracle.Outside
	for _, e := range v.oracle.Examples {
		if len(o.Examples) < 8 {
			o.Examples = append(o.Examples, e)
		}
	}
}

// epochOf is a spec's epoch in Unix ms.
func epochOf(s wire.GenSpec) int64 {
	if s.EpochMs != 0 {
		return s.EpochMs
	}
	return entflake.DefaultEpoch.UnixMilli()
}

// workerOf is the worker id a generator said it opened with, and the one
// it last reported if it moved since.
func workerOf(s *stream) string {
	ready, _, _, st := s.gs.snapshot()
	switch {
	case ready == nil:
		return "?"
	case st != nil && st.Worker != ready.Worker:
		return fmt.Sprintf("%d, later %d", ready.Worker, st.Worker)
	}
	return fmt.Sprint(ready.Worker)
}

// String prints the report: seeds, faults by kind, IDs checked and
// duplicates, per scenario too.
func (rep *report) String() string {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	var b strings.Builder
	seeds := fmt.Sprint(rep.seeds)
	if n := len(rep.seeds); n > 6 {
		// Shortened, with the ellipsis saying so: the first three, the last.
		seeds = fmt.Sprintf("[%d %d %d … %d]", rep.seeds[0], rep.seeds[1], rep.seeds[2], rep.seeds[n-1])
	}
	fmt.Fprintf(&b, "chaos %s: %d round(s), seed(s) %s, %v\n", rep.backend, rep.rounds, seeds, rep.wall.Round(time.Second))
	fmt.Fprintf(&b, "  checked %d IDs from %d generators (%d opened): %d duplicate(s), %d out of order",
		rep.ids, rep.streams, rep.opened, rep.dups, rep.disorder)
	if rep.exclusions > 0 {
		fmt.Fprintf(&b, "; exclusions: %d duplicate(s) a documented exclusion explains (not a pass)", rep.exclusions)
	}
	if rep.partial > 0 {
		fmt.Fprintf(&b, "; %d file(s) end in a partial ID or event", rep.partial)
	}
	o := rep.oracle
	fmt.Fprintf(&b, "\n  oracle: %d holdings, %d pairs that could meet; %d IDs in a range held, %d uncoordinated (fallback, unregistered); "+
		"breaches: %d overlaps, %d outside", o.Holdings, o.Pairs, o.Checked, o.Uncoordinated, o.Overlaps, o.Outside)
	if rep.oracleExcl > 0 {
		fmt.Fprintf(&b, "; %d more in rounds of a documented exclusion (not a pass)", rep.oracleExcl)
	}
	for _, e := range o.Examples {
		b.WriteString("\n  oracle: " + e.Kind + ": " + e.Detail)
	}
	b.WriteString("\n  faults (applied/drawn):")
	for _, k := range slices.Sorted(maps.Keys(rep.faults)) {
		f := rep.faults[k]
		fmt.Fprintf(&b, " %s %d/%d", k, f.applied, f.drawn)
	}
	if len(rep.scenarios) > 0 {
		b.WriteString("\n  scenarios:")
		for _, k := range slices.Sorted(maps.Keys(rep.scenarios)) {
			s := rep.scenarios[k]
			fmt.Fprintf(&b, " %s (runs %d, applied %d, duplicates %d", k, s.runs, s.applied, s.dups)
			if s.excl > 0 {
				fmt.Fprintf(&b, ", excluded %d", s.excl)
			}
			b.WriteString(")")
		}
	}
	b.WriteString("\n  NextID errors:")
	for _, k := range wire.ErrorKinds {
		fmt.Fprintf(&b, " %s %d", k, rep.errs[k])
	}
	fmt.Fprintf(&b, "; ent inserts %d (%d failed), tripwire collisions %d", rep.inserts[0], rep.inserts[1], rep.inserts[2])
	b.WriteString("; OpenDB errors:")
	for _, k := range slices.Sorted(maps.Keys(rep.openErrs)) {
		fmt.Fprintf(&b, " %s %d", k, rep.openErrs[k])
	}
	if len(rep.pairs) > 0 {
		b.WriteString("\n  duplicates between:")
		for _, k := range slices.Sorted(maps.Keys(rep.pairs)) {
			fmt.Fprintf(&b, " %s %d", k, rep.pairs[k])
		}
	}
	for _, e := range rep.examples {
		b.WriteString("\n  e.g. " + e)
	}
	for _, n := range rep.notes {
		b.WriteString("\n  note: " + n)
	}
	for _, l := range rep.logs {
		b.WriteString("\n  " + strings.ReplaceAll(l, "\n", "\n    "))
	}
	return b.String()
}

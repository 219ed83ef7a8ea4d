package entflake

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// TestMain doubles as a storm child process (see TestStorm). go-sql-driver
// logs every connection the tests break on purpose; its log is silenced.
// After the tests, it fails the run if any line the library logged to a
// test's logSink showed the tests' password (watchSecret).
func TestMain(m *testing.M) {
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	if plan := os.Getenv("ENTFLAKE_STORM_CHILD"); plan != "" {
		os.Exit(stormChild(plan))
	}
	if plan := os.Getenv("ENTFLAKE_LIVE_CHILD"); plan != "" {
		os.Exit(liveChild(plan))
	}
	code := m.Run()
	if leaked() && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// stormPlan is what one child process does.
type stormPlan struct {
	Driver, DSN, Dialect string
	IDs                  int    // IDs to issue
	Fault                string // "", "clamp", "wait", "reject" or "bump"
	Worker               int64  // for "bump": a fixed worker id, no lease
	Out                  string // file for the IDs, little-endian int64s
}

// stormReport is what a child prints on standard output.
type stormReport struct {
	Worker  int64
	Source  string
	Issued  int
	Errors  map[string]int
	MaxCall time.Duration // the longest single NextID call
	Steps   int           // rollbacks injected
}

// faultClock is the real clock minus an offset that the child steps.
type faultClock struct{ off atomic.Int64 }

func (c *faultClock) Now() time.Time        { return time.Now().Add(-time.Duration(c.off.Load())) }
func (c *faultClock) Sleep(d time.Duration) { WallClock().Sleep(d) }

// rollbacks are the steps back a faulted child injects, in turn, every
// 20,000 calls; 6,000 calls later (more than a millisecond's 4,096 IDs, so
// that the clamp has to wait) the clock is put right again.
var rollbacks = []time.Duration{time.Millisecond, 5 * time.Millisecond, 500 * time.Millisecond, 10 * time.Second}

func stormChild(planJSON string) int {
	var p stormPlan
	if err := json.Unmarshal([]byte(planJSON), &p); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	clk := &faultClock{}
	opts := []Option{WithService("storm"), WithLogger(slog.New(slog.DiscardHandler)), WithClock(clk)}
	switch p.Fault {
	case "clamp":
		opts = append(opts, WithRollbackPolicy(ClampRollback(time.Second)))
	case "wait":
		opts = append(opts, WithRollbackPolicy(WaitRollback(5*time.Millisecond)))
	case "reject":
		opts = append(opts, WithRollbackPolicy(RejectRollback()))
	case "bump":
		opts = append(opts, WithRollbackPolicy(BumpClockSequence()), WithLayout(ClockSequenceLayout), WithWorkerID(p.Worker))
	}
	var db *sql.DB
	if p.Fault != "bump" {
		var err error
		if db, err = sql.Open(p.Driver, p.DSN); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer db.Close()
	}
	g, err := OpenDB(context.Background(), db, p.Dialect, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	f, err := os.Create(p.Out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	w := bufio.NewWriter(f)
	r := stormReport{Worker: g.WorkerID(), Source: g.Source().String(), Errors: map[string]int{}}
	var buf [8]byte
	for call := 1; r.Issued < p.IDs; call++ {
		if p.Fault != "" {
			switch call % 20_000 {
			case 0:
				clk.off.Store(int64(rollbacks[r.Steps%len(rollbacks)]))
				r.Steps++
			case 6_000:
				clk.off.Store(0)
			}
		}
		start := time.Now()
		id, err := g.NextID()
		r.MaxCall = max(r.MaxCall, time.Since(start))
		switch {
		case errors.Is(err, ErrClockBackwards):
			r.Errors["backwards"]++
			continue
		case errors.Is(err, ErrClockSequenceExhausted):
			r.Errors["exhausted"]++
			continue
		case err != nil:
			fmt.Fprintln(os.Stderr, "unexpected:", err)
			return 1
		}
		binary.LittleEndian.PutUint64(buf[:], uint64(id))
		if _, err := w.Write(buf[:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		r.Issued++
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return 2
	}
	return 0
}

// stormSize is processes x IDs each: 8 x 100,000 in CI, or what
// ENTFLAKE_STORM says (e.g. 16x1000000, the documented big run).
func stormSize(t *testing.T) (procs, ids int) {
	procs, ids = 8, 100_000
	if v := os.Getenv("ENTFLAKE_STORM"); v != "" {
		a, b, ok := strings.Cut(v, "x")
		var err1, err2 error
		procs, err1 = strconv.Atoi(a)
		ids, err2 = strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || procs < 4 || ids < 1 {
			t.Fatalf("ENTFLAKE_STORM=%q: want PROCSxIDS, at least 4 processes", v)
		}
	}
	return procs, ids
}

// TestStorm starts processes at once against one database. Each opens a
// generator through the ladder and issues its IDs; three of them suffer
// repeated clock rollbacks of 1 ms to 10 s under the clamp, wait and reject
// policies. Two more processes, with fixed workers and the clock-sequence
// layout, suffer the same rollbacks under BumpClockSequence. No ID may
// repeat, every process must get its own worker id, and each policy must
// behave as documented, with no call stalling past its bound.
func TestStorm(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	procs, n := stormSize(t)
	for _, b := range dbtest.Backends[:2] {
		t.Run(b.Name, func(t *testing.T) {
			db := b.Fresh(t)
			dir := t.TempDir()
			var plans []stormPlan
			faults := []string{"clamp", "wait", "reject"}
			for i := range procs {
				fault := ""
				if i < len(faults) {
					fault = faults[i]
				}
				plans = append(plans, stormPlan{Driver: db.Driver, DSN: db.DSN, Dialect: b.Dialect, IDs: n, Fault: fault,
					Out: filepath.Join(dir, fmt.Sprintf("lease-%d", i))})
			}
			for w := range 2 {
				plans = append(plans, stormPlan{IDs: n, Fault: "bump", Worker: int64(w + 1),
					Out: filepath.Join(dir, fmt.Sprintf("bump-%d", w))})
			}
			start := time.Now()
			reports := runStorm(t, plans)
			t.Logf("%d processes x %d IDs in %v", len(plans), n, time.Since(start).Round(time.Millisecond))

			workers := map[int64]bool{}
			for i, p := range plans {
				r := reports[i]
				require.Equal(t, n, r.Issued, "process %d", i)
				if p.Fault != "bump" {
					require.Equal(t, "lease", r.Source, "process %d", i)
					require.False(t, workers[r.Worker], "worker id %d twice", r.Worker)
					workers[r.Worker] = true
				}
				t.Logf("process %d (%s): worker %d, errors %v, longest call %v, %d rollbacks",
					i, p.Fault, r.Worker, r.Errors, r.MaxCall.Round(time.Millisecond), r.Steps)
				switch p.Fault {
				case "":
					assert.Empty(t, r.Errors)
					assert.Less(t, r.MaxCall, time.Second, "a healthy clock never stalls")
				case "clamp":
					assert.Less(t, r.MaxCall, time.Second+500*time.Millisecond, "waits stay within the fuse (1 s)")
					if r.Steps >= 3 {
						// It waited for the clock (not an error): the 500 ms rollback less
						// the time the frozen millisecond took to run out, which on a
						// loaded machine was once above 100 ms.
						assert.Greater(t, r.MaxCall, 200*time.Millisecond, "the frozen millisecond ran out during the 500 ms rollback: it waited")
					}
					if r.Steps >= 4 {
						assert.Positive(t, r.Errors["backwards"], "the 10 s rollback is beyond the fuse")
					}
				case "wait":
					assert.Less(t, r.MaxCall, 500*time.Millisecond, "waits twice a rollback of at most 5 ms")
					if r.Steps >= 3 {
						assert.Positive(t, r.Errors["backwards"], "500 ms is beyond the wait limit")
					}
				case "reject":
					assert.Less(t, r.MaxCall, 500*time.Millisecond, "reject never waits on a rollback")
					assert.Positive(t, r.Errors["backwards"])
				case "bump":
					if r.Steps < 32 {
						assert.Empty(t, r.Errors, "fewer than 32 bumps")
					} else {
						assert.Positive(t, r.Errors["exhausted"], "more rollbacks than clock-sequence values: errors, not wraps")
					}
					assert.Less(t, r.MaxCall, time.Second, "a bump never waits")
				}
			}
			checkUnique(t, plans, func(p stormPlan) bool { return p.Fault != "bump" })
			checkUnique(t, plans, func(p stormPlan) bool { return p.Fault == "bump" })
		})
	}
}

// runStorm starts a child process per plan at once and returns their reports.
func runStorm(t *testing.T, plans []stormPlan) []stormReport {
	t.Helper()
	reports := make([]stormReport, len(plans))
	errs := make([]error, len(plans))
	var wg sync.WaitGroup
	for i, p := range plans {
		plan, err := json.Marshal(p)
		require.NoError(t, err)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "ENTFLAKE_STORM_CHILD="+string(plan))
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		wg.Go(func() {
			if err := cmd.Run(); err != nil {
				errs[i] = fmt.Errorf("process %d: %w: %s", i, err, stderr.String())
				return
			}
			errs[i] = json.Unmarshal([]byte(stdout.String()), &reports[i])
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	return reports
}

// checkUnique reads the IDs of the chosen plans and fails on any repeat.
func checkUnique(t *testing.T, plans []stormPlan, pick func(stormPlan) bool) {
	t.Helper()
	var all []int64
	for _, p := range plans {
		if !pick(p) {
			continue
		}
		f, err := os.Open(p.Out)
		require.NoError(t, err)
		r := bufio.NewReader(f)
		var buf [8]byte
		for {
			if _, err := io.ReadFull(r, buf[:]); err != nil {
				require.ErrorIs(t, err, io.EOF)
				break
			}
			all = append(all, int64(binary.LittleEndian.Uint64(buf[:])))
		}
		require.NoError(t, f.Close())
	}
	slices.Sort(all)
	dups := 0
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			dups++
		}
	}
	assert.Zero(t, dups, "duplicates among %d IDs", len(all))
	t.Logf("%d IDs, %d duplicates", len(all), dups)
}

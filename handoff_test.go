package entflake

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// livePlan is what a live-lease child process does (see liveChild).
type livePlan struct {
	// Mode: "issue" issues IDs until killed; "burst" idles, then
	// runs its time field up to its promise with a burst, and waits to be
	// killed; "step" issues on a clock that steps 3 s forward.
	Mode                 string
	Driver, DSN, Dialect string
	Worker               int64 // a fixed worker id, or -1 to lease
	Pod                  string
	WorkerBits           int
	Out                  string // IDs, little-endian int64s
}

// liveChild runs a plan. It prints "ready <worker id>" once its generator
// is open, and "fenced" when a burst reached its promise.
func liveChild(planJSON string) int {
	var p livePlan
	if err := json.Unmarshal([]byte(planJSON), &p); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	os.Setenv("POD_NAME", p.Pod)
	db, err := sql.Open(p.Driver, p.DSN)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	clk := &steppedClock{}
	opts := []Option{WithService("handoff"), WithLogger(slog.New(slog.DiscardHandler)), WithHeartbeat(fastBeat),
		WithRequireLease(), WithLeaseTimeout(10 * time.Second), WithClock(clk),
		WithLayout(Layout{WorkerBits: p.WorkerBits, SequenceBits: 22 - p.WorkerBits})}
	if p.Worker >= 0 {
		opts = append(opts, WithWorkerID(p.Worker))
	}
	if p.Mode == "burst" {
		opts = append(opts, WithBurst(time.Hour))
	}
	g, err := OpenDB(context.Background(), db, p.Dialect, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Printf("ready %d\n", g.WorkerID())
	f, err := os.Create(p.Out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	w := bufio.NewWriter(f)
	write := func(id int64) {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(id))
		_, _ = w.Write(b[:])
	}
	switch p.Mode {
	case "burst":
		time.Sleep(300 * time.Millisecond)
		ids := make([]int64, 1<<16)
		for {
			err := g.NextIDs(ids)
			if errors.Is(err, ErrFenced) {
				break
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			write(ids[len(ids)-1])
		}
		// NextIDs filled the IDs before the failing one: the highest of
		// those is the last non-zero.
		for i := len(ids) - 1; i >= 0; i-- {
			if ids[i] != 0 {
				write(ids[i])
				break
			}
		}
		if err := w.Flush(); err != nil {
			return 2
		}
		fmt.Println("fenced")
		select {} // until killed
	default:
		start := time.Now()
		for {
			if p.Mode == "step" && time.Since(start) > 300*time.Millisecond {
				clk.off.Store(int64(3 * time.Second)) // NTP steps the wall clock forward
			}
			for range 100 {
				id, err := g.NextID()
				if err != nil {
					continue // fenced for a moment after the step, until a renewal
				}
				write(id)
			}
			if err := w.Flush(); err != nil {
				return 2
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// steppedClock is the wall clock plus an offset the child steps.
type steppedClock struct{ off atomic.Int64 }

func (c *steppedClock) Now() time.Time        { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *steppedClock) Sleep(d time.Duration) { WallClock().Sleep(d) }

// child is a running live-lease child.
type child struct {
	cmd   *exec.Cmd
	lines *bufio.Scanner
	out   string
}

func startChild(t *testing.T, p livePlan) *child {
	t.Helper()
	b, err := json.Marshal(p)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// The race detector sleeps a second before a process exits: not here.
	cmd.Env = append(os.Environ(), "ENTFLAKE_LIVE_CHILD="+string(b), "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &child{cmd: cmd, lines: bufio.NewScanner(stdout), out: p.Out}
}

// expect reads the child's next line and checks its first word.
func (c *child) expect(t *testing.T, word string) []string {
	t.Helper()
	require.True(t, c.lines.Scan(), "the child ended before saying %q", word)
	f := strings.Fields(c.lines.Text())
	require.NotEmpty(t, f)
	require.Equal(t, word, f[0], c.lines.Text())
	return f
}

// kill ends the child with SIGKILL, as a crash would, and returns the IDs
// it wrote.
func (c *child) kill(t *testing.T) []int64 {
	t.Helper()
	require.NoError(t, c.cmd.Process.Kill())
	_ = c.cmd.Wait()
	b, err := os.ReadFile(c.out)
	require.NoError(t, err)
	ids := make([]int64, len(b)/8)
	for i := range ids {
		ids[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return ids
}

// TestProcessesExitWithoutClose: one generator stays open while 2,000
// processes start, each leasing with WithRequireLease, and exit without
// Close. Their slots stay live until the TTL passes (2 s; the start rate
// times the TTL stays far below the 1,024 worker ids). None is handed the
// open generator's worker id, and none fails. The processes are
// internal/startchild, built without the race detector.
func TestProcessesExitWithoutClose(t *testing.T) {
	noEnvWorker(t)
	t.Parallel() // mostly waiting on processes and servers: it overlaps the other long tests
	bin := filepath.Join(t.TempDir(), "startchild")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/entflake/entflake/internal/startchild").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, b := range dbtest.Backends[:2] {
		t.Run(b.Name, func(t *testing.T) {
			db := b.Fresh(t)
			held := open(t, db.DB, b.Dialect, WithService("held"), WithHeartbeat(fastBeat), quiet())
			w := held.WorkerID()
			const procs, at = 2000, 4
			var (
				wg    sync.WaitGroup
				mu    sync.Mutex
				count = map[int64]int{}
				next  atomic.Int32
			)
			start := time.Now()
			for range at {
				wg.Go(func() {
					for next.Add(1) <= procs {
						cmd := exec.Command(bin, "-driver", db.Driver, "-dsn", db.DSN, "-dialect", b.Dialect)
						var stderr strings.Builder
						cmd.Stderr = &stderr
						out, err := cmd.Output()
						if !assert.NoError(t, err, "%s", stderr.String()) {
							return
						}
						v, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
						if !assert.NoError(t, err) {
							return
						}
						mu.Lock()
						count[v]++
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			t.Logf("%d processes in %v", procs, time.Since(start).Round(time.Millisecond))
			assert.Zero(t, count[w], "the held worker id %d was handed to a process", w)
			total := 0
			for _, n := range count {
				total += n
			}
			assert.Equal(t, procs, total)
			assert.Equal(t, LeaseHeld, held.Lease().State)
		})
	}
}

// TestCrashHandoff: a child holding a worker id is killed with SIGKILL, and
// a new holder of the same worker id, whose clock is 2 s behind, issues
// only IDs above every ID the child wrote: whether the child issued
// steadily, idled and then burst up to its promise, or ran on a wall clock
// that stepped forward. The first takes the slot when it has expired (two
// worker ids, the other held); the others take it over at once as the
// same StatefulSet pod.
func TestCrashHandoff(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	behind := skewedClock{-2 * time.Second}
	for _, b := range dbtest.Backends {
		for _, mode := range []string{"issue", "burst", "step"} {
			t.Run(b.Name+"/"+mode, func(t *testing.T) {
				db := b.Fresh(t)
				plan := livePlan{Mode: mode, Driver: db.Driver, DSN: db.DSN, Dialect: b.Dialect, Worker: 5, Pod: "ledger-0",
					WorkerBits: 10, Out: filepath.Join(t.TempDir(), "ids")}
				opts := []Option{WithService("handoff"), WithHeartbeat(fastBeat), WithRequireLease(),
					WithLeaseTimeout(20 * time.Second), WithClock(behind), quiet()}
				if mode == "issue" {
					// Two worker ids; this process holds one, the child
					// leases the other.
					plan.Worker, plan.WorkerBits = -1, 1
					opts = append(opts, WithLayout(Layout{WorkerBits: 1, SequenceBits: 21}))
					open(t, db.DB, b.Dialect, append(opts[:len(opts):len(opts)], WithService("other"))...)
				} else {
					t.Setenv("POD_NAME", "ledger-0")
					opts = append(opts, WithWorkerID(5))
				}
				c := startChild(t, plan)
				worker, err := strconv.ParseInt(c.expect(t, "ready")[1], 10, 64)
				require.NoError(t, err)
				if mode == "burst" {
					c.expect(t, "fenced")
				} else {
					time.Sleep(time.Second)
				}
				promise, _ := slotPromise(t, db.DB, worker)
				ids := c.kill(t)
				require.NotEmpty(t, ids)
				var top int64
				for _, id := range ids {
					top = max(top, id)
				}
				if mode == "issue" {
					// Wait for the dead child's slot to expire.
					time.Sleep(fastBeat.TTL + 200*time.Millisecond)
				}
				g := open(t, db.DB, b.Dialect, opts...)
				require.Equal(t, worker, g.WorkerID(), "the same worker id")
				first, err := g.NextID()
				require.NoError(t, err)
				for range 10_000 {
					id, err := g.NextID()
					require.NoError(t, err)
					require.Greater(t, id, top)
				}
				assert.Greater(t, first, top, "above every ID the child wrote")
				assert.Greater(t, unixMs(t, g, first), promise, "above the child's promise")
				p, err := g.Decode(top)
				require.NoError(t, err)
				t.Logf("child wrote %d IDs up to %s (promise %s); the new holder began at %s",
					len(ids), p.Time.Format(millisUTC), time.UnixMilli(promise).UTC().Format(millisUTC),
					time.UnixMilli(unixMs(t, g, first)).UTC().Format(millisUTC))
			})
		}
	}
}

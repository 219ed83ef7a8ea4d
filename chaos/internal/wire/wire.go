// Package wire is what the chaos suite's parent and its child processes
// say to each other: a child's plan, the generators it is told to open,
// the commands it reads on standard input and the events it writes on
// standard output, one JSON object a line each way.
package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// EnvPlan is the environment variable that carries a child's Plan.
const EnvPlan = "CHAOS_CHILD_PLAN"

// Plan is what a child process is: one incarnation of a simulated service
// process. A process killed and restarted is a new incarnation with a new
// Name and the same everything else.
type Plan struct {
	// Name prefixes the child's ID files, e.g. "p3.2" (process 3,
	// incarnation 2).
	Name string
	// Driver is the database/sql driver ("mysql", "pgx" or "sqlite") and
	// Dialect ent's dialect name.
	Driver, Dialect string
	// DSNs are the databases a generator may lease from (GenSpec.DSN picks
	// one): usually one, through the child's own proxy; a process that
	// opens generators on several databases (two ent clients) has several.
	DSNs []string
	// Dir is where the ID files go.
	Dir string
}

// GenSpec is a generator to open: the options of entflake.OpenDB.
type GenSpec struct {
	// ID names the generator within the incarnation (its ID file).
	ID int
	// DSN indexes Plan.DSNs. Every generator gets a pool of its own, as an
	// ent client has.
	DSN int
	// Service is WithService.
	Service string
	// Worker is WithWorkerID, or -1 to lease.
	Worker int64
	// ClockSeqBits, WorkerBits and SequenceBits are WithLayout (all 0: the
	// default layout).
	ClockSeqBits, WorkerBits, SequenceBits int
	// EpochMs is WithEpoch in Unix milliseconds (0: the default epoch).
	EpochMs int64
	// RangeLo and RangeHi are WithWorkerRange (both 0: none).
	RangeLo, RangeHi int64
	// Policy is the rollback policy: "clamp" (default), "wait", "reject"
	// or "bump".
	Policy string
	// Heartbeat, in milliseconds.
	IntervalMs, RetryMs, TimeoutMs, MarginMs, TTLMs int64
	// LeaseTimeoutMs is WithLeaseTimeout (0: the default).
	LeaseTimeoutMs int64
	// Require is WithRequireLease.
	Require bool
	// BurstMs is WithBurst (0: off).
	BurstMs int64
	// Seed drives the generator's issuing pattern (batch sizes).
	Seed uint64
	// SkipFloor plants a breach: the first slot the generator holds skips
	// its floor (leasetrace.Hooks.SkipFloor). Only the oracle's own test
	// sets it.
	SkipFloor bool `json:",omitempty"`
	// DefaultClock leaves the generator on entflake's default clock (wall
	// time at start plus Go's monotonic time) instead of the process's
	// clock with an offset: the parent's clock faults do not reach it.
	DefaultClock bool `json:",omitempty"`
	// StartSpan is WithRandomSequenceStart (0: off).
	StartSpan int64 `json:",omitempty"`
	// Insert makes the generator's issuer insert, now and then, a row
	// through an ent client whose IDGenerator it is (the example's
	// schema, migrated with entflake.Migrate beside the leases): the
	// tripwire sees every insert.
	Insert bool `json:",omitempty"`
}

// Command is a line the parent writes to a child.
type Command struct {
	// Cmd is "open" (Gens, opened at the same moment from a barrier),
	// "close" (Gen), "clock" (Offset), "freeze" and "thaw" (the process's
	// clock stops, and goes on from where it stopped: a VM suspended and
	// resumed, whose monotonic clock does not count the suspension), "hold" (Hold: hold the next
	// statement that matches, see internal/holddriver), "release" (Name:
	// let what it holds go on) or "quit" (close everything, report, exit).
	Cmd    string
	Gens   []GenSpec `json:",omitempty"`
	Gen    int       `json:",omitempty"`
	Offset int64     `json:",omitempty"` // nanoseconds added to the wall clock
	Hold   *Hold     `json:",omitempty"`
	Name   string    `json:",omitempty"`
}

// Hold is a statement hold to arm in a child: the next statement (of any
// of its generators) whose text contains one of Patterns is held before
// it is sent ("before") or its answer before it reaches the lease
// ("answer"), until a "release" command names it; the child reports
// "held" when it is.
type Hold struct {
	Name     string
	Patterns []string
	Phase    string // "before", "answer" or "drop" (held before it is sent, then never sent: the connection is cut)
	// Count is how many matching statements it holds (0: one).
	Count int `json:",omitempty"`
}

// Event is a line a child writes to the parent.
type Event struct {
	// Ev is "hello" (Pid), "opening" (Gen, At: just before OpenDB),
	// "ready" (Gen, Worker, Source, State, Instance), "openerr" (Gen,
	// Kind, Err), "closed" (Gen, Err), "stats" (Gen, Stats), "clock"
	// (Offset, applied), "held" (Name, Query: a statement is held), "armed"
	// (Name, or Err) or "bye".
	Ev       string
	Gen      int    `json:",omitempty"`
	At       int64  `json:",omitempty"` // Unix ns, the real clock
	Pid      int    `json:",omitempty"`
	Worker   int64  `json:",omitempty"`
	Source   string `json:",omitempty"`
	State    string `json:",omitempty"`
	Instance string `json:",omitempty"`
	Kind     string `json:",omitempty"`
	Err      string `json:",omitempty"`
	Offset   int64  `json:",omitempty"`
	Stats    *Stats `json:",omitempty"`
	Name     string `json:",omitempty"`
	Query    string `json:",omitempty"`
}

// Stats is what a child knows of one generator.
type Stats struct {
	// Written is the number of IDs written to the generator's file.
	Written int64
	// Errors counts NextID errors by kind (see ErrorKinds).
	Errors map[string]int64
	// From entflake's Stats.
	Renewals, RenewalFailures, Fencings, Switches, Collisions int64
	// Inserts and InsertErrors count the rows the generator's ent client
	// inserted, and the inserts that failed (GenSpec.Insert).
	Inserts, InsertErrors int64
	State                 string
	Worker                int64
	Closed                bool
}

// ErrorKinds are the kinds of NextID errors a child tells apart: "lost"
// (ErrFenced with ErrLeaseLost), "fenced" (other ErrFenced), "closed",
// "backwards", "exhausted" and "other".
var ErrorKinds = []string{"lost", "fenced", "closed", "backwards", "exhausted", "other"}

// IDFile is the file of generator gen of the incarnation name.
func IDFile(dir, name string, gen int) string {
	return filepath.Join(dir, fmt.Sprintf("%s-g%d.ids", name, gen))
}

// ReadIDs reads an ID file: little-endian int64s, in the order issued. A
// trailing partial ID (a write cut by SIGKILL mid-way, which a single
// write(2) of a few hundred bytes to a regular file does not do in
// practice) is dropped and reported.
func ReadIDs(path string) (ids []int64, partial bool, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false, err
	}
	ids = make([]int64, len(b)/8)
	for i := range ids {
		ids[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return ids, len(b)%8 != 0, nil
}

// HistFile is the history file of generator gen of the incarnation name:
// what its lease was acknowledged, one HistEvent a line, each written with
// one write(2) before the generator relies on it (see
// internal/leasetrace), so that a SIGKILL never leaves an ID in the ID
// file whose range is missing here.
func HistFile(dir, name string, gen int) string {
	return filepath.Join(dir, fmt.Sprintf("%s-g%d.hist", name, gen))
}

// HistEvent is a leasetrace.Event as a child records it, with N: how many
// IDs the generator had written to its ID file when it was reported. An
// ID at position N or later may rely on the event; one before it was
// issued before the event and may not.
type HistEvent struct {
	// K is the event's kind: "held", "promised", "ended" or
	// "uncoordinated" (leasetrace.Kind).
	K string
	// W and F are the worker id and the slot's fence.
	W, F int64 `json:",omitempty"`
	// Floor, P (promise), Last and From are Unix ms, as in
	// leasetrace.Event.
	Floor, P, Last, From int64 `json:",omitempty"`
	N                    int64
}

// ReadHist reads a history file. A last line cut short by a SIGKILL
// mid-write (which a single write(2) of a short line to a regular file does
// not do in practice) is dropped and reported.
func ReadHist(path string) (evs []HistEvent, partial bool, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false, err
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return evs, true, nil
		}
		var e HistEvent
		if err := json.Unmarshal(b[:i], &e); err != nil {
			return nil, false, fmt.Errorf("%s: %w", path, err)
		}
		evs = append(evs, e)
		b = b[i+1:]
	}
	return evs, false, nil
}

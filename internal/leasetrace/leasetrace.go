// Package leasetrace reports what a generator's lease was acknowledged, as
// the generator learns it, for the chaos suite's oracle (package chaos),
// which checks a run's history against the model of the design: for every
// worker id, the millisecond ranges that two holders were acknowledged
// never overlap, and every ID a generator wrote lies in a range it held
// when it issued it. A checker that only looks for two equal IDs sees a
// breach only when another generator happened to issue in the same
// millisecond; the history shows one whenever it happens.
//
// The hooks ride on the context given to entflake.Open or OpenDB (as
// net/http/httptrace's ClientTrace rides on a request's), so that the
// library's API carries nothing for them, and a generator opened without
// them pays one nil check on the slow paths that learn something (a take,
// a renewal, a loss, Close), never on NextID.
package leasetrace

import "context"

// Kind says what an Event reports.
type Kind string

// The kinds of Event.
const (
	// Held: the generator is about to issue under WorkerID with the slot
	// of Fence, from Floor up to Promise (Unix ms, in the generator's own
	// clock, the time frame of its IDs). Reported after the database
	// acknowledged the claim and before the generator switches to the
	// slot, so that every ID that relies on it is issued after the report.
	Held Kind = "held"
	// Promised: a renewal of the slot (WorkerID, Fence) was acknowledged
	// with Promise. Reported before the generator's limit is raised.
	Promised Kind = "promised"
	// Ended: the generator issues under the slot (WorkerID, Fence) no
	// more (closed, lost, moved by the tripwire, given back); Last is the
	// highest millisecond it issued under it (Unix ms), or less: a slot
	// given back before any ID reports its floor less one. Reported after
	// the generator stopped and before the slot is released.
	Ended Kind = "ended"
	// Uncoordinated: the generator issues under WorkerID with no slot
	// from From (Unix ms) on: the fallback hash, or a fixed worker id not
	// registered yet. Such IDs coordinate with nobody, as documented; the
	// oracle counts them apart.
	Uncoordinated Kind = "uncoordinated"
)

// Event is one thing a generator learnt about its worker id.
type Event struct {
	Kind     Kind
	WorkerID int64
	Fence    int64
	// Floor and Promise (Held), Promise (Promised), Last (Ended), From
	// (Uncoordinated): Unix milliseconds in the generator's clock.
	Floor, Promise, Last, From int64
}

// Hooks are what a traced generator calls.
type Hooks struct {
	// Event is called on the goroutine that learnt it, before the
	// generator relies on it (see the kinds). It must not block for long:
	// a renewal waits for it.
	Event func(Event)
	// SkipFloor plants a breach, for the suite to show that its oracle
	// sees one that no two IDs reveal: when it returns true for a slot
	// about to be held, the generator neither waits for the slot's floor
	// nor keeps above it, and issues from its clock (the Held event still
	// reports the true floor). Never set outside that test.
	SkipFloor func(workerID int64) bool
}

type key struct{}

// With returns a context that carries h to the generator opened with it.
func With(ctx context.Context, h *Hooks) context.Context {
	return context.WithValue(ctx, key{}, h)
}

// From returns the hooks ctx carries, or nil.
func From(ctx context.Context) *Hooks {
	h, _ := ctx.Value(key{}).(*Hooks)
	return h
}

// Emit calls h.Event with e, if there is one; h may be nil.
func (h *Hooks) Emit(e Event) {
	if h != nil && h.Event != nil {
		h.Event(e)
	}
}

// Skip reports whether h plants a skipped floor for workerID; h may be nil.
func (h *Hooks) Skip(workerID int64) bool {
	return h != nil && h.SkipFloor != nil && h.SkipFloor(workerID)
}

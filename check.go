package entflake

import (
	"fmt"
	"net/http"
	"strings"
)

// CheckOption adds a condition to Generator.Check.
type CheckOption func(*checkOptions)

type checkOptions struct{ coordinated bool }

// FailUncoordinated makes Check fail, with ErrNoLease, while the worker id
// is coordinated with nobody: a fallback hash (SourceFallback; with a
// database, LeaseFallback until the background lease switches to a leased
// id) or a fixed worker id not yet registered in its slot
// (LeaseUnregistered). A fixed worker id without a database (New, or no
// database given) is the caller's choice, and passes. The generator issues IDs
// then, which may repeat another instance's; a readiness probe that would
// rather keep such an instance out of service passes this option.
func FailUncoordinated() CheckOption { return func(o *checkOptions) { o.coordinated = true } }

// Check is a health check for a readiness probe: nil while NextID would
// issue an ID now, and otherwise an error that says why not (NextID's own,
// without issuing one):
//
//   - ErrFenced: renewals failed until the clock reached the promise
//     (LeaseFenced), the slot was taken over or its row is gone
//     (ErrLeaseLost in the chain, LeaseLost), the tripwire saw another
//     instance issue under the worker id (ErrWorkerCollision), or the
//     generator waits for the clock to pass its worker id's floor;
//   - ErrClosed: Close was called;
//   - ErrClockBeforeEpoch, ErrTimeOverflow: the clock is outside what the
//     layout and epoch can hold.
//
// With FailUncoordinated it also fails while the worker id is coordinated
// with nobody. A generator that waits for its clock (a burst, a small
// rollback the policy waits out) is ready: NextID returns once the clock
// moves on. Check touches no database and takes no lock: call it as often
// as a probe does. It is a readiness check; a liveness probe must not
// depend on it (a lease lost during an outage comes back on its own, and a
// restart would only add a start-up to the outage). A nil option is
// skipped. ReadyHandler serves it over HTTP. The database's words in its
// error were redacted where they were recorded (Generator.update, fence):
// no password shows.
func (g *Generator) Check(opts ...CheckOption) error {
	var o checkOptions
	for _, opt := range opts {
		if opt != nil { // as Open skips a nil Option
			opt(&o)
		}
	}
	if err := g.g.Ready(); err != nil {
		return fmt.Errorf("entflake: not ready (lease %s): %w", g.Lease().State, err)
	}
	if !o.coordinated {
		return nil
	}
	st := g.Lease()
	if st.State != LeaseFallback && st.State != LeaseUnregistered && g.Source() != SourceFallback {
		return nil
	}
	reason := ""
	if st.Err != nil {
		reason = ": " + st.Err.Error()
	}
	return fmt.Errorf("entflake: not ready: %w: worker id %d (%s, lease %s) is coordinated with nobody%s",
		ErrNoLease, g.WorkerID(), g.Source(), st.State, reason)
}

// ReadyHandler returns an http.Handler for a readiness probe that answers
// what Check(opts...) says at each request: 200 OK with the body "ready"
// while it is nil, and 503 Service Unavailable with Check's error, one
// line of plain text, otherwise. Pass FailUncoordinated to keep an
// instance whose worker id is coordinated with nobody (a fallback hash, an
// unregistered fixed id) out of service, and give entflakeprom's collector
// the same options (its WithCheckOptions) so that entflake_ready reads what
// the probe answers.
//
//	http.Handle("/readyz", gen.ReadyHandler(entflake.FailUncoordinated()))
//
// Like Check, it touches no database and takes no lock, and it is for
// readiness only: a liveness probe must not depend on it. Responses are
// not to be cached (Cache-Control: no-store); any method is answered.
func (g *Generator) ReadyHandler(opts ...CheckOption) http.Handler {
	opts = append([]CheckOption(nil), opts...) // the caller's slice may change later
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		if err := g.Check(opts...); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			// One line, whatever a driver's error holds, for a probe's log.
			_, _ = fmt.Fprintln(w, strings.Join(strings.Fields(err.Error()), " "))
			return
		}
		_, _ = fmt.Fprintln(w, "ready")
	})
}

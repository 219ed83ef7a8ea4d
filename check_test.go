package entflake

import (
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
)

// TestCheck: Check is nil while NextID would issue, and otherwise names
// why not, with NextID's error in the chain, without issuing an ID:
// stopped (a lost lease, the tripwire), fenced past the promise, closed.
// FailUncoordinated fails a fallback id and an unregistered fixed id, and
// passes a leased id and a fixed id without a database.
func TestCheck(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	g, err := New(5, quiet())
	require.NoError(t, err)
	require.NoError(t, g.Check())
	require.NoError(t, g.Check(FailUncoordinated()), "a fixed id without a database is the caller's choice")
	id, err := g.NextID()
	require.NoError(t, err)
	require.NoError(t, g.Check())
	assert.Equal(t, id, g.g.Last()<<22|5<<12, "Check issues nothing")

	// What the keeper and the tripwire do to the engine.
	g.g.Stop(fmt.Errorf("entflake: NextID: %w: %w", ErrFenced, ErrWorkerCollision))
	err = g.Check()
	require.ErrorIs(t, err, ErrFenced)
	require.ErrorIs(t, err, ErrWorkerCollision)
	_, nerr := g.NextID()
	assert.ErrorIs(t, nerr, ErrFenced, "Check says what NextID says")
	require.NoError(t, g.g.Switch(5, 0, 1<<41-1))
	require.NoError(t, g.Check(), "issuing again")
	g.g.SetLimit(g.g.Last()) // a promise that the clock has passed
	time.Sleep(2 * time.Millisecond)
	require.ErrorIs(t, g.Check(), ErrFenced)
	require.NoError(t, g.Close())
	require.ErrorIs(t, g.Check(), ErrClosed)

	// A fallback id, from a database that does not answer.
	mariadb := dbtest.Backends[0]
	down, err := sql.Open(mariadb.Driver, mariadb.ClosedDSN(t))
	require.NoError(t, err)
	defer down.Close()
	fb := open(t, down, dialect.MySQL, WithService("svc"), WithLeaseTimeout(500*time.Millisecond), quiet())
	require.Equal(t, SourceFallback, fb.Source())
	require.NoError(t, fb.Check(), "it issues")
	err = fb.Check(FailUncoordinated())
	require.ErrorIs(t, err, ErrNoLease)
	assert.ErrorContains(t, err, "coordinated with nobody")
	fixed := open(t, down, dialect.MySQL, WithService("svc"), WithWorkerID(9), WithLeaseTimeout(500*time.Millisecond), quiet())
	require.Equal(t, LeaseUnregistered, fixed.Lease().State)
	require.ErrorIs(t, fixed.Check(FailUncoordinated()), ErrNoLease)

	// A leased id passes both.
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		l := open(t, db.DB, b.Dialect, WithService("svc"), quiet())
		require.Equal(t, SourceLease, l.Source())
		require.NoError(t, l.Check())
		require.NoError(t, l.Check(FailUncoordinated()))
		require.NoError(t, l.Close())
		err := l.Check()
		require.True(t, errors.Is(err, ErrClosed), "%v", err)
	})
}

// ready asks h as a readiness probe would and returns the status and the
// body.
func ready(t *testing.T, h http.Handler) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	assert.Equal(t, "text/plain; charset=utf-8", rec.Header().Get("Content-Type"))
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
	return rec.Code, rec.Body.String()
}

// TestReadyHandler: ReadyHandler answers what Check answers with the same
// options. During a fallback start (a database that does not answer), the
// handler without options answers 200, and with FailUncoordinated 503 and
// one line naming ErrNoLease's reason; with a lease, 200 "ready" on every
// database, with or without the option; after Close, 503. A nil option is
// skipped, as Open skips a nil Option.
func TestReadyHandler(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	mariadb := dbtest.Backends[0]
	down, err := sql.Open(mariadb.Driver, mariadb.ClosedDSN(t))
	require.NoError(t, err)
	defer down.Close()
	fb := open(t, down, dialect.MySQL, WithService("svc"), WithLeaseTimeout(500*time.Millisecond), quiet())
	require.Equal(t, LeaseFallback, fb.Lease().State)
	code, body := ready(t, fb.ReadyHandler())
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ready\n", body)
	code, body = ready(t, fb.ReadyHandler(FailUncoordinated(), nil))
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.True(t, strings.HasPrefix(body, "entflake: not ready: "+ErrNoLease.Error()), body)
	assert.Contains(t, body, "is coordinated with nobody")
	assert.Equal(t, 1, strings.Count(body, "\n"), "one line: %q", body)

	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		l := open(t, db.DB, b.Dialect, WithService("svc"), quiet())
		require.Equal(t, SourceLease, l.Source())
		h := l.ReadyHandler(FailUncoordinated())
		for _, h := range []http.Handler{l.ReadyHandler(), h} {
			code, body := ready(t, h)
			assert.Equal(t, http.StatusOK, code)
			assert.Equal(t, "ready\n", body)
		}
		require.NoError(t, l.Close())
		code, body := ready(t, h)
		assert.Equal(t, http.StatusServiceUnavailable, code)
		assert.Equal(t, l.Check().Error()+"\n", body)
	})
}

package entflakeprom_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"entgo.io/ent/dialect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/entflakeprom"
)

var quiet = entflake.WithLogger(slog.New(slog.DiscardHandler))

// scrape serves reg with promhttp on loopback and reads it as a client
// would: the metric lines, name and labels to value.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]string {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	series := map[string]string{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		series[line[:i]] = line[i+1:]
	}
	return series
}

// TestScrape: a leased generator on SQLite, scraped through a real
// promhttp handler: the info gauge names its worker id, source and service,
// the lease state is held (1) and no other state, it is ready, the renewal
// and error counters count what happened, and after Close the state is
// released and it is no longer ready. The names pass Prometheus's lint.
func TestScrape(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "x.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	require.NoError(t, err)
	defer db.Close()
	gen, err := entflake.OpenDB(ctx, db, dialect.SQLite, entflake.WithService("payments"), quiet)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	c := entflakeprom.NewCollector(gen)
	reg.MustRegister(c)
	problems, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	assert.Empty(t, problems, "Prometheus naming conventions")

	_, err = gen.NextID()
	require.NoError(t, err)
	s := scrape(t, reg)
	w := strconv.FormatInt(gen.WorkerID(), 10)
	assert.Equal(t, "1", s[`entflake_info{service="payments",source="lease",worker_id="`+w+`"}`], "%v", s)
	assert.Equal(t, "1", s[`entflake_lease_state{state="held"}`])
	assert.Equal(t, "0", s[`entflake_lease_state{state="fenced"}`])
	assert.Equal(t, "1", s["entflake_ready"])
	assert.Equal(t, "0", s[`entflake_id_errors_total{kind="closed"}`])
	assert.Equal(t, "0", s["entflake_tripwire_collisions_total"])
	assert.Contains(t, s, "entflake_id_wait_seconds_total")
	assert.Contains(t, s, "entflake_clock_rollback_largest_seconds")

	require.NoError(t, gen.Close())
	_, err = gen.NextID()
	require.ErrorIs(t, err, entflake.ErrClosed)
	s = scrape(t, reg)
	assert.Equal(t, "1", s[`entflake_lease_state{state="released"}`])
	assert.Equal(t, "0", s[`entflake_lease_state{state="held"}`])
	assert.Equal(t, "0", s["entflake_ready"])
	assert.Equal(t, "1", s[`entflake_id_errors_total{kind="closed"}`])
}

// unreachable is a database/sql driver whose every connection fails as a
// dial to a server that is down does, so that Open leases nothing and
// starts in fallback, retrying the lease in the background.
type unreachable struct{}

func (unreachable) Open(string) (driver.Conn, error) {
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
}

func init() { sql.Register("entflakeprom-unreachable", unreachable{}) }

// TestReadyCheckOptions: entflake_ready follows Check with the options
// WithCheckOptions gives. During a fallback start (a database that does not
// answer), the collector without options reads 1 (it issues IDs), and with
// FailUncoordinated 0, as the readiness probe that ReadyHandler serves with
// the same option answers 503; with a lease both read 1 and the probe
// answers 200.
func TestReadyCheckOptions(t *testing.T) {
	ctx := context.Background()
	probe := func(h http.Handler) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code
	}
	readings := func(gen *entflake.Generator) (plain, strict string) {
		plainReg, strictReg := prometheus.NewRegistry(), prometheus.NewRegistry()
		plainReg.MustRegister(entflakeprom.NewCollector(gen))
		strictReg.MustRegister(entflakeprom.NewCollector(gen, nil, entflakeprom.WithCheckOptions(entflake.FailUncoordinated())))
		return scrape(t, plainReg)["entflake_ready"], scrape(t, strictReg)["entflake_ready"]
	}

	down, err := sql.Open("entflakeprom-unreachable", "")
	require.NoError(t, err)
	defer down.Close()
	fb, err := entflake.OpenDB(ctx, down, dialect.MySQL, entflake.WithService("payments"), quiet)
	require.NoError(t, err)
	defer fb.Close()
	require.Equal(t, entflake.LeaseFallback, fb.Lease().State)
	plain, strict := readings(fb)
	assert.Equal(t, "1", plain, "without options: it issues")
	assert.Equal(t, "0", strict, "with FailUncoordinated")
	assert.Equal(t, http.StatusServiceUnavailable, probe(fb.ReadyHandler(entflake.FailUncoordinated())))

	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "x.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	require.NoError(t, err)
	defer db.Close()
	leased, err := entflake.OpenDB(ctx, db, dialect.SQLite, entflake.WithService("payments"), quiet)
	require.NoError(t, err)
	defer leased.Close()
	require.Equal(t, entflake.SourceLease, leased.Source())
	plain, strict = readings(leased)
	assert.Equal(t, "1", plain)
	assert.Equal(t, "1", strict)
	assert.Equal(t, http.StatusOK, probe(leased.ReadyHandler(entflake.FailUncoordinated())))
}

package entflakeprom_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/entflakeprom"
	"github.com/entflake/entflake/internal/dbtest"
)

// TestAlertsFire runs the shipped rules (deploy/prometheus) in a real
// Prometheus server on loopback, scraping a service that exports the
// collectors of four generators and of their pool, on MariaDB: a pool
// whose worker range holds four ids, all four held (the capacity alert),
// and one generator whose database is then cut off past its promise (the
// fenced alert). Both alerts go pending, with the labels that name what
// fired, while a healthy generator's alert does not; and every query of
// the dashboard (deploy/grafana) answers with series. The server is
// Debian's prometheus package (CI installs it): without the binary the
// test skips, except under CI=true, where it fails.
func TestAlertsFire(t *testing.T) {
	t.Setenv(entflake.EnvWorkerID, "")
	_ = mysql.SetLogger(log.New(io.Discard, "", 0)) // the cut connections' EOFs
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI=true and no prometheus binary: %v (apt-get install prometheus)", err)
		}
		t.Skip("no prometheus binary on PATH (apt-get install prometheus)")
	}
	db := dbtest.MySQL(t)
	proxy := dbtest.NewProxy(t, db.ServerAddr(t))
	via := db.Via(t, proxy.Addr())
	beat := entflake.Heartbeat{Interval: 100 * time.Millisecond, Retry: 50 * time.Millisecond,
		Timeout: 500 * time.Millisecond, Margin: 300 * time.Millisecond, TTL: 2 * time.Second}

	reg := prometheus.NewRegistry()
	var cut *entflake.Generator
	for i := range 4 {
		handle := db.DB
		if i == 0 {
			handle = via
		}
		g, err := entflake.OpenDB(context.Background(), handle, dialect.MySQL, entflake.WithService("svc"),
			entflake.WithWorkerRange(0, 3), entflake.WithHeartbeat(beat), entflake.WithRequireLease(), quiet)
		require.NoError(t, err)
		t.Cleanup(func() { _ = g.Close() })
		if i == 0 {
			cut = g
		}
		prometheus.WrapRegistererWith(prometheus.Labels{"gen": fmt.Sprint(i)}, reg).MustRegister(entflakeprom.NewCollector(g))
	}
	pool, err := entflakeprom.NewPoolCollector(db.DB, dialect.MySQL, entflakeprom.WithPoolInterval(time.Second))
	require.NoError(t, err)
	reg.MustRegister(pool)
	svc := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(svc.Close)

	api := startPrometheus(t, bin, strings.TrimPrefix(svc.URL, "http://"))

	// The capacity alert: four of four worker ids held.
	alert := waitAlert(t, api, "EntflakePoolNearlyFull", nil)
	assert.Contains(t, alert["labels"], "layout")
	assert.Equal(t, "warning", alert["labels"].(map[string]any)["severity"])

	// The fenced alert: generator 0's database cut off past its promise.
	proxy.Cut()
	deadline := time.Now().Add(10 * time.Second)
	for cut.Lease().State != entflake.LeaseFenced && cut.Lease().State != entflake.LeaseLost {
		require.True(t, time.Now().Before(deadline), "generator 0 not fenced: %v", cut.Lease().State)
		time.Sleep(50 * time.Millisecond)
	}
	alert = waitAlert(t, api, "EntflakeFenced", map[string]string{"gen": "0"})
	assert.Equal(t, "critical", alert["labels"].(map[string]any)["severity"])
	for _, a := range alerts(t, api) {
		if a["labels"].(map[string]any)["alertname"] == "EntflakeFenced" {
			assert.Equal(t, "0", a["labels"].(map[string]any)["gen"], "only the generator cut off is fenced: %v", a)
		}
	}

	// The dashboard's queries answer.
	b, err := os.ReadFile("../deploy/grafana/entflake-dashboard.json")
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	require.NoError(t, json.Unmarshal(b, &d))
	n := 0
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			expr := strings.ReplaceAll(q.Expr, "$__rate_interval", "1m")
			var res struct {
				Status string
				Data   struct{ Result []any }
			}
			get(t, api+"/api/v1/query?query="+url.QueryEscape(expr), &res)
			assert.Equal(t, "success", res.Status, "%s: %s", p.Title, expr)
			assert.NotEmpty(t, res.Data.Result, "panel %q: %s returned no series", p.Title, expr)
			n++
		}
	}
	assert.GreaterOrEqual(t, n, 14)
}

// startPrometheus runs bin on loopback with the shipped rules, scraping
// target every second, and returns its API's base URL once it is ready
// and has scraped target twice (rate() needs two samples).
func startPrometheus(t *testing.T, bin, target string) string {
	t.Helper()
	rules, err := filepath.Abs("../deploy/prometheus/entflake-rules.yml")
	require.NoError(t, err)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: svc
    static_configs:
      - targets: [%q]
`, rules, target)), 0o644))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("prometheus's log:\n%s", b)
		}
	})
	api := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		var res struct {
			Data struct{ Result []any }
		}
		if resp, err := http.Get(api + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				get(t, api+"/api/v1/query?query="+url.QueryEscape(`count_over_time(up{job="svc"}[1m]) >= 2`), &res)
				if len(res.Data.Result) > 0 {
					return api
				}
			}
		}
		require.True(t, time.Now().Before(deadline), "prometheus did not become ready and scrape the service")
		time.Sleep(200 * time.Millisecond)
	}
}

// waitAlert waits up to 30 s for the alert named to be pending or firing
// with the labels given, and returns it.
func waitAlert(t *testing.T, api, name string, labels map[string]string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, a := range alerts(t, api) {
			ls := a["labels"].(map[string]any)
			if ls["alertname"] != name || (a["state"] != "pending" && a["state"] != "firing") {
				continue
			}
			match := true
			for k, v := range labels {
				match = match && ls[k] == v
			}
			if match {
				return a
			}
		}
		require.True(t, time.Now().Before(deadline), "%s %v never went pending: %v", name, labels, alerts(t, api))
		time.Sleep(250 * time.Millisecond)
	}
}

func alerts(t *testing.T, api string) []map[string]any {
	t.Helper()
	var res struct {
		Data struct{ Alerts []map[string]any }
	}
	get(t, api+"/api/v1/alerts", &res)
	return res.Data.Alerts
}

func get(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", u, b)
	require.NoError(t, json.Unmarshal(b, v), "%s", b)
}

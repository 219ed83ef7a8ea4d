package main

import (
	"database/sql"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"entgo.io/ent/dialect"

	"github.com/entflake/entflake/entflakeprom"
)

// TestDashboardIsGenerated: the checked-in JSON is what Build writes (run
// go generate ./... in deploy/grafana after a change).
func TestDashboardIsGenerated(t *testing.T) {
	want, err := Build()
	require.NoError(t, err)
	got, err := os.ReadFile("entflake-dashboard.json")
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "entflake-dashboard.json is stale: go generate ./... in deploy/grafana")
}

// TestQueriesParse: every panel's query is PromQL that Prometheus's own
// parser accepts (with Grafana's $__rate_interval given a value), and reads
// only metrics the library's collectors describe: a panel over a renamed
// or misspelt metric would show "No data" and nothing else would notice.
func TestQueriesParse(t *testing.T) {
	exported := exportedMetrics(t)
	exprs := Queries(t)
	require.GreaterOrEqual(t, len(exprs), 14, "a query per panel at least")
	read := map[string]bool{}
	for panel, list := range exprs {
		for _, q := range list {
			e, err := parser.NewParser(parser.Options{}).ParseExpr(Substitute(q))
			require.NoError(t, err, "panel %q: %s", panel, q)
			names := 0
			parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok {
					if vs.Name == "" {
						return nil // vector(0)'s
					}
					names++
					read[vs.Name] = true
					assert.True(t, exported[vs.Name], "panel %q reads %s, which no collector of entflakeprom exports", panel, vs.Name)
				}
				return nil
			})
			assert.Positive(t, names, "panel %q: %s reads no metric", panel, q)
		}
	}
	// And every metric has a panel: a new one is shown, or said to be
	// left out here.
	for name := range exported {
		assert.True(t, read[name], "no panel shows %s", name)
	}
}

// Queries returns each panel's PromQL queries, by title, as the
// checked-in JSON has them.
func Queries(t testing.TB) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("entflake-dashboard.json")
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			Type    string
			Title   string
			Targets []struct{ Expr string }
		}
	}
	require.NoError(t, json.Unmarshal(b, &d))
	out := map[string][]string{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, q := range p.Targets {
			require.NotEmpty(t, q.Expr, "panel %q has an empty query", p.Title)
			out[p.Title] = append(out[p.Title], q.Expr)
		}
	}
	return out
}

// Substitute gives Grafana's variables the values a query needs to run
// outside Grafana.
func Substitute(q string) string {
	return strings.NewReplacer("$__rate_interval", "1m").Replace(q)
}

// exportedMetrics are the names the collectors describe.
func exportedMetrics(t *testing.T) map[string]bool {
	db, err := sql.Open("sqlite", "file::memory:")
	require.NoError(t, err)
	defer db.Close()
	pool, err := entflakeprom.NewPoolCollector(db, dialect.SQLite)
	require.NoError(t, err)
	names := map[string]bool{}
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range []prometheus.Collector{entflakeprom.NewCollector(nil), pool} {
		ch := make(chan *prometheus.Desc, 64)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			m := fq.FindStringSubmatch(d.String())
			require.NotNil(t, m, "%s", d)
			names[m[1]] = true
		}
	}
	require.GreaterOrEqual(t, len(names), 17)
	return names
}

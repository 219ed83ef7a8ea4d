// Command dashboard writes entflake's Grafana dashboard,
// entflake-dashboard.json, built with the Grafana Foundation SDK from the
// metrics entflakeprom exports (the library's own names, so that a renamed
// metric breaks the build, not a panel). It is a fleet view of every
// generator a Prometheus data source scrapes: how many are ready and how
// many issue uncoordinated or are fenced, the lease's renewals, waits at
// the ceiling and bursts, clock rollbacks, tripwire collisions, and how
// full each pool is by layout.
//
//	go generate ./...    # in deploy/grafana: writes entflake-dashboard.json
//
// The tests parse every panel's query with Prometheus's own PromQL parser
// and check that it reads only metrics the library exports; the real
// Prometheus test in entflakeprom (TestAlertsFire) runs the same queries
// against a scraped service.
package main

//go:generate go run . -o entflake-dashboard.json

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/entflake/entflake/entflakeprom"
)

func main() {
	out := flag.String("o", "", "the file to write (default: standard output)")
	flag.Parse()
	b, err := Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
	if *out == "" {
		os.Stdout.Write(b)
		return
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
}

// UID is the dashboard's uid: importing it again replaces it.
const UID = "entflake-fleet"

// rate is a counter's per-second rate over Grafana's rate interval.
func rate(metric string) string {
	return fmt.Sprintf("rate(%s[$__rate_interval])", metric)
}

// query is one PromQL target, with its legend.
func query(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Datasource(datasource()).Expr(expr).LegendFormat(legend)
}

func datasource() common.DataSourceRef {
	typ, uid := "prometheus", "${datasource}"
	return common.DataSourceRef{Type: &typ, Uid: &uid}
}

func series(title, description, unit string, queries ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().Title(title).Description(description).Unit(unit).Min(0).Height(8).Span(8)
	for _, q := range queries {
		p.WithTarget(q)
	}
	return p
}

func single(title, description string, q *prometheus.DataqueryBuilder, red float64) *stat.PanelBuilder {
	zero, limit := 0.0, red
	green, redColor := "green", "red"
	return stat.NewPanelBuilder().Title(title).Description(description).Height(4).Span(6).WithTarget(q.Instant()).
		Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps([]dashboard.Threshold{
			{Value: &zero, Color: green}, {Value: &limit, Color: redColor},
		}))
}

// Build returns the dashboard's JSON.
func Build() ([]byte, error) {
	m := struct{ ready, state, info, renewals, failures, fencings, switches, waits, waitSeconds, borrowed, errs, rollbacks, largest, collisions, live, capacity, readOK string }{
		entflakeprom.ReadyName, entflakeprom.LeaseStateName, entflakeprom.InfoName, entflakeprom.RenewalsName,
		entflakeprom.RenewalFailuresName, entflakeprom.FencingsName, entflakeprom.SwitchesName, entflakeprom.WaitsName,
		entflakeprom.WaitSecondsName, entflakeprom.BorrowedSecondsName, entflakeprom.ErrorsName, entflakeprom.RollbacksName,
		entflakeprom.LargestRollbackName, entflakeprom.CollisionsName, entflakeprom.PoolLiveName, entflakeprom.PoolCapacityName,
		entflakeprom.PoolReadOKName,
	}
	var panels []cog.Builder[dashboard.Panel]
	add := func(p ...cog.Builder[dashboard.Panel]) { panels = append(panels, p...) }
	add(
		single("Generators ready", "Generators whose Check is nil (entflake_ready).",
			query(fmt.Sprintf("sum(%s)", m.ready), "ready"), 1e9),
		single("Not ready", "Generators whose Check fails: fenced, lost, or waiting on the lease (EntflakeNotReady).",
			query(fmt.Sprintf("count(%s == 0) or vector(0)", m.ready), "not ready"), 1),
		single("Fenced or lost", "Generators that stopped issuing: their lease was lost or fenced (EntflakeFenced).",
			query(fmt.Sprintf(`count(%s{state=~"fenced|lost"} == 1) or vector(0)`, m.state), "fenced"), 1),
		single("Uncoordinated", "Generators on a fallback worker id, or a fixed one not registered yet: their IDs coordinate with nobody (EntflakeUncoordinated).",
			query(fmt.Sprintf(`count(%s{state=~"fallback|unregistered"} == 1) or vector(0)`, m.state), "uncoordinated"), 1),
	)
	add(
		series("Lease state", "Generators in each state of the lease.", "short",
			query(fmt.Sprintf("sum by (state) (%s)", m.state), "{{state}}")),
		series("Renewals", "Acknowledged and failed renewals of the worker-id leases, per second, and worker ids switched to (EntflakeRenewalsFailing).", "ops",
			query(fmt.Sprintf("sum(%s)", rate(m.renewals)), "renewals"),
			query(fmt.Sprintf("sum(%s)", rate(m.failures)), "failures"),
			query(fmt.Sprintf("sum(%s)", rate(m.switches)), "switches"),
			query(fmt.Sprintf("sum(%s)", rate(m.fencings)), "fencings")),
		series("NextID errors", "Failed NextID calls per second, by kind.", "ops",
			query(fmt.Sprintf("sum by (kind) (%s)", rate(m.errs)), "{{kind}}")),
	)
	add(
		series("Waits at the ceiling", "Share of time generators waited for the clock (a millisecond's sequence or a burst's lead used up; EntflakeAtCeiling), and waits per second.", "percentunit",
			query(fmt.Sprintf("max(%s)", rate(m.waitSeconds)), "largest share of time waiting"),
			query(fmt.Sprintf("sum(%s)", rate(m.waits)), "waits per second")),
		series("Bursts ahead of the clock", "Time bursts opened ahead of the clock (WithBurst), per second.", "percentunit",
			query(fmt.Sprintf("sum(%s)", rate(m.borrowed)), "borrowed")),
		series("Clock rollbacks", "Times a generator's clock was found behind its last ID, and the largest rollback seen (EntflakeClockRollback). No ID repeats.", "s",
			query(fmt.Sprintf("sum(increase(%s[$__rate_interval]))", m.rollbacks), "rollbacks"),
			query(fmt.Sprintf("max(%s)", m.largest), "largest rollback")),
	)
	add(
		series("Tripwire collisions", "INSERTs that failed on a duplicate primary key of a generator's own IDs: another instance issues under the same worker id (EntflakeTripwireCollision).", "short",
			query(fmt.Sprintf("sum(increase(%s[$__rate_interval]))", m.collisions), "collisions")),
		series("Pool capacity", "Share of each pool's worker ids held, by layout (EntflakePoolNearlyFull at 80%).", "percentunit",
			query(fmt.Sprintf("%s / %s", m.live, m.capacity), "{{instance}} {{layout}}")),
		series("Pool slots", "Live slots and capacity of each pool, by layout, and whether the last read of the pool succeeded.", "short",
			query(fmt.Sprintf("sum by (layout) (%s)", m.live), "live {{layout}}"),
			query(fmt.Sprintf("max by (layout) (%s)", m.capacity), "capacity {{layout}}"),
			query(fmt.Sprintf("min(%s)", m.readOK), "read ok")),
	)
	add(
		series("Worker ids", "The worker id each generator issues under, by source and service (entflake_info).", "short",
			query(fmt.Sprintf("count by (source, service) (%s)", m.info), "{{service}} {{source}}")),
	)

	// The classic dashboard model (schemaVersion 4x), which every Grafana
	// imports; the SDK's dashboardv2 is Grafana 12's resource format,
	// which older servers cannot read.
	//lint:ignore SA1019 the classic model is the one every Grafana imports
	d := dashboard.NewDashboardBuilder("entflake").
		Uid(UID).
		Description("entflake's generators and pools: readiness, leases, waits, rollbacks, collisions and pool capacity. Alerts: deploy/prometheus/entflake-rules.yml; runbook: docs/operations.md#alerts.").
		Tags([]string{"entflake"}).
		Refresh("30s").
		Time("now-1h", "now").
		Timezone(common.TimeZoneBrowser).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus"))
	for i, p := range panels {
		if i == 0 {
			d.WithRow(dashboard.NewRowBuilder("Fleet"))
		}
		if i == 4 {
			d.WithRow(dashboard.NewRowBuilder("Leases, waits and clocks"))
		}
		if i == 10 {
			d.WithRow(dashboard.NewRowBuilder("Collisions and pools"))
		}
		d.WithPanel(p)
	}
	built, err := d.Build()
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(built, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

package entflakeotel_test

import (
	"context"
	"fmt"
	"log"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/entflakeotel"
)

// Registering a generator's stats on a Meter. In an application the
// MeterProvider comes from the OpenTelemetry SDK set up with an exporter
// (otel.GetMeterProvider()); here a manual reader shows what a collection
// holds: the worker id, and an error counted by its kind.
func ExampleRegister() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())

	gen, err := entflake.New(7)
	if err != nil {
		log.Fatal(err)
	}
	reg, err := entflakeotel.Register(provider.Meter(entflakeotel.ScopeName), gen,
		entflakeotel.WithAttributes(attribute.String("app.generator", "orders")))
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Unregister()

	gen.Close()
	if _, err := gen.NextID(); err == nil {
		log.Fatal("a closed generator issued an ID")
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	byName := map[string]metricdata.Aggregation{}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		byName[m.Name] = m.Data
	}
	for _, p := range byName[entflakeotel.WorkerIDName].(metricdata.Gauge[int64]).DataPoints {
		fmt.Println(entflakeotel.WorkerIDName, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value)
	}
	for _, p := range byName[entflakeotel.ErrorsName].(metricdata.Sum[int64]).DataPoints {
		if p.Value > 0 {
			fmt.Println(entflakeotel.ErrorsName, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value)
		}
	}
	// Output:
	// entflake.worker.id app.generator=orders,entflake.worker.source=explicit 7
	// entflake.id.errors app.generator=orders,error.type=closed 1
}

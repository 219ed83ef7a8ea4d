package entflakeprom_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/entflakeprom"
)

// Register a generator's collector, then read what a scrape would show:
// here the info gauge's labels.
func Example() {
	gen, err := entflake.New(5, quiet)
	if err != nil {
		panic(err)
	}
	defer gen.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(entflakeprom.NewCollector(gen))
	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		if f.GetName() == entflakeprom.InfoName {
			for _, l := range f.GetMetric()[0].GetLabel() {
				fmt.Printf("%s=%q\n", l.GetName(), l.GetValue())
			}
		}
	}
	// Output:
	// service=""
	// source="explicit"
	// worker_id="5"
}

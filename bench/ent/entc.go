//go:build ignore

// Generates the benchmark's ent package; go generate ./... in the bench
// module runs it from this directory (see ../generate.go).
package main

import (
	"log"

	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"

	"github.com/entflake/entflake/entext"
)

func main() {
	if err := entc.Generate("./schema", &gen.Config{Features: []gen.Feature{gen.FeatureUpsert}}, entc.Extensions(entext.New())); err != nil {
		log.Fatal(err)
	}
}

//go:build ignore

// Generates the ent package of the integration tests' views (see schema);
// go generate ./... runs it from this directory (see generate.go at the
// module root).
package main

import (
	"log"

	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"

	"github.com/entflake/entflake/entext"
)

func main() {
	err := entc.Generate("./schema", &gen.Config{
		Features: []gen.Feature{gen.FeatureUpsert},
	}, entc.Extensions(entext.New()))
	if err != nil {
		log.Fatal(err)
	}
}

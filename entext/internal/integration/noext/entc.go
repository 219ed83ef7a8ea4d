//go:build ignore

// Generates an ent package the way ent's own "ent generate --feature
// sql/upsert ./schema" does: entc.Generate with no extension. Its tests show
// what a schema with mixin.SnowflakeID does when entflake's extension was
// left out. go generate ./... runs it from this directory (see generate.go
// at the module root).
package main

import (
	"log"

	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
)

func main() {
	err := entc.Generate("./schema", &gen.Config{
		Features: []gen.Feature{gen.FeatureUpsert},
	})
	if err != nil {
		log.Fatal(err)
	}
}

//go:build ignore

// Generates the "after" graph of the adoption tests: the "before" project
// with the SnowflakeID mixin on every type and the extension, as
// docs/ent.md "Adopting in an existing project" changes it; go generate
// ./... runs it from this directory (see generate.go at the module root).
package main

import (
	"log"

	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"

	"github.com/entflake/entflake/entext"
)

func main() {
	if err := entc.Generate("./schema", &gen.Config{}, entc.Extensions(entext.New())); err != nil {
		log.Fatal(err)
	}
}

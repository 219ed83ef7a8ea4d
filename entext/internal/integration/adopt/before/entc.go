//go:build ignore

// Generates the "before" graph of the adoption tests: a plain ent project
// (no mixin, no extension) whose tables hold data when entflake is added;
// go generate ./... runs it from this directory (see generate.go at the
// module root).
package main

import (
	"log"

	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
)

func main() {
	if err := entc.Generate("./schema", &gen.Config{}); err != nil {
		log.Fatal(err)
	}
}

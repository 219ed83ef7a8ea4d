//go:build ignore

// Generates graph3 with entgql first and entext after it: the order in which
// entext takes over entgql's node type resolution (entgql's own looks the
// id's range up in ent_types, which snowflake ids have no part in).
package main

import (
	"log"

	"entgo.io/contrib/entgql"
	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"

	"github.com/entflake/entflake/entext"
)

func main() {
	gql, err := entgql.NewExtension(
		entgql.WithSchemaGenerator(),
		entgql.WithSchemaPath("ent.graphql"),
		entgql.WithRelaySpec(true),
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := entc.Generate("./schema", &gen.Config{}, entc.Extensions(gql, entext.New())); err != nil {
		log.Fatal(err)
	}
}

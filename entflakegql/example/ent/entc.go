//go:build ignore

// Generates the example's ent package and its GraphQL schema
// (../graph/ent.graphql); go generate runs it from this directory (see
// generate.go beside it).
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
		// Write ent.graphql (types, connections, inputs, Query) from the
		// schema, beside the hand-written example.graphql.
		entgql.WithSchemaGenerator(),
		entgql.WithSchemaPath("../graph/ent.graphql"),
		// gqlgen.yml tells entgql which GraphQL names are already bound,
		// ID to entflakegql.ID among them.
		entgql.WithConfigPath("../graph/gqlgen.yml"),
		// Node, node(id:), nodes(ids:), Relay connections and cursors.
		entgql.WithRelaySpec(true),
	)
	if err != nil {
		log.Fatalf("entgql: %v", err)
	}
	// The order matters: entgql first, then entext. entext replaces how the
	// Noder and Noders that entgql generates find an id's table: entgql's
	// own way reads the id as a range of 2^32 per table, listed in the
	// ent_types table of ent's sql/globalid feature, which snowflake ids do
	// not follow; entext's asks the node tables for the id. ent keeps the
	// template of the extension that comes last, so entext refuses to come
	// first.
	if err := entc.Generate("./schema", &gen.Config{}, entc.Extensions(gql, entext.New())); err != nil {
		log.Fatal(err)
	}
}

package graph

import (
	"github.com/99designs/gqlgen/graphql"

	"github.com/entflake/entflake/entflakegql/example/ent"
)

// Resolver is the root of the resolvers; each of them reaches the
// database through its ent client, whose entflake generator gives the
// created entities their ids.
type Resolver struct{ client *ent.Client }

// NewSchema returns the example's executable schema, resolved with client,
// for gqlgen's handler.New.
func NewSchema(client *ent.Client) graphql.ExecutableSchema {
	return NewExecutableSchema(Config{Resolvers: &Resolver{client: client}})
}

// Package graph is the example's GraphQL layer: the schema (ent.graphql,
// written by entgql from the ent schema, and example.graphql), gqlgen's
// executable schema (generated.go) and the resolvers.
package graph

// gqlgen reads gqlgen.yml here. It runs after the ent package's own go
// generate (go generate takes packages in import-path order, and
// .../example/ent sorts before .../example/graph), so it sees the
// ent.graphql and the ent code of the same run. GOMAXPROCS=1 for the same
// reason as entc's: gqlgen formats with goimports too.
//go:generate env GOMAXPROCS=1 go run github.com/99designs/gqlgen generate

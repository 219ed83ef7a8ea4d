// Package names holds a test only (names_test.go): that the code entext
// generates compiles, beside entgql's, for entity types named after
// identifiers of ent's and entgql's generated code. It generates its graphs
// into a module of its own in a temporary directory, so that nothing
// generated is left in this module.
package names

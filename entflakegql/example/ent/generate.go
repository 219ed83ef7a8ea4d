// Package ent is the example's ent client, generated from ./schema by
// entc.go with the entgql and entflake extensions. Do not edit the
// generated files; change the schema and run go generate ./... from the
// entflakegql module's root.
package ent

// GOMAXPROCS=1: entc formats its files with goimports in parallel while it
// writes them, and goimports resolves package ent from the other files of
// the package; a file caught mid-write can make it pick another package
// named ent. One file at a time, every other file is whole (see the
// repository's generate.go).
//go:generate env GOMAXPROCS=1 go run entc.go

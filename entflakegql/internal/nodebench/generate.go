// Package nodebench measures how entgql's Noder and Noders find the type of
// a snowflake id, on two graphs generated with entgql and then entext
// (graph3: 3 types, graph20: 20), so that the cost of probing every node
// table can be read against the number of tables.
//
// The graphs are generated code, checked in. GOMAXPROCS=1 for the reason
// given in the root module's generate.go: entc formats its files with
// goimports in parallel, and goimports can then resolve a package name from
// a file caught mid-write.
package nodebench

//go:generate env GOMAXPROCS=1 go -C graph3 run entc.go
//go:generate env GOMAXPROCS=1 go -C graph20 run entc.go

package entflake

// The ent packages of the example and of entext's integration tests are
// generated code, checked in; CI regenerates them and expects no change.
//
// GOMAXPROCS=1: entc formats its files with goimports in parallel, as many
// at once as GOMAXPROCS, while it rewrites them, and goimports resolves the
// package name ent from the imports of the other files of the package. A
// file caught mid-write has none, and then goimports may pick a package of
// this module that is named ent too (seen once in CI, under load: noext's
// client.go importing the integration graph). One file at a time, every
// other file is whole.
//go:generate env GOMAXPROCS=1 go -C example/ent run entc.go
//go:generate env GOMAXPROCS=1 go -C entext/internal/integration/ent run entc.go
//go:generate env GOMAXPROCS=1 go -C entext/internal/integration/ent2 run entc.go
//go:generate env GOMAXPROCS=1 go -C entext/internal/integration/noext run entc.go
//go:generate env GOMAXPROCS=1 go -C entext/internal/integration/noexthook run entc.go
//go:generate env GOMAXPROCS=1 go -C entext/internal/integration/ent3 run entc.go
//go:generate env GOMAXPROCS=1 go -C entext/internal/integration/edges run entc.go
//go:generate env GOMAXPROCS=1 go -C entext/internal/integration/schemacfg run entc.go
//go:generate env GOMAXPROCS=1 go -C entext/internal/integration/views run entc.go
//go:generate env GOMAXPROCS=1 go -C entext/internal/integration/adopt/before run entc.go
//go:generate env GOMAXPROCS=1 go -C entext/internal/integration/adopt/after run entc.go

package entflake

// The ent packages of the example and of entext's integration tests are
// generated code, checked in; CI regenerates them and expects no change.
//go:generate go -C example/ent run entc.go
//go:generate go -C entext/internal/integration/ent run entc.go
//go:generate go -C entext/internal/integration/ent2 run entc.go
//go:generate go -C entext/internal/integration/noext run entc.go
//go:generate go -C entext/internal/integration/noexthook run entc.go
//go:generate go -C entext/internal/integration/ent3 run entc.go
//go:generate go -C entext/internal/integration/edges run entc.go
//go:generate go -C entext/internal/integration/schemacfg run entc.go

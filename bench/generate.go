package bench

// The benchmark's ent package is generated code, checked in; CI regenerates
// it and expects no change. GOMAXPROCS=1: see generate.go at the module
// root (entc's parallel goimports and a file caught mid-write).
//go:generate env GOMAXPROCS=1 go -C ent run entc.go

package bench

// The benchmark's ent package is generated code, checked in; CI regenerates
// it and expects no change.
//go:generate go -C ent run entc.go

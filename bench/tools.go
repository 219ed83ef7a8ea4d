//go:build tools

package bench

// The generator of the ent package (ent/entc.go, build-ignored) needs entc
// and entext; this keeps them in go.mod.
import (
	_ "entgo.io/ent/entc"
	_ "github.com/entflake/entflake/entext"
)

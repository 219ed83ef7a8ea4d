// Package schema is the schema of an ent package generated without
// entflake's extension (see entc.go), with a schema hook: ent then
// registers defaults and validators in the package runtime, which the
// program must import (ent requires it for the hook).
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// Gadget has the mixin, a unique code to upsert on, and a hook.
type Gadget struct{ ent.Schema }

// Mixin gives Gadget its snowflake id (with the extension).
func (Gadget) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Fields of Gadget.
func (Gadget) Fields() []ent.Field {
	return []ent.Field{field.String("code").Unique()}
}

// Hooks of Gadget: one that does nothing, for ent to generate the runtime
// package.
func (Gadget) Hooks() []ent.Hook {
	return []ent.Hook{func(next ent.Mutator) ent.Mutator { return next }}
}

// Gizmo has the mixin and no hook of its own: its defaults are registered
// in the runtime package too, since Gadget has a hook.
type Gizmo struct{ ent.Schema }

// Mixin gives Gizmo its snowflake id (with the extension).
func (Gizmo) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

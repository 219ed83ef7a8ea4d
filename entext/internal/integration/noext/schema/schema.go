// Package schema is the schema of an ent package generated without
// entflake's extension (see entc.go): a type with mixin.SnowflakeID and no
// hooks anywhere, so ent registers defaults and validators in the ent
// package itself.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// Gadget has the mixin and a unique code to upsert on.
type Gadget struct{ ent.Schema }

// Mixin gives Gadget its snowflake id (with the extension).
func (Gadget) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Fields of Gadget.
func (Gadget) Fields() []ent.Field {
	return []ent.Field{field.String("code").Unique()}
}

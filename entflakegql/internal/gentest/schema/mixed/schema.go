// Package mixed is a graph entflake refuses with entgql: a GraphQL node
// with ent's default int id beside a snowflake type.
package mixed

import (
	"entgo.io/ent"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// User has a snowflake id.
type User struct{ ent.Schema }

// Mixin of User.
func (User) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Audit keeps ent's default int id, and is a GraphQL node.
type Audit struct{ ent.Schema }

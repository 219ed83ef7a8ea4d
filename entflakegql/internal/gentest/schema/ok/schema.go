// Package ok is a graph entgql and entflake generate together: snowflake
// types, an int64 auto-increment type beside them, and an int-id type that
// entgql leaves out of GraphQL.
package ok

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// User has a snowflake id.
type User struct{ ent.Schema }

// Mixin of User.
func (User) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Fields of User.
func (User) Fields() []ent.Field { return []ent.Field{field.String("name")} }

// Edges of User.
func (User) Edges() []ent.Edge { return []ent.Edge{edge.To("pets", Pet.Type)} }

// Pet has a snowflake id.
type Pet struct{ ent.Schema }

// Mixin of Pet.
func (Pet) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Edges of Pet.
func (Pet) Edges() []ent.Edge {
	return []ent.Edge{edge.From("owner", User.Type).Ref("pets").Unique()}
}

// Legacy has an int64 auto-increment id: a GraphQL node beside the others.
type Legacy struct{ ent.Schema }

// Fields of Legacy.
func (Legacy) Fields() []ent.Field { return []ent.Field{field.Int64("id")} }

// Audit keeps ent's default int id, out of GraphQL.
type Audit struct{ ent.Schema }

// Annotations of Audit.
func (Audit) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipType)}
}

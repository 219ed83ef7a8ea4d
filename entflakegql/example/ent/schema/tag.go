package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// Tag labels posts (many to many).
type Tag struct{ ent.Schema }

// Mixin gives Tag a snowflake id.
func (Tag) Mixin() []ent.Mixin {
	return []ent.Mixin{entflakemixin.SnowflakeID{}}
}

// Fields of Tag.
func (Tag) Fields() []ent.Field {
	return []ent.Field{field.String("name").Unique()}
}

// Edges of Tag.
func (Tag) Edges() []ent.Edge {
	return []ent.Edge{edge.From("posts", Post.Type).Ref("tags")}
}

// Annotations of Tag: a Relay connection on Query.tags, and a
// CreateTagInput (name, postIDs) for the createTag mutation.
func (Tag) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entgql.RelayConnection(),
		entgql.QueryField(),
		entgql.Mutations(entgql.MutationCreate()),
	}
}

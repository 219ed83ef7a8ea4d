package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// Post is written by one user and carries any number of tags.
type Post struct{ ent.Schema }

// Mixin gives Post a snowflake id.
func (Post) Mixin() []ent.Mixin {
	return []ent.Mixin{entflakemixin.SnowflakeID{}}
}

// Fields of Post. author_id is the author edge's field, so that the
// author's snowflake id is a column of posts and a field of the GraphQL
// type (authorID, an ID like the others) besides the author edge.
// reply_to_id is the id of the post this one answers: a plain reference,
// with no edge. entgql would make it an Int, a JSON number on the wire; its
// mark (entflakemixin.JSONString()) makes entext give it the GraphQL type
// ID, a JSON string like the other ids (and a string in encoding/json).
func (Post) Fields() []ent.Field {
	return []ent.Field{
		field.String("title"),
		field.Int64("author_id").Immutable(),
		field.Int64("reply_to_id").Optional().Nillable().Annotations(entflakemixin.JSONString()),
	}
}

// Edges of Post.
func (Post) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("author", User.Type).Ref("posts").Field("author_id").Unique().Required().Immutable(),
		edge.To("tags", Tag.Type),
	}
}

// Annotations of Post: a Relay connection on Query.posts, and a
// CreatePostInput (authorID, tagIDs) for the createPost mutation.
func (Post) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entgql.RelayConnection(),
		entgql.QueryField(),
		entgql.Mutations(entgql.MutationCreate()),
	}
}

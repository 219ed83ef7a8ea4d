// Package through is entgql's todo example's edge schema, converted to
// snowflake ids: User has the mixin, and Friendship, an edge schema that
// is a GraphQL node, has an int64 auto-increment id (ent inserts an edge
// schema's rows itself, without hooks, so it cannot have the mixin) and
// int64 edge fields (the users' ids are int64).
package through

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// User has a snowflake id, and friends through Friendship.
type User struct{ ent.Schema }

// Mixin of User.
func (User) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Edges of User.
func (User) Edges() []ent.Edge {
	return []ent.Edge{edge.To("friends", User.Type).Through("friendships", Friendship.Type)}
}

// Friendship is the edge schema.
type Friendship struct{ ent.Schema }

// Fields of Friendship.
func (Friendship) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("id"),
		field.Time("created_at").Default(time.Now),
		field.Int64("user_id"),
		field.Int64("friend_id"),
	}
}

// Edges of Friendship.
func (Friendship) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("user", User.Type).Required().Unique().Field("user_id"),
		edge.To("friend", User.Type).Required().Unique().Field("friend_id"),
	}
}

// Annotations of Friendship: a GraphQL node, with a connection.
func (Friendship) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.RelayConnection(), entgql.QueryField()}
}

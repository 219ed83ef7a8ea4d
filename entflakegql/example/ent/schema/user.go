// Package schema is the example's ent schema: users who write posts, tags
// on posts, all three with snowflake ids, and a legacy table whose ids are
// the database's own AUTO_INCREMENT numbers.
package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	entflakemixin "github.com/entflake/entflake/mixin" // ent's schema/mixin is also "mixin"
)

// User writes posts.
type User struct{ ent.Schema }

// Mixin gives User a snowflake id. GraphQL clients never see it as a JSON
// number: the ID scalar bound to entflakegql.ID writes every id as a string,
// so the mixin's JSONString (for encoding/json) is not needed here.
func (User) Mixin() []ent.Mixin {
	return []ent.Mixin{entflakemixin.SnowflakeID{}}
}

// Fields of User.
func (User) Fields() []ent.Field {
	return []ent.Field{field.String("name").Unique()}
}

// Edges of User.
func (User) Edges() []ent.Edge {
	return []ent.Edge{edge.To("posts", Post.Type)}
}

// Annotations of User: a Relay connection on Query.users, and a
// CreateUserInput for the createUser mutation.
func (User) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entgql.RelayConnection(),
		entgql.QueryField(),
		entgql.Mutations(entgql.MutationCreate()),
	}
}

package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
)

// Legacy is a table from before snowflake ids: its int64 id is the
// database's AUTO_INCREMENT (IDENTITY on PostgreSQL), numbered 1, 2, 3, and
// it is a GraphQL Node like the others. Its ids and the snowflake ids of
// the other tables are drawn independently, so nothing keeps one id out of
// two tables (a row copied in with SetID, say): the example's tests use it
// to show that node(id:) then refuses to guess.
type Legacy struct{ ent.Schema }

// Fields of Legacy. The id is declared int64, not ent's default int:
// entgql gives the ids of all GraphQL nodes one Go type, and the snowflake
// ids are int64 (generation fails otherwise). ent keeps an int64 "id" field
// AUTO_INCREMENT.
func (Legacy) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("id"),
		field.String("name"),
	}
}

// Annotations of Legacy: a plain list on Query.legacies.
func (Legacy) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.QueryField()}
}

// Package schema is the ent schema of entext's integration tests: every way
// an entity type meets the SnowflakeID mixin, and one that does not (this
// file), and types named after identifiers in scope where entext's
// templates expand (names.go).
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// Widget has the mixin and a unique code to upsert on.
type Widget struct{ ent.Schema }

// Mixin gives Widget its snowflake id.
func (Widget) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Fields of Widget.
func (Widget) Fields() []ent.Field {
	return []ent.Field{
		field.String("code").Unique(),
		field.Int("qty").Default(0),
	}
}

// Edges of Widget.
func (Widget) Edges() []ent.Edge {
	return []ent.Edge{edge.To("parts", Part.Type)}
}

// Part has the mixin and a foreign key to a Widget.
type Part struct{ ent.Schema }

// Mixin gives Part its snowflake id.
func (Part) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Fields of Part.
func (Part) Fields() []ent.Field {
	return []ent.Field{
		field.String("name"),
		field.Int64("widget_id").Optional(),
	}
}

// Edges of Part.
func (Part) Edges() []ent.Edge {
	return []ent.Edge{edge.From("widget", Widget.Type).Ref("parts").Field("widget_id").Unique()}
}

// Doc has the mixin with its id marshaled to JSON as a string.
type Doc struct{ ent.Schema }

// Mixin gives Doc its snowflake id, a JSON string.
func (Doc) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{JSONString: true}} }

// Fields of Doc.
func (Doc) Fields() []ent.Field {
	return []ent.Field{field.String("title")}
}

// Plain keeps ent's own auto-increment id.
type Plain struct{ ent.Schema }

// Fields of Plain.
func (Plain) Fields() []ent.Field {
	return []ent.Field{field.String("name")}
}

// Package schema is the ent schema of entext's integration tests: every way
// an entity type meets the SnowflakeID mixin, and one that does not (this
// file), and types named after identifiers in scope where entext's
// templates expand (names.go).
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema"
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

// Edges of Doc.
func (Doc) Edges() []ent.Edge {
	return []ent.Edge{edge.To("references", Reference.Type)}
}

// Reference has JSON string ids and every kind of field that holds one,
// marked with entflakemixin.JSONString(): the field of a required edge, of
// an optional nillable edge, a plain field, an optional one and a nillable
// one. Count is an int64 without the mark, which stays a JSON number.
type Reference struct{ ent.Schema }

// Mixin gives Reference its snowflake id, a JSON string.
func (Reference) Mixin() []ent.Mixin {
	return []ent.Mixin{entflakemixin.SnowflakeID{JSONString: true}}
}

// Fields of Reference.
func (Reference) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("doc_id").Immutable().Annotations(entflakemixin.JSONString()),
		field.Int64("parent_id").Optional().Nillable().Annotations(entflakemixin.JSONString()),
		field.Int64("other_id").Comment("an id of another system").Annotations(entflakemixin.JSONString()),
		field.Int64("maybe_id").Optional().Annotations(entflakemixin.JSONString()),
		field.Int64("nil_id").Optional().Nillable().Annotations(entflakemixin.JSONString()),
		field.Int64("count").Default(0),
	}
}

// Edges of Reference.
func (Reference) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("doc", Doc.Type).Ref("references").Field("doc_id").Unique().Required().Immutable(),
		edge.To("children", Reference.Type).From("parent").Field("parent_id").Unique(),
	}
}

// Note keeps ent's own id, a JSON number, and has fields with the mark
// whose JSON keys come from the field's struct tag (doc_id) and from the
// schema's field.Annotation (alt_id).
type Note struct{ ent.Schema }

// Fields of Note.
func (Note) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("doc_id").StructTag(`json:"docRef" xml:"doc"`).Annotations(entflakemixin.JSONString()),
		field.Int64("alt_id").Optional().Annotations(entflakemixin.JSONString()),
	}
}

// Annotations of Note.
func (Note) Annotations() []schema.Annotation {
	return []schema.Annotation{field.Annotation{StructTag: map[string]string{"alt_id": `json:"alt,omitempty" yaml:"alt"`}}}
}

// Plain keeps ent's own auto-increment id.
type Plain struct{ ent.Schema }

// Fields of Plain.
func (Plain) Fields() []ent.Field {
	return []ent.Field{field.String("name")}
}

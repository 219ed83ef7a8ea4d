package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// Entry is one leg of a transfer: the two legs share a group id, taken
// before either is inserted.
type Entry struct{ ent.Schema }

// Mixin gives Entry its snowflake id, marshaled to JSON as a string.
func (Entry) Mixin() []ent.Mixin {
	return []ent.Mixin{entflakemixin.SnowflakeID{JSONString: true}}
}

// Fields of Entry. The two that hold snowflake ids are marshaled to JSON as
// strings too, like the entry's own id.
func (Entry) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("group_id").Immutable().Comment("the transfer both legs belong to").
			Annotations(entflakemixin.JSONString()),
		field.Int64("account_id").Immutable().Annotations(entflakemixin.JSONString()),
		field.Int64("amount").Immutable().Comment("cents; negative for the debit leg"),
	}
}

// Edges of Entry.
func (Entry) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("account", Account.Type).Ref("entries").Field("account_id").Unique().Required().Immutable(),
	}
}

// Indexes of Entry.
func (Entry) Indexes() []ent.Index {
	return []ent.Index{index.Fields("group_id")}
}

// Package refs is a graph entgql and entflake generate together with
// fields that hold snowflake ids of other rows (marked
// entflakemixin.JSONString()), and with entflake's own tables embedded for
// Atlas (schema.Sequence and schema.Slot), which entgql must leave out.
package refs

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	entflakemixin "github.com/entflake/entflake/mixin"
	entflakeschema "github.com/entflake/entflake/schema"
)

// User has a snowflake id.
type User struct{ ent.Schema }

// Mixin of User.
func (User) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Edges of User.
func (User) Edges() []ent.Edge { return []ent.Edge{edge.To("events", Event.Type)} }

// Event holds ids of other rows in plain fields and in an edge field.
type Event struct{ ent.Schema }

// Mixin of Event.
func (Event) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Fields of Event.
func (Event) Fields() []ent.Field {
	return []ent.Field{
		// A reference without an edge: ID, not Int.
		field.Int64("aggregate_id").Annotations(entflakemixin.JSONString()),
		// Nillable, with an entgql annotation of its own that sets no type.
		field.Int64("cause_id").Optional().Nillable().
			Annotations(entflakemixin.JSONString(), entgql.OrderField("CAUSE")),
		// A type the user chose stays.
		field.Int64("legacy_id").Annotations(entflakemixin.JSONString(), entgql.Type("Int")),
		// Not marked: an int64 that is no id stays Int.
		field.Int64("amount"),
		// The edge's field, ID already.
		field.Int64("user_id").Annotations(entflakemixin.JSONString()),
	}
}

// Edges of Event.
func (Event) Edges() []ent.Edge {
	return []ent.Edge{edge.From("user", User.Type).Ref("events").Field("user_id").Unique().Required()}
}

// Annotations of Event: where inputs, so that the filters' types show.
func (Event) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.QueryField(), entgql.Mutations(entgql.MutationCreate())}
}

// SysSequence is entflake's worker-id counter, as docs/ent.md embeds it for
// Atlas: its id is a string.
type SysSequence struct{ entflakeschema.Sequence }

// SysSequenceSlot is entflake's worker-id slots: its id is an int32.
type SysSequenceSlot struct{ entflakeschema.Slot }

package schema

import (
	"encoding/json"

	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// Event is an outbox row, written in the same transaction as the change it
// announces; a relay publishes it later. Its payload carries ids that exist
// before their rows do: the example puts the transfer's entries in it, whose
// ids, group ids and account ids all marshal as JSON strings.
type Event struct{ ent.Schema }

// Mixin gives Event its snowflake id, marshaled to JSON as a string for the
// JavaScript consumers of the outbox.
func (Event) Mixin() []ent.Mixin {
	return []ent.Mixin{entflakemixin.SnowflakeID{JSONString: true}}
}

// Fields of Event.
func (Event) Fields() []ent.Field {
	return []ent.Field{
		field.String("topic"),
		field.JSON("payload", json.RawMessage{}),
	}
}

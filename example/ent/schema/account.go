// Package schema is the example's ent schema: accounts, the ledger entries
// of transfers between them, and an outbox of events, all with snowflake ids
// assigned before the INSERT.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// Account holds a balance in cents.
type Account struct{ ent.Schema }

// Mixin gives Account its snowflake id, marshaled to JSON as a string:
// JavaScript reads numbers above 2^53 wrong.
func (Account) Mixin() []ent.Mixin {
	return []ent.Mixin{entflakemixin.SnowflakeID{JSONString: true}}
}

// Fields of Account.
func (Account) Fields() []ent.Field {
	return []ent.Field{
		field.String("owner"),
		field.Int64("balance").Default(0).Comment("cents"),
	}
}

// Edges of Account.
func (Account) Edges() []ent.Edge {
	return []ent.Edge{edge.To("entries", Entry.Type)}
}

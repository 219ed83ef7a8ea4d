// Package schema is the "before" project after it adopted entflake: the
// mixin on every type, and the edge field an int64 (the type of the id it
// holds). Nothing else changed.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// User owns orders.
type User struct{ ent.Schema }

// Mixin gives User its snowflake id.
func (User) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Fields of User.
func (User) Fields() []ent.Field {
	return []ent.Field{field.String("name").Unique()}
}

// Edges of User.
func (User) Edges() []ent.Edge {
	return []ent.Edge{edge.To("orders", Order.Type)}
}

// Order belongs to a user (a required edge field) and holds items.
type Order struct{ ent.Schema }

// Mixin gives Order its snowflake id.
func (Order) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Fields of Order.
func (Order) Fields() []ent.Field {
	return []ent.Field{field.Int64("user_id"), field.Int("total")}
}

// Edges of Order.
func (Order) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("user", User.Type).Ref("orders").Field("user_id").Unique().Required(),
		edge.To("items", Item.Type),
	}
}

// Item is in many orders (M2M).
type Item struct{ ent.Schema }

// Mixin gives Item its snowflake id.
func (Item) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Fields of Item.
func (Item) Fields() []ent.Field {
	return []ent.Field{field.String("sku")}
}

// Edges of Item.
func (Item) Edges() []ent.Edge {
	return []ent.Edge{edge.From("orders", Order.Type).Ref("items")}
}

// Package schema is a plain ent project before it adopts entflake: ent's
// own integer ids (AUTO_INCREMENT, IDENTITY, SQLite's AUTOINCREMENT rowid),
// an edge with a required edge field, and an M2M edge. The "after" graph is
// the same project with the mixin, as docs/ent.md "Adopting in an existing
// project" changes it.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
)

// User owns orders.
type User struct{ ent.Schema }

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

// Fields of Order.
func (Order) Fields() []ent.Field {
	return []ent.Field{field.Int("user_id"), field.Int("total")}
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

// Fields of Item.
func (Item) Fields() []ent.Field {
	return []ent.Field{field.String("sku")}
}

// Edges of Item.
func (Item) Edges() []ent.Edge {
	return []ent.Edge{edge.From("orders", Order.Type).Ref("items")}
}

// Package schema is the 20 node types of the benchmark: each a snowflake id
// and a name, nothing else, so that what varies between the graphs is only
// the number of tables a type lookup has to consider.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// mixins give every type its snowflake id.
func mixins() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// fields give every type its one field, a name.
func fields() []ent.Field { return []ent.Field{field.String("name")} }

// T01 is node type 1 of 20.
type T01 struct{ ent.Schema }

// Mixin of T01.
func (T01) Mixin() []ent.Mixin { return mixins() }

// Fields of T01.
func (T01) Fields() []ent.Field { return fields() }

// T02 is node type 2 of 20.
type T02 struct{ ent.Schema }

// Mixin of T02.
func (T02) Mixin() []ent.Mixin { return mixins() }

// Fields of T02.
func (T02) Fields() []ent.Field { return fields() }

// T03 is node type 3 of 20.
type T03 struct{ ent.Schema }

// Mixin of T03.
func (T03) Mixin() []ent.Mixin { return mixins() }

// Fields of T03.
func (T03) Fields() []ent.Field { return fields() }

// T04 is node type 4 of 20.
type T04 struct{ ent.Schema }

// Mixin of T04.
func (T04) Mixin() []ent.Mixin { return mixins() }

// Fields of T04.
func (T04) Fields() []ent.Field { return fields() }

// T05 is node type 5 of 20.
type T05 struct{ ent.Schema }

// Mixin of T05.
func (T05) Mixin() []ent.Mixin { return mixins() }

// Fields of T05.
func (T05) Fields() []ent.Field { return fields() }

// T06 is node type 6 of 20.
type T06 struct{ ent.Schema }

// Mixin of T06.
func (T06) Mixin() []ent.Mixin { return mixins() }

// Fields of T06.
func (T06) Fields() []ent.Field { return fields() }

// T07 is node type 7 of 20.
type T07 struct{ ent.Schema }

// Mixin of T07.
func (T07) Mixin() []ent.Mixin { return mixins() }

// Fields of T07.
func (T07) Fields() []ent.Field { return fields() }

// T08 is node type 8 of 20.
type T08 struct{ ent.Schema }

// Mixin of T08.
func (T08) Mixin() []ent.Mixin { return mixins() }

// Fields of T08.
func (T08) Fields() []ent.Field { return fields() }

// T09 is node type 9 of 20.
type T09 struct{ ent.Schema }

// Mixin of T09.
func (T09) Mixin() []ent.Mixin { return mixins() }

// Fields of T09.
func (T09) Fields() []ent.Field { return fields() }

// T10 is node type 10 of 20.
type T10 struct{ ent.Schema }

// Mixin of T10.
func (T10) Mixin() []ent.Mixin { return mixins() }

// Fields of T10.
func (T10) Fields() []ent.Field { return fields() }

// T11 is node type 11 of 20.
type T11 struct{ ent.Schema }

// Mixin of T11.
func (T11) Mixin() []ent.Mixin { return mixins() }

// Fields of T11.
func (T11) Fields() []ent.Field { return fields() }

// T12 is node type 12 of 20.
type T12 struct{ ent.Schema }

// Mixin of T12.
func (T12) Mixin() []ent.Mixin { return mixins() }

// Fields of T12.
func (T12) Fields() []ent.Field { return fields() }

// T13 is node type 13 of 20.
type T13 struct{ ent.Schema }

// Mixin of T13.
func (T13) Mixin() []ent.Mixin { return mixins() }

// Fields of T13.
func (T13) Fields() []ent.Field { return fields() }

// T14 is node type 14 of 20.
type T14 struct{ ent.Schema }

// Mixin of T14.
func (T14) Mixin() []ent.Mixin { return mixins() }

// Fields of T14.
func (T14) Fields() []ent.Field { return fields() }

// T15 is node type 15 of 20.
type T15 struct{ ent.Schema }

// Mixin of T15.
func (T15) Mixin() []ent.Mixin { return mixins() }

// Fields of T15.
func (T15) Fields() []ent.Field { return fields() }

// T16 is node type 16 of 20.
type T16 struct{ ent.Schema }

// Mixin of T16.
func (T16) Mixin() []ent.Mixin { return mixins() }

// Fields of T16.
func (T16) Fields() []ent.Field { return fields() }

// T17 is node type 17 of 20.
type T17 struct{ ent.Schema }

// Mixin of T17.
func (T17) Mixin() []ent.Mixin { return mixins() }

// Fields of T17.
func (T17) Fields() []ent.Field { return fields() }

// T18 is node type 18 of 20.
type T18 struct{ ent.Schema }

// Mixin of T18.
func (T18) Mixin() []ent.Mixin { return mixins() }

// Fields of T18.
func (T18) Fields() []ent.Field { return fields() }

// T19 is node type 19 of 20.
type T19 struct{ ent.Schema }

// Mixin of T19.
func (T19) Mixin() []ent.Mixin { return mixins() }

// Fields of T19.
func (T19) Fields() []ent.Field { return fields() }

// T20 is node type 20 of 20.
type T20 struct{ ent.Schema }

// Mixin of T20.
func (T20) Mixin() []ent.Mixin { return mixins() }

// Fields of T20.
func (T20) Fields() []ent.Field { return fields() }

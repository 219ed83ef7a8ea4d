package schema

import (
	"time"

	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	entann "entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// Sequence is sys_sequence as an ent schema, for applications whose
// migrations are planned from their ent schema package alone: Atlas's
// ent:// loader reads only that package, never the generated migrate
// package in which entext registers entflake's tables, so it plans to DROP
// them. Embed Sequence and Slot in a type each of the schema package, and
// the loader sees both tables:
//
//	import entflakeschema "github.com/entflake/entflake/schema"
//
//	// SysSequence is entflake's worker-id counter (see entflake's schema.Sequence).
//	type SysSequence struct{ entflakeschema.Sequence }
//
//	// SysSequenceSlot is entflake's worker-id slots (see entflake's schema.Slot).
//	type SysSequenceSlot struct{ entflakeschema.Slot }
//
// The type names are free; the tables are named by the schemas' annotation.
// The columns, their types per dialect, defaults and the index are those of
// Table and SlotTable, so a migration planned from them makes the tables
// the lease makes, and plans no change over tables the lease made. entext
// then registers neither table itself (it skips a table a type maps to).
//
// ent generates entity code for the two types. Read it if you like; do not
// write the rows through it: the lease writes them with statements of its
// own, and a row written by other means can hand one worker id to two
// instances.
type Sequence struct{ ent.Schema }

// Fields of sys_sequence. The id is service_name, a string key: '__global__'
// is the counter's row.
func (Sequence) Fields() []ent.Field {
	return []ent.Field{
		field.String("id").StorageKey(ColumnServiceName).MaxLen(ServiceNameSize).
			SchemaType(varchar(ServiceNameSize)).Immutable(),
		field.Int32(ColumnWorkerID).Default(0).SchemaType(types("int", "integer", "integer")),
		field.String(ColumnInstance).MaxLen(InstanceSize).Optional().Nillable().SchemaType(varchar(InstanceSize)),
		entUpdatedAt(),
	}
}

// Annotations name the table.
func (Sequence) Annotations() []entann.Annotation {
	return []entann.Annotation{entsql.Annotation{Table: TableName}}
}

// Slot is sys_sequence_slot as an ent schema: see Sequence.
type Slot struct{ ent.Schema }

// Fields of sys_sequence_slot. The id is worker_id, which the lease sets
// (no AUTO_INCREMENT).
func (Slot) Fields() []ent.Field {
	return []ent.Field{
		field.Int32("id").StorageKey(ColumnWorkerID).SchemaType(types("int", "integer", "integer")).Immutable().
			Annotations(entsql.Annotation{Incremental: new(false)}),
		field.String(ColumnServiceName).MaxLen(ServiceNameSize).Optional().Nillable().SchemaType(varchar(ServiceNameSize)),
		field.String(ColumnInstance).MaxLen(InstanceSize).Optional().Nillable().SchemaType(varchar(InstanceSize)),
		entBigint(ColumnFence),
		entBigint(ColumnBeats),
		entBigint(ColumnTakenMs),
		entBigint(ColumnExpiresMs),
		entBigint(ColumnPromiseMs),
		field.String(ColumnLayout).MaxLen(LayoutSize).Optional().Nillable().SchemaType(varchar(LayoutSize)),
		entUpdatedAt(),
	}
}

// Indexes of sys_sequence_slot: the layout guard's index.
func (Slot) Indexes() []ent.Index {
	return []ent.Index{index.Fields(ColumnLayout).StorageKey(SlotLayoutIndex)}
}

// Annotations name the table.
func (Slot) Annotations() []entann.Annotation {
	return []entann.Annotation{entsql.Annotation{Table: SlotTableName}}
}

func entBigint(name string) ent.Field {
	return field.Int64(name).Default(0).SchemaType(types("bigint", "bigint", "integer"))
}

// entUpdatedAt is updated_at with the database's default, as in Table (a
// string default, written raw); the Go default lets ent's generated
// builders create a row without it.
func entUpdatedAt() ent.Field {
	return field.Time(ColumnUpdatedAt).Default(time.Now).
		SchemaType(types("datetime", "timestamp with time zone", "datetime")).
		Annotations(entsql.Default("CURRENT_TIMESTAMP"))
}

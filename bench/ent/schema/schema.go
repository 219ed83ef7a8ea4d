// Package schema is the benchmark's ent schema: the same row under every
// kind of primary key, each in its own table with one secondary index.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	entmixin "entgo.io/ent/schema/mixin"
	"github.com/google/uuid"

	"github.com/entflake/entflake/bench/keys"
	entflakemixin "github.com/entflake/entflake/mixin"
)

// row is the payload every table carries: a secondary index on k, a random
// int64, and 64 bytes of text.
type row struct{ entmixin.Schema }

func (row) Fields() []ent.Field {
	return []ent.Field{field.Int64("k"), field.String("payload").MaxLen(64)}
}

func (row) Indexes() []ent.Index { return []ent.Index{index.Fields("k")} }

// Auto keeps ent's AUTO_INCREMENT BIGINT id.
type Auto struct{ ent.Schema }

func (Auto) Mixin() []ent.Mixin { return []ent.Mixin{row{}} }
func (Auto) Fields() []ent.Field {
	return []ent.Field{field.Int64("id")}
}

// Snow has entflake's snowflake id, written by one writer.
type Snow struct{ ent.Schema }

func (Snow) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}, row{}} }

// Snow8 has entflake's snowflake id, written by eight workers at once.
type Snow8 struct{ ent.Schema }

func (Snow8) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}, row{}} }

// Auto8 keeps ent's AUTO_INCREMENT id, written by eight writers a row at a time.
type Auto8 struct{ ent.Schema }

func (Auto8) Mixin() []ent.Mixin { return []ent.Mixin{row{}} }
func (Auto8) Fields() []ent.Field {
	return []ent.Field{field.Int64("id")}
}

// Snow8Row has entflake's snowflake id, written by eight workers a row at a time.
type Snow8Row struct{ ent.Schema }

func (Snow8Row) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}, row{}} }

// charUUID is a UUID key stored as CHAR(36) text.
func charUUID() ent.Field {
	return field.UUID("id", uuid.UUID{}).SchemaType(map[string]string{dialect.MySQL: "char(36)"})
}

// binUUID is a UUID key stored as BINARY(16).
func binUUID() ent.Field {
	return field.UUID("id", keys.BinUUID{}).SchemaType(map[string]string{dialect.MySQL: "binary(16)"})
}

// CharV4 is keyed by random UUIDs (v4) as CHAR(36).
type CharV4 struct{ ent.Schema }

func (CharV4) Mixin() []ent.Mixin  { return []ent.Mixin{row{}} }
func (CharV4) Fields() []ent.Field { return []ent.Field{charUUID()} }

// CharV7 is keyed by time-ordered UUIDs (v7) as CHAR(36).
type CharV7 struct{ ent.Schema }

func (CharV7) Mixin() []ent.Mixin  { return []ent.Mixin{row{}} }
func (CharV7) Fields() []ent.Field { return []ent.Field{charUUID()} }

// BinV4 is keyed by random UUIDs (v4) as BINARY(16).
type BinV4 struct{ ent.Schema }

func (BinV4) Mixin() []ent.Mixin  { return []ent.Mixin{row{}} }
func (BinV4) Fields() []ent.Field { return []ent.Field{binUUID()} }

// BinV7 is keyed by time-ordered UUIDs (v7) as BINARY(16).
type BinV7 struct{ ent.Schema }

func (BinV7) Mixin() []ent.Mixin  { return []ent.Mixin{row{}} }
func (BinV7) Fields() []ent.Field { return []ent.Field{binUUID()} }

// upsertRow is the payload of the upsert benchmark's tables: a unique k to
// upsert on, and 64 bytes of text.
type upsertRow struct{ entmixin.Schema }

func (upsertRow) Fields() []ent.Field {
	return []ent.Field{field.Int64("k").Unique(), field.String("payload").MaxLen(64)}
}

// UpAuto keeps ent's AUTO_INCREMENT id, for the upsert benchmark.
type UpAuto struct{ ent.Schema }

func (UpAuto) Mixin() []ent.Mixin { return []ent.Mixin{upsertRow{}} }

// UpSnow has entflake's snowflake id, for the upsert benchmark.
type UpSnow struct{ ent.Schema }

func (UpSnow) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}, upsertRow{}} }

// upsertUUIDRow is upsertRow keyed by a unique UUID (CHAR(36) on MySQL).
type upsertUUIDRow struct{ entmixin.Schema }

func (upsertUUIDRow) Fields() []ent.Field {
	return []ent.Field{field.UUID("u", uuid.UUID{}).Unique(), field.String("payload").MaxLen(64)}
}

// UpAutoUUID keeps ent's AUTO_INCREMENT id, upserted on a UUID.
type UpAutoUUID struct{ ent.Schema }

func (UpAutoUUID) Mixin() []ent.Mixin { return []ent.Mixin{upsertUUIDRow{}} }

// UpSnowUUID has entflake's snowflake id, upserted on a UUID.
type UpSnowUUID struct{ ent.Schema }

func (UpSnowUUID) Mixin() []ent.Mixin {
	return []ent.Mixin{entflakemixin.SnowflakeID{}, upsertUUIDRow{}}
}

// upsertEmailRow is upsertRow keyed by a unique string, which the upsert
// benchmark makes case-insensitive on MySQL (utf8mb4_general_ci).
type upsertEmailRow struct{ entmixin.Schema }

func (upsertEmailRow) Fields() []ent.Field {
	return []ent.Field{field.String("email").MaxLen(191).Unique(), field.String("payload").MaxLen(64)}
}

// UpAutoEmail keeps ent's AUTO_INCREMENT id, upserted on an e-mail.
type UpAutoEmail struct{ ent.Schema }

func (UpAutoEmail) Mixin() []ent.Mixin { return []ent.Mixin{upsertEmailRow{}} }

// UpSnowEmail has entflake's snowflake id, upserted on an e-mail.
type UpSnowEmail struct{ ent.Schema }

func (UpSnowEmail) Mixin() []ent.Mixin {
	return []ent.Mixin{entflakemixin.SnowflakeID{}, upsertEmailRow{}}
}

// Package mixin holds SnowflakeID, the ent mixin that gives an entity an
// int64 primary key assigned in the process before the INSERT.
//
// ent's own entgo.io/ent/schema/mixin is also named mixin, and schemas often
// import both; import this one under an alias:
//
//	import entflakemixin "github.com/entflake/entflake/mixin"
//
//	func (Account) Mixin() []ent.Mixin {
//		return []ent.Mixin{entflakemixin.SnowflakeID{}}
//	}
//
// The mixin only describes the id; the code that fills it in is generated
// into the ent package by the entc extension (package entext), which must be
// enabled in entc.go:
//
//	entc.Generate("./schema", &gen.Config{}, entc.Extensions(entext.New()))
//
// That code needs no import of the generated runtime package.
//
// Fields that hold snowflake ids of other rows (foreign keys of edges,
// plain references) are int64 fields of the user's schema; JSONString marks
// one to be marshaled to JSON as a string, like SnowflakeID{JSONString: true}
// does for the id:
//
//	field.Int64("account_id").Immutable().Annotations(entflakemixin.JSONString())
//
// Code generated without the extension (for example by ent's own "ent
// generate" command, which cannot load extensions) still compiles; every
// create of such a type then fails before any SQL with an error that wraps
// ErrNoExtension, instead of a database error about a missing id.
package mixin

import (
	"errors"
	"fmt"
	"math"

	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	entmixin "entgo.io/ent/schema/mixin"
)

// SnowflakeID gives an entity an int64 id that the client's entflake
// generator assigns before the INSERT, unless the caller set one (SetID).
// The column is a plain BIGINT primary key: not AUTO_INCREMENT, not
// IDENTITY, and on SQLite declared "bigint", so that it is not an alias of
// the rowid (only INTEGER PRIMARY KEY is): an INSERT without an id fails
// there instead of numbering the rows 1, 2, 3. The id is immutable.
//
// Its zero value marshals the id to JSON as a number, like any int64.
type SnowflakeID struct {
	entmixin.Schema
	// JSONString makes the entity marshal its id to JSON as a string
	// ("385716584448028672"), which JavaScript reads without losing
	// precision above 2^53; decoding then accepts a string or a number.
	// The fields that hold ids of other rows take the function JSONString
	// as an annotation to do the same.
	JSONString bool
	// IDAnnotations are added to the annotations of the id field, for what
	// other extensions read there, for example entgql.OrderField("ID"):
	//
	//	entflakemixin.SnowflakeID{IDAnnotations: []schema.Annotation{entgql.OrderField("ID")}}
	//
	// A schema cannot declare the id field again to annotate it: its own
	// field.Int64("id") replaces the mixin's, with none of its settings
	// (ent would make it AUTO_INCREMENT), and the extension refuses it. An
	// entsql.Annotation among them is merged into the mixin's, and the
	// extension refuses Incremental: true. A nil annotation fails the
	// schema's loading, naming its index.
	IDAnnotations []schema.Annotation
}

// ErrNoExtension is the error (wrapped in ent's *ValidationError, which
// names the type) of every create of a type with SnowflakeID whose ent code
// was generated without the entflake extension.
var ErrNoExtension = errors.New("entflake: no id assigned: this ent code was generated without the entflake " +
	"extension; add entc.Extensions(entext.New()) to entc.Generate in entc.go and run go generate " +
	"(ent's \"ent generate\" command cannot load extensions)")

// unassigned is the id that code generated without the extension gives
// every created entity: ent sets it as the id's default before any hook, and
// the id's validator refuses it before the INSERT. entflake never makes a
// negative id. With the extension, the generated code has neither the
// default nor the validator (the extension drops both).
const unassigned int64 = math.MinInt64

// IDFieldAnnotationName is the name of the annotation on the id field of
// SnowflakeID, by which the extension tells the field's default and
// validator (which it drops) from ones a schema adds itself (which it
// refuses).
const IDFieldAnnotationName = "EntflakeSnowflakeIDField"

// idField is the annotation named IDFieldAnnotationName.
type idField struct{}

func (idField) Name() string { return IDFieldAnnotationName }

// Fields returns the id field.
func (m SnowflakeID) Fields() []ent.Field {
	id := field.Int64("id").
		Immutable().
		// Only for code generated without the extension, which drops both:
		// ent registers them in the ent package's runtime.go (or, if a
		// schema has hooks, in the runtime package that ent then requires
		// anyway), so that a create fails with ErrNoExtension before any SQL
		// instead of with the database's missing-id error. No hook: a hook
		// in a mixin would make every graph need the runtime import.
		DefaultFunc(func() int64 { return unassigned }).
		Validate(func(id int64) error {
			if id == unassigned {
				return ErrNoExtension
			}
			return nil
		}).
		Comment("Snowflake ID, assigned in the process before the INSERT (entflake).").
		// Without this, ent makes a user-defined integer id AUTO_INCREMENT
		// (MySQL) or an IDENTITY column (PostgreSQL).
		Annotations(entsql.Annotation{Incremental: new(bool)}, idField{}).
		// On SQLite an INTEGER PRIMARY KEY column is the rowid, which
		// quietly numbers rows 1, 2, 3 whenever no id is given.
		SchemaType(map[string]string{dialect.SQLite: "bigint"})
	if m.JSONString {
		id = id.StructTag(`json:"id,string,omitempty"`)
	}
	for i, a := range m.IDAnnotations {
		if a == nil {
			// ent's loader would call Name on it and panic; an error on
			// the descriptor fails the load with the field's name instead.
			id.Descriptor().Err = fmt.Errorf("entflakemixin.SnowflakeID: IDAnnotations[%d] is nil", i)
			return []ent.Field{id}
		}
	}
	return []ent.Field{id.Annotations(m.IDAnnotations...)}
}

// Annotations marks the schema for the entc extension, which finds the
// entities to generate for by this mark.
func (m SnowflakeID) Annotations() []schema.Annotation {
	return []schema.Annotation{Annotation{JSONString: m.JSONString}}
}

// AnnotationName is the name under which the mark is stored in ent's graph.
const AnnotationName = "EntflakeSnowflakeID"

// Annotation marks a schema that uses SnowflakeID. The entc extension reads
// it; schemas do not use it directly.
type Annotation struct {
	// JSONString: see SnowflakeID.JSONString.
	JSONString bool `json:"json_string,omitempty"`
}

// Name implements schema.Annotation.
func (Annotation) Name() string { return AnnotationName }

// JSONString marks an int64 field that holds a snowflake id (the foreign key
// of an edge, or any reference to another row) to be marshaled to JSON as a
// string, which JavaScript reads without losing precision above 2^53, and
// decoded from a string or a number:
//
//	field.Int64("account_id").Annotations(entflakemixin.JSONString())
//
// The field stays a plain int64 (or *int64 if Nillable), so it can be the
// field of an edge, and takes the field's other options as usual. The entc
// extension (package entext) adds the ",string" option to the field's json
// struct tag, and generates the entity's UnmarshalJSON, one per type, which
// decodes the id of SnowflakeID{JSONString: true} and every such field. Its
// type need not use SnowflakeID. Generation fails, naming the field, for a
// field that is not a plain int64 or that a json:"-" struct tag keeps out of
// JSON.
func JSONString() JSONStringAnnotation { return JSONStringAnnotation{} }

// JSONStringAnnotationName is the name under which JSONString's mark is
// stored in ent's graph.
const JSONStringAnnotationName = "EntflakeJSONString"

// JSONStringAnnotation is the field annotation JSONString returns.
type JSONStringAnnotation struct{}

// Name implements schema.Annotation.
func (JSONStringAnnotation) Name() string { return JSONStringAnnotationName }

var (
	_ ent.Mixin         = SnowflakeID{}
	_ schema.Annotation = Annotation{}
	_ schema.Annotation = JSONStringAnnotation{}
	_ schema.Annotation = idField{}
)

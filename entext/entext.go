// Package entext is the entc extension of entflake. It runs only at code
// generation (entc.go); the code it writes into the ent package is glue over
// the runtime packages entflake and entext/entrt (which holds all that does
// not depend on the schema) and the table definition in package schema, so
// entc and its dependencies stay out of the application's binary, and a fix
// in the runtime reaches a graph without regenerating it.
//
// Enable it in entc.go:
//
//	err := entc.Generate("./schema", &gen.Config{}, entc.Extensions(entext.New()))
//
// For every entity type whose schema uses mixin.SnowflakeID, it generates:
//
//   - IDGenerator, a client option that carries the *entflake.Generator;
//   - Client.NextID and Tx.NextID, to take an ID before any INSERT;
//   - a hook, registered when the client is made, that gives each created
//     entity an ID unless the caller set one (Create, CreateBulk,
//     MapCreateBulk, upserts, in transactions or not), and needs no import of
//     the generated runtime package; when the INSERT fails, it hands the
//     error to the generator's tripwire (entflake.Generator.InsertFailed),
//     once per statement, which tells a duplicate primary key on one of the
//     generator's own IDs from every other error;
//   - for upserts, a conflict clause that keeps the primary key of the row
//     being updated (see docs/ent.md: the ResolveWithNewValues trap); on MySQL
//     it inserts the id as LAST_INSERT_ID(id) and updates with
//     LAST_INSERT_ID(id), so edges, hooks and the entity get the stored id,
//     and refuses to update a row that holds an id the hook generated; a
//     bulk upsert is ent's one multi-row INSERT, with RETURNING added on
//     MariaDB 10.5+, followed on MySQL 8 and TiDB by a locking SELECT in
//     which the server matches the batch's rows to the stored ones under
//     the key's collation; one that these cannot number
//     (a row the SELECT cannot tell, rows skipped on PostgreSQL and SQLite,
//     generated ids mixed with ids the caller set) runs as one upsert per
//     row in a transaction, each with the batch's column list, so that
//     every path writes what ent's statement writes;
//   - the refusal of ids that no generator issues (0 and negative), set on
//     a create (SetID), in a field marked with mixin.JSONString() on a
//     create, an update or an upsert's update (the Set of its Upsert type,
//     which its setters call) of a type (a view has no mutations, and gets
//     no hook), or decoded from JSON; and of an Add to such a field, on an
//     update or an upsert's update, whose result only the database knows;
//   - for SnowflakeID{JSONString: true} and for the int64 fields marked with
//     mixin.JSONString() (of any type), the option ",string" in their json
//     struct tags, and one UnmarshalJSON per type that accepts each of them
//     as a string or a number;
//   - the registration of entflake's tables (sys_sequence and
//     sys_sequence_slot) in migrate.Tables, so a bare
//     client.Schema.Create(ctx) creates them (except a table a schema of the
//     graph already maps a type to);
//   - in place of migrate.WithGlobalUniqueID, schema.RefuseGlobalUniqueID:
//     with true, the migration fails, naming the types, since snowflake ids
//     ignore the id ranges that option gives each table;
//   - with entgql (entgo.io/contrib/entgql) in the generation, before the
//     extension, the type resolution of its Client.Noder and Client.Noders:
//     entflake.FindNodes asks the tables of the GraphQL node types for the
//     id in one statement (Noders: one for all its ids), where entgql would
//     read the ent_types table of ent's sql/globalid feature (see gql.go);
//     with a generator made entflake.WithNodeTypeCache, the hook remembers
//     the type of each node it creates with an id the generator issued,
//     once the create is committed (entflake.Generator.RememberNode).
//     The extension after entgql, and one Go type (int64) for the ids of
//     every GraphQL node, are required; generation fails otherwise, saying
//     why;
//   - for entgql, written into the graph at generation time in entgql's
//     own annotation (this module does not import entgql): the GraphQL
//     type ID on every field marked with mixin.JSONString(), unless the
//     field's annotation sets a type (entgql would make it an Int, a JSON
//     number), and Skip(SkipAll) on the types of entflake's own tables
//     (schema.Sequence and schema.Slot embedded for Atlas), unless the
//     user annotated them for entgql.
//
// A mixin that composes SnowflakeID{}.Fields() instead of embedding
// SnowflakeID is handled as SnowflakeID itself: the extension knows the id
// field by its annotation.
//
// The mixin's id field has a default and a validator that only code
// generated without the extension keeps (see mixin.ErrNoExtension); the
// extension drops both, so ent neither sets a default id before the hook
// nor validates the id.
//
// The generated code refers to no package of an entity type (a type's
// package is its lower-cased name, which a local of ent's generated code
// can shadow), and besides its API declares only names that no entity type
// can take, so a type may have any name ent itself generates code for:
// Node, Spec, Builder, Json, and so on.
//
// Generation fails with a message naming the schema when the mixin meets
// an id it cannot fill (not int64, a custom Go type, a default, an
// AUTO_INCREMENT annotation, an id field the schema declares itself, which
// replaces the mixin's (SnowflakeID.IDAnnotations annotates the mixin's),
// an edge schema, whose rows ent inserts without hooks), when ent's global unique ID feature is on
// (it gives each type an id range, which pre-assigned ids ignore), or for
// the few names that would clash with what it generates: a type named
// IDGenerator, NextID or Entflake (whose model file would be entflake.go),
// a field whose mutation field would be entflakeState (the extension's own,
// on a type with the mixin) or entflakeRefused (on a type with a field marked
// mixin.JSONString()), a field that would be the struct field
// UnmarshalJSON of a type that gets one, and a dependency (entc.Dependency) whose field is entflake or whose
// option is IDGenerator. It fails too, naming the field, for
// mixin.JSONString() on a field that is not a plain int64 or that is kept
// out of JSON, and for the mark on a schema or an edge, where it would do
// nothing.
package entext

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"text/template"

	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
	"entgo.io/ent/schema/field"

	"github.com/entflake/entflake/mixin"
	"github.com/entflake/entflake/schema"
)

//go:embed template/*.tmpl
var templates embed.FS

// Extension is the entc extension; make one with New.
type Extension struct {
	entc.DefaultExtension
}

// templateName names the extension's template set in the generation.
const templateName = "entflake-ext"

// running holds the graphs the hook is generating, so that an extension
// given twice (or its hooks twice) checks and changes a graph once: a
// second pass would find the guards the first removed missing, and
// report a default the schema never had.
var running sync.Map // *gen.Graph -> struct{}

// New returns the extension.
func New() *Extension { return &Extension{} }

// funcs are the template functions the extension's templates use.
var funcs = template.FuncMap{
	"entflakeUses":       uses,
	"entflakeAny":        func(g *gen.Graph) bool { return len(marked(g)) > 0 },
	"entflakeAnyJSON":    anyJSON,
	"entflakeJSONFields": jsonFields,
	"entflakeJSONKeys":   jsonKeys,
	"entflakeRefFields":  refFields,
	"entflakeAnyRefs":    anyRefs,
	"entflakeTypeNames":  func(g *gen.Graph) string { return strings.Join(marked(g), ", ") },
	"entflakeTables":     unmapped,
	"entflakeGQL":        usesGQL,
	"entflakeGQLNodes":   gqlNodes,
	"entflakeGQLSnowflakes": func(g *gen.Graph) string {
		var q []string
		for _, n := range gqlNodes(g) {
			if uses(n) {
				q = append(q, strconv.Quote(n.Name))
			}
		}
		return strings.Join(q, ", ")
	},
	"entflakeQuoted": func(g *gen.Graph) string {
		var q []string
		for _, name := range marked(g) {
			q = append(q, strconv.Quote(name))
		}
		return strings.Join(q, ", ")
	},
}

// marked returns the names of the graph's types that use mixin.SnowflakeID.
func marked(g *gen.Graph) []string {
	var names []string
	for _, n := range g.Nodes {
		if uses(n) {
			names = append(names, n.Name)
		}
	}
	return names
}

// Templates returns the templates that write the generated code.
func (*Extension) Templates() []*gen.Template {
	return []*gen.Template{
		gen.MustParse(gen.NewTemplate(templateName).Funcs(funcs).ParseFS(templates, "template/entflake.tmpl")),
		gen.MustParse(gen.NewTemplate("entflake-migrate").Funcs(funcs).
			SkipIf(func(g *gen.Graph) bool { return !g.SupportMigrate() || len(unmapped(g)) == 0 && len(marked(g)) == 0 }).
			ParseFS(templates, "template/migrate.tmpl")),
	}
}

// Hooks returns the generation hook that checks the graph first.
func (*Extension) Hooks() []gen.Hook {
	return []gen.Hook{func(next gen.Generator) gen.Generator {
		return gen.GenerateFunc(func(g *gen.Graph) error {
			if _, again := running.LoadOrStore(g, struct{}{}); again {
				return next.Generate(g)
			}
			defer running.Delete(g)
			adopt(g)
			if err := Check(g); err != nil {
				return err
			}
			if err := annotateGQL(g); err != nil {
				return err
			}
			if err := setupGQL(g); err != nil {
				return err
			}
			markJSONStrings(g)
			dropGuards(g)
			return next.Generate(g)
		})
	}}
}

// mark returns the mixin's annotation of a type, if it has one. Templates
// pass a *gen.Type, or a scope that embeds one (the builders' templates).
func mark(t any) (any, bool) {
	v := reflect.Indirect(reflect.ValueOf(t))
	if v.Kind() != reflect.Struct {
		return nil, false
	}
	f := v.FieldByName("Annotations")
	if !f.IsValid() {
		return nil, false
	}
	a, ok := f.Interface().(gen.Annotations)
	if !ok {
		return nil, false
	}
	m, ok := a[mixin.AnnotationName]
	return m, ok
}

// uses reports whether a type's schema uses mixin.SnowflakeID.
func uses(t any) bool {
	_, ok := mark(t)
	return ok
}

// jsonString reports whether the type's mixin asks for a JSON string id.
// entc stores an annotation as its JSON form, so it is decoded back into
// mixin.Annotation, the one definition of its fields.
func jsonString(t any) bool {
	m, ok := mark(t)
	if !ok {
		return false
	}
	b, err := json.Marshal(m)
	if err != nil {
		return false
	}
	var a mixin.Annotation
	if err := json.Unmarshal(b, &a); err != nil {
		return false
	}
	return a.JSONString
}

// unmapped returns the constructors in package schema (Table, SlotTable)
// of entflake's tables that no type of the graph maps to already: those the
// extension registers in migrate.Tables, so that none is registered twice.
func unmapped(g *gen.Graph) []string {
	mapped := map[string]bool{}
	for _, n := range g.Nodes {
		mapped[n.Table()] = true
	}
	var fns []string
	for _, t := range []struct{ name, fn string }{{schema.TableName, "Table"}, {schema.SlotTableName, "SlotTable"}} {
		if !mapped[t.name] {
			fns = append(fns, t.fn)
		}
	}
	return fns
}

// Check returns every reason the graph cannot be generated with the
// extension, joined, each naming its schema (or dependency). The extension
// runs it before generating; it is exported for tests and tools.
func Check(g *gen.Graph) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf("entflake: "+format, args...)) }
	var users []string
	for _, n := range g.Nodes {
		switch n.Name {
		case "IDGenerator", "NextID":
			fail("schema %s: its generated names would clash with entflake's %s; rename the type", n.Name, n.Name)
		case "Entflake":
			fail("schema %s: its generated file %s.go would overwrite entflake's; rename the type", n.Name, n.PackageDir())
		}
		checkJSON(n, fail)
		if len(refFields(n)) > 0 {
			for _, f := range n.Fields {
				if f.BuilderField() == "entflakeRefused" {
					fail("schema %s: field %s would clash with the entflakeRefused field entflake adds to the mutation "+
						"of a type with fields marked entflakemixin.JSONString(); rename the field", n.Name, f.Name)
				}
			}
		}
		if !uses(n) {
			continue
		}
		users = append(users, n.Name)
		for _, f := range n.Fields {
			if b := f.BuilderField(); b == "entflakeState" {
				fail("schema %s: field %s would clash with the %s field entflake adds to its mutation; rename the field", n.Name, f.Name, b)
			}
		}
		if n.IsEdgeSchema() {
			fail("schema %s uses mixin.SnowflakeID but is an edge schema: ent inserts its rows itself when edges are "+
				"added, without hooks, so nothing would give them an id; key it by its two edge fields "+
				"(field.ID annotation) instead", n.Name)
			continue
		}
		if !n.HasOneFieldID() || n.ID == nil {
			fail("schema %s uses mixin.SnowflakeID but has no single id field", n.Name)
			continue
		}
		id, before := n.ID, len(errs)
		switch {
		case id.Type == nil || id.Type.Type != field.TypeInt64:
			fail("schema %s uses mixin.SnowflakeID, but its id field is %s, not int64; remove the schema's own id field", n.Name, id.Type)
		case id.HasGoType():
			fail("schema %s uses mixin.SnowflakeID with a custom Go type %s on the id; the id must stay a plain int64 "+
				"(for JSON strings use SnowflakeID{JSONString: true})", n.Name, id.Type)
		}
		if (id.Default || id.DefaultFunc()) && !guarded(id) {
			fail("schema %s uses mixin.SnowflakeID, but its id has a default; ent runs defaults before hooks, "+
				"so the generated hook could not tell a default from an id the caller set: remove it", n.Name)
		}
		for _, a := range []*struct {
			where string
			on    *bool
		}{{"id field", incremental(id.EntSQL())}, {"schema", incremental(n.EntSQL())}} {
			if a.on != nil && *a.on {
				fail("schema %s uses mixin.SnowflakeID, but its %s has entsql.Annotation{Incremental: true}; "+
					"a snowflake id must not be AUTO_INCREMENT/IDENTITY", n.Name, a.where)
			}
		}
		if _, own := id.Annotations[mixin.IDFieldAnnotationName]; !own && len(errs) == before {
			// The schema's own id field replaced the mixin's, and with it the
			// annotations that keep the column a plain BIGINT: ent would make
			// it AUTO_INCREMENT (an INTEGER PRIMARY KEY rowid on SQLite)
			// behind ids the hook assigns. The reasons above say more, when
			// they apply, and suffice.
			fail("schema %s uses mixin.SnowflakeID and declares an id field of its own, which replaces the mixin's "+
				"(ent would make it AUTO_INCREMENT): remove field.Int64(\"id\") from its Fields; to annotate the id, "+
				"give the annotations to the mixin: entflakemixin.SnowflakeID{IDAnnotations: []schema.Annotation{...}}", n.Name)
		}
	}
	if deps, ok := g.Annotations[gen.Dependencies{}.Name()].(gen.Dependencies); ok {
		for _, d := range deps {
			if d.Field == "entflake" || d.Option == "IDGenerator" {
				fail("dependency %s (option %s) would clash with the generator's field entflake or its option "+
					"IDGenerator; name it otherwise (entc.DependencyName)", d.Field, d.Option)
			}
		}
	}
	if len(users) > 0 {
		if on, err := g.FeatureEnabled(gen.FeatureGlobalID.Name); err == nil && on {
			fail("the %s feature gives each type a range of ids and finds a node's type by its id; "+
				"pre-assigned snowflake ids (schemas %s) ignore those ranges: disable the feature or the mixin",
				gen.FeatureGlobalID.Name, strings.Join(users, ", "))
		}
	}
	return errors.Join(errs...)
}

// adopt marks, in the graph about to be generated, every type whose id
// field is SnowflakeID's own but whose schema lacks the mixin's mark: a
// mixin that composes SnowflakeID{}.Fields() instead of embedding
// SnowflakeID (whose Annotations give the mark). Without it the type would
// generate cleanly and every create fail with mixin.ErrNoExtension. The id
// field's json struct tag tells whether it is a JSON string.
func adopt(g *gen.Graph) {
	for _, n := range g.Nodes {
		if uses(n) || !n.HasOneFieldID() || n.ID == nil {
			continue
		}
		if _, ok := n.ID.Annotations[mixin.IDFieldAnnotationName]; !ok {
			continue
		}
		if n.Annotations == nil {
			n.Annotations = gen.Annotations{}
		}
		n.Annotations[mixin.AnnotationName] = mixin.Annotation{JSONString: strings.Contains(n.ID.StructTag, ",string")}
	}
}

// guarded reports whether an id field is SnowflakeID's own, with the
// default and validator that make code generated without the extension fail
// at the first create (see mixin.ErrNoExtension). A default of the schema's
// own (a wrapping mixin's or the schema's id field) has no such mark.
func guarded(id *gen.Field) bool {
	_, ok := id.Annotations[mixin.IDFieldAnnotationName]
	return ok && id.Default && id.DefaultFunc() && id.Validators == 1
}

// dropGuards removes, from the graph about to be generated, the default and
// the validator of SnowflakeID's id field: with the extension the generated
// hook assigns the id, and ent must not set the mixin's placeholder before
// it (ent runs defaults before hooks, and the hook keeps an id that is set).
// The generated code is then what it would be without them: no id default
// or validator in the ent package, and no runtime registration for them.
func dropGuards(g *gen.Graph) {
	for _, n := range g.Nodes {
		if uses(n) && n.HasOneFieldID() && n.ID != nil && guarded(n.ID) {
			n.ID.Default, n.ID.Validators = false, 0
		}
	}
}

func incremental(a *entsql.Annotation) *bool {
	if a == nil {
		return nil
	}
	return a.Incremental
}

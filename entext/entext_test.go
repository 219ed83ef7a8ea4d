package entext

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/entc/gen"
	"entgo.io/ent/entc/load"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	entmixin "entgo.io/ent/schema/mixin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	entflakemixin "github.com/entflake/entflake/mixin"
)

// Good uses the mixin as intended.
type Good struct{ ent.Schema }

func (Good) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

// Plain has no mixin.
type Plain struct{ ent.Schema }

func (Plain) Fields() []ent.Field { return []ent.Field{field.String("name")} }

// idMixin keeps the mixin's mark but replaces its id field, the way a
// wrapping mixin could.
type idMixin struct {
	entflakemixin.SnowflakeID
	id ent.Field
}

func (m idMixin) Fields() []ent.Field { return []ent.Field{m.id} }

type StringID struct{ ent.Schema }

func (StringID) Mixin() []ent.Mixin { return []ent.Mixin{idMixin{id: field.String("id")}} }

type DefaultID struct{ ent.Schema }

func (DefaultID) Mixin() []ent.Mixin {
	return []ent.Mixin{idMixin{id: field.Int64("id").DefaultFunc(func() int64 { return time.Now().UnixNano() })}}
}

// OwnDefaultID has the mixin and an id field of its own with a default,
// which replaces the mixin's.
type OwnDefaultID struct{ ent.Schema }

func (OwnDefaultID) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

func (OwnDefaultID) Fields() []ent.Field {
	return []ent.Field{field.Int64("id").Immutable().DefaultFunc(func() int64 { return 1 })}
}

// orderField stands for an annotation of another extension on the id
// field, such as entgql.OrderField("ID") (the root module does not import
// entgql).
type orderField struct{ OrderField string }

func (orderField) Name() string { return "TestOrderField" }

// OwnID has the mixin and declares the id again to annotate it, the way
// entgql's todo example does for entgql.OrderField("ID"): a plain int64 id
// with no default, which replaces the mixin's.
type OwnID struct{ ent.Schema }

func (OwnID) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

func (OwnID) Fields() []ent.Field {
	return []ent.Field{field.Int64("id").Annotations(orderField{"ID"})}
}

// AnnotatedID gives its id the annotation through the mixin instead.
type AnnotatedID struct{ ent.Schema }

func (AnnotatedID) Mixin() []ent.Mixin {
	return []ent.Mixin{entflakemixin.SnowflakeID{IDAnnotations: []schema.Annotation{orderField{"ID"}}}}
}

// NilIDAnnotation has a nil among the mixin's id annotations.
type NilIDAnnotation struct{ ent.Schema }

func (NilIDAnnotation) Mixin() []ent.Mixin {
	return []ent.Mixin{entflakemixin.SnowflakeID{IDAnnotations: []schema.Annotation{orderField{"ID"}, nil}}}
}

type MyID int64

type GoTypeID struct{ ent.Schema }

func (GoTypeID) Mixin() []ent.Mixin {
	return []ent.Mixin{idMixin{id: field.Int64("id").GoType(MyID(0))}}
}

type Incremental struct{ ent.Schema }

func (Incremental) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

func (Incremental) Annotations() []schema.Annotation {
	on := true
	return []schema.Annotation{entsql.Annotation{Incremental: &on}}
}

// User and Group are linked through Membership, an edge schema.
type User struct{ ent.Schema }

func (User) Edges() []ent.Edge {
	return []ent.Edge{edge.To("groups", Group.Type).Through("memberships", Membership.Type)}
}

type Group struct{ ent.Schema }

func (Group) Edges() []ent.Edge {
	return []ent.Edge{edge.From("users", User.Type).Ref("groups").Through("memberships", Membership.Type)}
}

type Membership struct{ ent.Schema }

func (Membership) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

func (Membership) Fields() []ent.Field {
	return []ent.Field{field.Int("user_id"), field.Int("group_id")}
}

func (Membership) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("user", User.Type).Unique().Required().Field("user_id"),
		edge.To("group", Group.Type).Unique().Required().Field("group_id"),
	}
}

// NextID would clash with Client.NextID.
type NextID struct{ ent.Schema }

// Entflake's model file would be entflake.go, the extension's file.
type Entflake struct{ ent.Schema }

// JSONClash has a field whose struct field is the UnmarshalJSON method that
// SnowflakeID{JSONString: true} generates.
type JSONClash struct{ ent.Schema }

func (JSONClash) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{JSONString: true}} }

func (JSONClash) Fields() []ent.Field { return []ent.Field{field.String("unmarshal_json")} }

// GeneratedClash has a field whose mutation field is the extension's
// entflakeState.
type GeneratedClash struct{ ent.Schema }

func (GeneratedClash) Mixin() []ent.Mixin { return []ent.Mixin{entflakemixin.SnowflakeID{}} }

func (GeneratedClash) Fields() []ent.Field { return []ent.Field{field.String("entflakeState")} }

// RefusedClash has a marked field, and a field whose mutation field is the
// extension's entflakeRefused.
type RefusedClash struct{ ent.Schema }

func (RefusedClash) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("owner_id").Annotations(entflakemixin.JSONString()),
		field.String("entflakeRefused"),
	}
}

// composed gives SnowflakeID's id field by composing its fields, with and
// without the JSON string id.
type composed struct {
	entmixin.Schema
	json bool
}

func (m composed) Fields() []ent.Field {
	return entflakemixin.SnowflakeID{JSONString: m.json}.Fields()
}

// Composed and ComposedJSON use the composing mixin.
type (
	Composed     struct{ ent.Schema }
	ComposedJSON struct{ ent.Schema }
)

func (Composed) Mixin() []ent.Mixin     { return []ent.Mixin{composed{}} }
func (ComposedJSON) Mixin() []ent.Mixin { return []ent.Mixin{composed{json: true}} }

// StringRef marks a string field with JSONString.
type StringRef struct{ ent.Schema }

func (StringRef) Fields() []ent.Field {
	return []ent.Field{field.String("account_id").Annotations(entflakemixin.JSONString())}
}

// IntRef marks an int (not int64) field.
type IntRef struct{ ent.Schema }

func (IntRef) Fields() []ent.Field {
	return []ent.Field{field.Int("count_id").Annotations(entflakemixin.JSONString())}
}

// GoTypeRef marks an int64 field with a Go type of its own.
type GoTypeRef struct{ ent.Schema }

func (GoTypeRef) Fields() []ent.Field {
	return []ent.Field{field.Int64("typed_id").GoType(MyID(0)).Annotations(entflakemixin.JSONString())}
}

// HiddenRef marks fields that are kept out of JSON.
type HiddenRef struct{ ent.Schema }

func (HiddenRef) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("dash_id").StructTag(`json:"-"`).Annotations(entflakemixin.JSONString()),
		field.Int64("ann_id").Annotations(entflakemixin.JSONString()),
	}
}

func (HiddenRef) Annotations() []schema.Annotation {
	return []schema.Annotation{field.Annotation{StructTag: map[string]string{"ann_id": `json:"-"`}}}
}

// SameKeyRef has two marked fields with one JSON key.
type SameKeyRef struct{ ent.Schema }

func (SameKeyRef) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("a_id").StructTag(`json:"ref"`).Annotations(entflakemixin.JSONString()),
		field.Int64("b_id").StructTag(`json:"ref,omitempty"`).Annotations(entflakemixin.JSONString()),
	}
}

// RefClash has no mixin, but a marked field, and a field that would clash
// with the UnmarshalJSON it gets.
type RefClash struct{ ent.Schema }

func (RefClash) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("owner_id").Annotations(entflakemixin.JSONString()),
		field.String("unmarshal_json"),
	}
}

// GoodRef has a marked field, optional and nillable, and no mixin.
type GoodRef struct{ ent.Schema }

func (GoodRef) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("owner_id").Optional().Nillable().Annotations(entflakemixin.JSONString()),
		field.String("unmarshal_json_not"),
	}
}

// MisplacedRef has the mark on the schema and on an edge.
type MisplacedRef struct{ ent.Schema }

func (MisplacedRef) Annotations() []schema.Annotation {
	return []schema.Annotation{entflakemixin.JSONString()}
}

func (MisplacedRef) Edges() []ent.Edge {
	return []ent.Edge{edge.To("owner", Plain.Type).Unique().Annotations(entflakemixin.JSONString())}
}

// OwnSequence maps a type of the user's to the lease's table.
type OwnSequence struct{ ent.Schema }

func (OwnSequence) Fields() []ent.Field {
	return []ent.Field{field.String("id").StorageKey("service_name")}
}

func (OwnSequence) Annotations() []schema.Annotation {
	return []schema.Annotation{entsql.Annotation{Table: "sys_sequence"}}
}

func graph(t *testing.T, features []gen.Feature, schemas ...ent.Interface) *gen.Graph {
	t.Helper()
	var loaded []*load.Schema
	for _, s := range schemas {
		b, err := load.MarshalSchema(s)
		require.NoError(t, err)
		l, err := load.UnmarshalSchema(b)
		require.NoError(t, err)
		loaded = append(loaded, l)
	}
	storage, err := gen.NewStorage("sql")
	require.NoError(t, err)
	g, err := gen.NewGraph(&gen.Config{Package: "example.com/app/ent", Storage: storage, Features: features}, loaded...)
	require.NoError(t, err)
	return g
}

func TestCheck(t *testing.T) {
	assert.NoError(t, Check(graph(t, nil, Good{}, Plain{}, GoodRef{})))
	for name, c := range map[string]struct {
		schemas  []ent.Interface
		features []gen.Feature
		want     []string
	}{
		"string id":       {[]ent.Interface{StringID{}}, nil, []string{"schema StringID", "id field is string, not int64"}},
		"default id":      {[]ent.Interface{DefaultID{}}, nil, []string{"schema DefaultID", "its id has a default"}},
		"own default id":  {[]ent.Interface{OwnDefaultID{}}, nil, []string{"schema OwnDefaultID", "its id has a default"}},
		"go type":         {[]ent.Interface{GoTypeID{}}, nil, []string{"schema GoTypeID", "custom Go type"}},
		"incremental":     {[]ent.Interface{Incremental{}}, nil, []string{"schema Incremental", "Incremental: true"}},
		"global id":       {[]ent.Interface{Good{}}, []gen.Feature{gen.FeatureGlobalID}, []string{"sql/globalid", "schemas Good"}},
		"name clash":      {[]ent.Interface{NextID{}}, nil, []string{"schema NextID", "clash"}},
		"file clash":      {[]ent.Interface{Entflake{}}, nil, []string{"schema Entflake", "entflake.go"}},
		"method clash":    {[]ent.Interface{JSONClash{}}, nil, []string{"schema JSONClash", "field unmarshal_json", "UnmarshalJSON"}},
		"refused clash":   {[]ent.Interface{RefusedClash{}}, nil, []string{"schema RefusedClash", "field entflakeRefused", "rename the field"}},
		"generated clash": {[]ent.Interface{GeneratedClash{}}, nil, []string{"schema GeneratedClash", "field entflakeState", "rename the field"}},
		"edge schema":     {[]ent.Interface{User{}, Group{}, Membership{}}, nil, []string{"schema Membership", "edge schema"}},
		"several at once": {[]ent.Interface{StringID{}, DefaultID{}}, nil, []string{"schema StringID", "schema DefaultID"}},
		"own id": {[]ent.Interface{OwnID{}}, nil, []string{"schema OwnID", "declares an id field of its own",
			"AUTO_INCREMENT", `remove field.Int64("id")`, "SnowflakeID{IDAnnotations: []schema.Annotation{...}}"}},
		"string ref":  {[]ent.Interface{StringRef{}}, nil, []string{"schema StringRef", "field account_id", "JSONString()", "is string, not int64"}},
		"int ref":     {[]ent.Interface{IntRef{}}, nil, []string{"schema IntRef", "field count_id", "is int, not int64"}},
		"go type ref": {[]ent.Interface{GoTypeRef{}}, nil, []string{"schema GoTypeRef", "field typed_id", "custom Go type"}},
		"hidden refs": {[]ent.Interface{HiddenRef{}}, nil, []string{"schema HiddenRef",
			"field dash_id", `json:"-"`, "field ann_id"}},
		"misplaced": {[]ent.Interface{MisplacedRef{}, Plain{}}, nil, []string{"schema MisplacedRef has entflakemixin.JSONString() as a schema annotation",
			"schema MisplacedRef: edge owner has"}},
		"same key":  {[]ent.Interface{SameKeyRef{}}, nil, []string{"schema SameKeyRef", "fields a_id and b_id", `JSON key "ref"`}},
		"ref clash": {[]ent.Interface{RefClash{}}, nil, []string{"schema RefClash", "field unmarshal_json", "UnmarshalJSON", "owner_id"}},
	} {
		t.Run(name, func(t *testing.T) {
			err := Check(graph(t, c.features, c.schemas...))
			require.Error(t, err)
			for _, w := range c.want {
				assert.ErrorContains(t, err, w)
			}
			assert.True(t, strings.HasPrefix(err.Error(), "entflake: "), err.Error())
		})
	}
	// Global IDs without the mixin are none of our business.
	assert.NoError(t, Check(graph(t, []gen.Feature{gen.FeatureGlobalID}, Plain{})))
}

// TestCheckDependencies: an entc.Dependency whose field or option would be
// the generator's is refused; another is fine.
func TestCheckDependencies(t *testing.T) {
	for _, c := range []struct {
		dep  gen.Dependency
		want string
	}{
		{gen.Dependency{Field: "entflake", Option: "WithGen"}, "dependency entflake"},
		{gen.Dependency{Field: "Gen", Option: "IDGenerator"}, "option IDGenerator"},
		{gen.Dependency{Field: "HTTPClient", Option: "HTTPClient"}, ""},
	} {
		g := graph(t, nil, Good{})
		g.Annotations = gen.Annotations{gen.Dependencies{}.Name(): gen.Dependencies{&c.dep}}
		err := Check(g)
		if c.want == "" {
			assert.NoError(t, err)
			continue
		}
		assert.ErrorContains(t, err, c.want)
	}
}

// TestHookStopsGeneration: the generation hook fails before anything is
// written.
func TestHookStopsGeneration(t *testing.T) {
	called := false
	next := gen.GenerateFunc(func(*gen.Graph) error { called = true; return nil })
	err := New().Hooks()[0](next).Generate(graph(t, nil, StringID{}))
	assert.ErrorContains(t, err, "not int64")
	assert.False(t, called)
	require.NoError(t, New().Hooks()[0](next).Generate(graph(t, nil, Good{})))
	assert.True(t, called)
	called = false
	err = New().Hooks()[0](next).Generate(graph(t, nil, StringRef{}))
	assert.ErrorContains(t, err, "schema StringRef: field account_id has entflakemixin.JSONString(), but is string, not int64")
	assert.False(t, called)
}

// TestWithString: the option string joins the json key of a struct tag,
// once, and the rest of the tag stays.
func TestWithString(t *testing.T) {
	for in, want := range map[string]string{
		`json:"account_id,omitempty"`:         `json:"account_id,string,omitempty"`,
		`json:"account_id"`:                   `json:"account_id,string"`,
		`json:"id,string,omitempty"`:          `json:"id,string,omitempty"`,
		`json:"a,omitempty,string"`:           `json:"a,omitempty,string"`,
		`json:",omitempty"`:                   `json:",string,omitempty"`,
		`xml:"a" json:"b,omitempty" yaml:"c"`: `xml:"a" json:"b,string,omitempty" yaml:"c"`,
		`xml:"json:\"x\"" json:"b"`:           `xml:"json:\"x\"" json:"b,string"`,
		`yaml:"c"`:                            `json:",string" yaml:"c"`,
		``:                                    `json:",string"`,
	} {
		got := withString(in)
		assert.Equal(t, want, got, in)
		if k, ok := jsonKey(in, "F"); ok {
			k2, _ := jsonKey(got, "F")
			assert.Equal(t, k, k2, "the key stays: %s", in)
		}
	}
	for tag, want := range map[string]string{`json:"a,string"`: "a", `json:",omitempty"`: "F", `xml:"x"`: "F", `json:"-,"`: "-"} {
		k, ok := jsonKey(tag, "F")
		assert.True(t, ok, tag)
		assert.Equal(t, want, k, tag)
	}
	_, ok := jsonKey(`json:"-"`, "F")
	assert.False(t, ok)
}

// TestGeneratedJSON: the generated model of a type with a marked field
// (no mixin) carries ",string" in the tag and an UnmarshalJSON; a type
// without any has neither, nor the helpers when no type needs them.
func TestGeneratedJSON(t *testing.T) {
	g := graph(t, nil, Good{}, GoodRef{})
	g.Target, g.Templates, g.Hooks = t.TempDir(), New().Templates(), New().Hooks()
	require.NoError(t, g.Gen())
	b, err := os.ReadFile(filepath.Join(g.Target, "goodref.go"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "OwnerID *int64 `json:\"owner_id,string,omitempty\"`")
	assert.Contains(t, string(b), "func (_m *GoodRef) UnmarshalJSON(data []byte) error {")
	assert.Contains(t, string(b), `entflakeJSONIDPtr{ID: &_m.OwnerID, Label: "ent: GoodRef.owner_id"}`)
	b, err = os.ReadFile(filepath.Join(g.Target, "good.go"))
	require.NoError(t, err)
	assert.NotContains(t, string(b), "UnmarshalJSON")
	assert.Contains(t, string(b), "int64 `json:\"id,omitempty\"`")
	b, err = os.ReadFile(filepath.Join(g.Target, "entflake.go"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "entflakeJSONIDPtr = entrt.JSONIDPtr")

	// Without the mixin in the graph, the helpers are there all the same.
	g = graph(t, nil, GoodRef{})
	g.Target, g.Templates, g.Hooks = t.TempDir(), New().Templates(), New().Hooks()
	require.NoError(t, g.Gen())
	b, err = os.ReadFile(filepath.Join(g.Target, "entflake.go"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "entflakeJSONIDPtr = entrt.JSONIDPtr")
	assert.Contains(t, string(b), `"encoding/json"`)

	g = graph(t, nil, Good{})
	g.Target, g.Templates, g.Hooks = t.TempDir(), New().Templates(), New().Hooks()
	require.NoError(t, g.Gen())
	b, err = os.ReadFile(filepath.Join(g.Target, "entflake.go"))
	require.NoError(t, err)
	assert.NotContains(t, string(b), "entflakeJSONID")
	assert.NotContains(t, string(b), "encoding/json")
}

// TestGuardsDropped: the mixin's id has a default and a validator that make
// code generated without the extension fail at the first create; the
// extension drops both, so that its generated code has no id default for
// ent to set before the hook, and no id validator.
func TestGuardsDropped(t *testing.T) {
	generate := func(t *testing.T, ext bool) string {
		g := graph(t, nil, Good{}, Plain{})
		g.Target, g.Config.Schema = t.TempDir(), "example.com/app/ent/schema"
		id := g.Nodes[0].ID
		require.True(t, id.Default && id.DefaultFunc() && id.Validators == 1, "the mixin's guard")
		if ext {
			g.Templates, g.Hooks = New().Templates(), New().Hooks()
		}
		require.NoError(t, g.Gen())
		assert.Equal(t, !ext, id.Default)
		b, err := os.ReadFile(filepath.Join(g.Target, "good", "good.go"))
		require.NoError(t, err)
		return string(b)
	}
	for _, name := range []string{"DefaultID", "IDValidator"} {
		assert.Contains(t, generate(t, false), name, "without the extension")
		assert.NotContains(t, generate(t, true), name, "with the extension")
	}
}

// OwnSlots maps a type of the user's to the slot table.
type OwnSlots struct{ ent.Schema }

func (OwnSlots) Fields() []ent.Field {
	return []ent.Field{field.Int("id").StorageKey("worker_id")}
}

func (OwnSlots) Annotations() []schema.Annotation {
	return []schema.Annotation{entsql.Annotation{Table: "sys_sequence_slot"}}
}

// TestTableNotRegisteredTwice: when a schema of the graph already maps a
// type to one of entflake's tables, the extension leaves that table to it.
func TestTableNotRegisteredTwice(t *testing.T) {
	assert.Equal(t, []string{"Table", "SlotTable"}, unmapped(graph(t, nil, Good{})))
	assert.Equal(t, []string{"SlotTable"}, unmapped(graph(t, nil, Good{}, OwnSequence{})))
	assert.Empty(t, unmapped(graph(t, nil, Good{}, OwnSequence{}, OwnSlots{})))
}

// TestMigrateFile: the generated migrate/entflake.go registers each of
// entflake's tables that no type maps, and wraps WithGlobalUniqueID when a
// type has the mixin; with none of that there is no file.
func TestMigrateFile(t *testing.T) {
	for name, c := range map[string]struct {
		schemas []ent.Interface
		tables  string // the registration expected, or ""
		refusal bool
	}{
		"mixin":               {[]ent.Interface{Good{}, Plain{}}, "entflakeschema.Table(), entflakeschema.SlotTable())", true},
		"mixin, own table":    {[]ent.Interface{Good{}, OwnSequence{}}, "append(Tables, entflakeschema.SlotTable())", true},
		"mixin, own tables":   {[]ent.Interface{Good{}, OwnSequence{}, OwnSlots{}}, "", true},
		"no mixin":            {[]ent.Interface{Plain{}}, "entflakeschema.Table(), entflakeschema.SlotTable())", false},
		"no mixin, own table": {[]ent.Interface{Plain{}, OwnSequence{}}, "append(Tables, entflakeschema.SlotTable())", false},
		"no mixin, own both":  {[]ent.Interface{Plain{}, OwnSequence{}, OwnSlots{}}, "", false},
	} {
		t.Run(name, func(t *testing.T) {
			g := graph(t, nil, c.schemas...)
			g.Target, g.Templates, g.Hooks = t.TempDir(), New().Templates(), New().Hooks()
			require.NoError(t, g.Gen())
			b, err := os.ReadFile(filepath.Join(g.Target, "migrate", "entflake.go"))
			if c.tables == "" && !c.refusal {
				assert.ErrorIs(t, err, fs.ErrNotExist)
				return
			}
			require.NoError(t, err)
			if c.tables == "" {
				assert.NotContains(t, string(b), "Tables = append")
			} else {
				assert.Contains(t, string(b), c.tables)
			}
			assert.Equal(t, c.refusal, strings.Contains(string(b),
				`WithGlobalUniqueID = entflakeschema.RefuseGlobalUniqueID(WithGlobalUniqueID, "Good")`))
		})
	}
}

func TestMark(t *testing.T) {
	g := graph(t, nil, Good{}, Plain{})
	for _, n := range g.Nodes {
		assert.Equal(t, n.Name == "Good", uses(n), n.Name)
		assert.False(t, jsonString(n))
	}
	assert.False(t, uses(42))
}

// TestMarkJSONStrings: the tag the model template writes gets ",string",
// whether it is the field's own or a schema's field.Annotation, held as
// entc's loader holds it or as the annotation itself (a graph built in Go).
func TestMarkJSONStrings(t *testing.T) {
	g := graph(t, nil, GoodRef{})
	n := g.Nodes[0]
	markJSONStrings(g)
	assert.Equal(t, `json:"owner_id,string,omitempty"`, tagOf(n, n.Fields[0]))
	assert.Equal(t, `json:"unmarshal_json_not,omitempty"`, tagOf(n, n.Fields[1]), "an unmarked field keeps its tag")

	g = graph(t, nil, GoodRef{})
	n = g.Nodes[0]
	n.Annotations = map[string]any{field.Annotation{}.Name(): field.Annotation{StructTag: map[string]string{"owner_id": `json:"owner" yaml:"o"`}}}
	assert.Equal(t, `json:"owner" yaml:"o"`, tagOf(n, n.Fields[0]))
	markJSONStrings(g)
	assert.Equal(t, `json:"owner,string" yaml:"o"`, tagOf(n, n.Fields[0]))
	assert.Equal(t, []jsonField{{Key: "owner", StructField: "OwnerID", Ptr: true, Label: `GoodRef.owner_id (JSON key "owner")`}}, jsonFields(n))
}

// TestAdoptComposed: a schema whose mixin composes SnowflakeID{}.Fields()
// instead of embedding SnowflakeID is marked as the mixin's (with its JSON
// string setting), so the extension generates for it; without adopt it
// would generate cleanly and every create fail with ErrNoExtension.
func TestAdoptComposed(t *testing.T) {
	g := graph(t, nil, Composed{}, ComposedJSON{}, Plain{})
	require.Empty(t, marked(g), "unmarked before")
	adopt(g)
	require.NoError(t, Check(g))
	assert.Equal(t, []string{"Composed", "ComposedJSON"}, marked(g))
	for _, n := range g.Nodes {
		assert.Equal(t, n.Name == "ComposedJSON", jsonString(n), n.Name)
	}
}

// RefView is a view (ent.View) with a marked field.
type RefView struct{ ent.View }

func (RefView) Fields() []ent.Field {
	return []ent.Field{field.Int64("account_id").Annotations(entflakemixin.JSONString())}
}

// TestViewRefs: a view's marked field marshals as a JSON string and gets
// the generated UnmarshalJSON, but no hook: a view has no mutation, and the
// hook's registration and its case on the view's mutation would not
// compile (cfg.hooks.RefView, RefViewMutation).
func TestViewRefs(t *testing.T) {
	// A graph of views alone makes ent's NewGraph panic: Plain is there too.
	g := graph(t, nil, Plain{}, RefView{})
	require.NoError(t, Check(g))
	n := g.Nodes[1]
	require.True(t, n.IsView())
	assert.Empty(t, refFields(n))
	assert.False(t, anyRefs(g))
	markJSONStrings(g)
	assert.Equal(t, []jsonField{{Key: "account_id", StructField: "AccountID", Label: "RefView.account_id"}}, jsonFields(n))
	assert.Equal(t, `json:"account_id,string,omitempty"`, n.Fields[0].StructTag)
}

// TestAnnotateGQL: for entgql, a marked field gets the GraphQL type ID
// (merged into an entgql annotation of its own, unless that sets a type),
// and the types of entflake's tables are skipped (unless the user
// annotated them for entgql); the loaded schema's maps stay as they were.
func TestAnnotateGQL(t *testing.T) {
	g := graph(t, nil, GoodRef{}, SameKeyRef{}, OwnSequence{}, OwnSlots{}, Plain{})
	byName := map[string]*gen.Type{}
	for _, n := range g.Nodes {
		byName[n.Name] = n
	}
	good, two := byName["GoodRef"], byName["SameKeyRef"]
	loaded := good.Fields[0].Annotations
	// The user's own annotations, in the two forms a graph holds them: the
	// JSON form entc's loader stores, and a value (a graph built in Go).
	two.Fields[0].Annotations[gqlAnnotation] = struct{ Type string }{"Int"}
	two.Fields[1].Annotations[gqlAnnotation] = struct{ OrderField string }{"REF"}
	byName["OwnSlots"].Annotations = gen.Annotations{gqlAnnotation: map[string]any{"QueryField": map[string]any{}}}
	require.NoError(t, annotateGQL(g))

	assert.Equal(t, map[string]any{"Type": "ID"}, good.Fields[0].Annotations[gqlAnnotation])
	assert.Nil(t, good.Fields[1].Annotations[gqlAnnotation], "an unmarked field")
	assert.NotContains(t, loaded, gqlAnnotation, "the loaded schema's map")
	assert.Contains(t, good.Fields[0].Annotations, entflakemixin.JSONStringAnnotationName, "the mark stays")
	assert.Equal(t, struct{ Type string }{"Int"}, two.Fields[0].Annotations[gqlAnnotation], "a type of the user's")
	assert.Equal(t, map[string]any{"OrderField": "REF", "Type": "ID"}, two.Fields[1].Annotations[gqlAnnotation], "merged")

	assert.Equal(t, map[string]any{"Skip": gqlSkipAll}, byName["OwnSequence"].Annotations[gqlAnnotation])
	assert.Equal(t, map[string]any{"QueryField": map[string]any{}}, byName["OwnSlots"].Annotations[gqlAnnotation])
	assert.Nil(t, byName["Plain"].Annotations[gqlAnnotation])
	assert.Nil(t, byName["GoodRef"].Annotations[gqlAnnotation])
}

// TestAnnotateGQLBad: an entgql annotation on a marked field that is no
// JSON object (not entgql's) fails the generation, naming the field,
// rather than be replaced.
func TestAnnotateGQLBad(t *testing.T) {
	g := graph(t, nil, GoodRef{})
	g.Nodes[0].Fields[0].Annotations[gqlAnnotation] = "ID"
	err := annotateGQL(g)
	require.Error(t, err)
	assert.ErrorContains(t, err, "schema GoodRef: field owner_id: reading its entgql annotation")
	err = New().Hooks()[0](gen.GenerateFunc(func(*gen.Graph) error { return nil })).Generate(g)
	assert.ErrorContains(t, err, "field owner_id", "through the generation hook")
}

// TestOwnIDRefused: a schema that declares field.Int64("id") beside the
// mixin (to annotate it) is refused by the generation hook, naming the
// schema and the fix, before anything is written. Without the refusal ent
// made that id AUTO_INCREMENT (Increment: true in the graph) while the
// extension generated code for a snowflake id. The other refusals of an id
// field of the schema's own say why without this one.
func TestOwnIDRefused(t *testing.T) {
	g := graph(t, nil, OwnID{})
	require.True(t, uses(g.Nodes[0]))
	_, own := g.Nodes[0].ID.Annotations[entflakemixin.IDFieldAnnotationName]
	require.False(t, own, "the schema's id replaced the mixin's")
	called := false
	next := gen.GenerateFunc(func(*gen.Graph) error { called = true; return nil })
	err := New().Hooks()[0](next).Generate(g)
	require.ErrorContains(t, err, `schema OwnID uses mixin.SnowflakeID and declares an id field of its own`)
	assert.ErrorContains(t, err, `remove field.Int64("id") from its Fields`)
	assert.False(t, called)

	err = Check(graph(t, nil, OwnDefaultID{}))
	require.ErrorContains(t, err, "its id has a default")
	assert.NotContains(t, err.Error(), "of its own", "one reason is enough")
}

// TestIDAnnotations: the mixin's IDAnnotations reach the id field of the
// generated graph, beside the mixin's own annotations, and the extension
// generates the type; a nil annotation fails the load, naming its index.
func TestIDAnnotations(t *testing.T) {
	var seen *gen.Graph
	next := gen.GenerateFunc(func(g *gen.Graph) error { seen = g; return nil })
	require.NoError(t, New().Hooks()[0](next).Generate(graph(t, nil, AnnotatedID{})))
	require.NotNil(t, seen)
	id := seen.Nodes[0].ID
	require.Contains(t, id.Annotations, "TestOrderField")
	assert.Equal(t, map[string]any{"OrderField": "ID"}, id.Annotations["TestOrderField"])
	assert.Contains(t, id.Annotations, entflakemixin.IDFieldAnnotationName)
	assert.False(t, id.EntSQL() == nil || id.EntSQL().Incremental == nil || *id.EntSQL().Incremental,
		"the mixin's Incremental: false is kept")
	assert.False(t, id.Default, "the mixin's guard is dropped as usual")

	d := entflakemixin.SnowflakeID{IDAnnotations: []schema.Annotation{orderField{"ID"}, nil}}.Fields()[0].Descriptor()
	require.EqualError(t, d.Err, "entflakemixin.SnowflakeID: IDAnnotations[1] is nil")
	_, err := load.MarshalSchema(NilIDAnnotation{})
	require.ErrorContains(t, err, "IDAnnotations[1] is nil")
}

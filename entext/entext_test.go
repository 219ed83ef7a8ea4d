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
	assert.NoError(t, Check(graph(t, nil, Good{}, Plain{})))
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
		"edge schema":     {[]ent.Interface{User{}, Group{}, Membership{}}, nil, []string{"schema Membership", "edge schema"}},
		"several at once": {[]ent.Interface{StringID{}, DefaultID{}}, nil, []string{"schema StringID", "schema DefaultID"}},
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

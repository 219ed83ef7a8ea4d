package mixin_test

import (
	"testing"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema/field"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	entflakemixin "github.com/entflake/entflake/mixin"
)

func TestSnowflakeID(t *testing.T) {
	fields := entflakemixin.SnowflakeID{}.Fields()
	require.Len(t, fields, 1)
	d := fields[0].Descriptor()
	assert.Equal(t, "id", d.Name)
	assert.Equal(t, field.TypeInt64, d.Info.Type)
	assert.True(t, d.Immutable)
	assert.False(t, d.Optional)
	// The default and validator are the guard for code generated without
	// the extension, which drops both (entext's tests): a placeholder that
	// the validator refuses with ErrNoExtension, and only that.
	def, ok := d.Default.(func() int64)
	require.True(t, ok, "a default func")
	require.Len(t, d.Validators, 1)
	validate := d.Validators[0].(func(int64) error)
	assert.ErrorIs(t, validate(def()), entflakemixin.ErrNoExtension)
	assert.Negative(t, def(), "never a snowflake id")
	for _, id := range []int64{0, 1, -1, 385716584448028672} {
		assert.NoError(t, validate(id))
	}
	var incremental *bool
	guard := false
	for _, a := range d.Annotations {
		if s, ok := a.(entsql.Annotation); ok {
			incremental = s.Incremental
		}
		guard = guard || a.Name() == entflakemixin.IDFieldAnnotationName
	}
	assert.True(t, guard, "the mark by which entext tells the guard from a schema's own default")
	require.NotNil(t, incremental, "without the annotation ent makes the id AUTO_INCREMENT")
	assert.False(t, *incremental)
	assert.Empty(t, d.Tag)
	assert.Equal(t, map[string]string{dialect.SQLite: "bigint"}, d.SchemaType, "not SQLite's rowid alias")

	d = entflakemixin.SnowflakeID{JSONString: true}.Fields()[0].Descriptor()
	assert.Equal(t, `json:"id,string,omitempty"`, d.Tag)

	marks := entflakemixin.SnowflakeID{JSONString: true}.Annotations()
	require.Len(t, marks, 1)
	assert.Equal(t, entflakemixin.AnnotationName, marks[0].Name())
	assert.Equal(t, entflakemixin.Annotation{JSONString: true}, marks[0])
}

// TestJSONString: the mark is an annotation under its name; the field keeps
// its other options and its tag (the extension adds ",string" at
// generation, where it sees the tag ent will write).
func TestJSONString(t *testing.T) {
	d := field.Int64("account_id").Optional().Nillable().Immutable().
		Annotations(entflakemixin.JSONString()).Descriptor()
	require.NoError(t, d.Err)
	assert.True(t, d.Optional && d.Nillable && d.Immutable)
	assert.Empty(t, d.Tag)
	require.Len(t, d.Annotations, 1)
	assert.Equal(t, entflakemixin.JSONStringAnnotationName, d.Annotations[0].Name())
}

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
	assert.Nil(t, d.Default, "no default: the generated hook tells a caller-set id by its presence")
	var incremental *bool
	for _, a := range d.Annotations {
		if s, ok := a.(entsql.Annotation); ok {
			incremental = s.Incremental
		}
	}
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

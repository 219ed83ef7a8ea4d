package main

import (
	"bytes"
	"strings"
	"testing"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/assert"

	"github.com/entflake/entflake/schema"
)

// TestSameAsEntflakeDDL: the deprecated command prints what schema.WriteDDL
// writes (which cmd/entflake's ddl prints and tests against the databases),
// and says on stderr that it is deprecated.
func TestSameAsEntflakeDDL(t *testing.T) {
	for _, d := range []string{dialect.MySQL, dialect.Postgres, dialect.SQLite} {
		var out, errs, want bytes.Buffer
		assert.Equal(t, 0, run([]string{"-dialect", d}, &out, &errs))
		assert.NoError(t, schema.WriteDDL(&want, d))
		assert.Equal(t, want.String(), out.String())
		assert.Contains(t, out.String(), "__global__", "the pool row's seed")
		assert.Contains(t, errs.String(), "deprecated")
	}
}

func TestBadInput(t *testing.T) {
	for args, want := range map[string]string{
		"-dialect oracle":                      `unknown dialect "oracle"`,
		"":                                     `unknown dialect ""`,
		"-dialect " + dialect.MySQL + " extra": "unexpected arguments",
		"-nope":                                "flag provided but not defined",
	} {
		var out, errs bytes.Buffer
		assert.Equal(t, 2, run(strings.Fields(args), &out, &errs), args)
		assert.Contains(t, errs.String(), want, args)
		assert.Empty(t, out.String())
	}
}

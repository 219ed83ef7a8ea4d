package main

import (
	"bytes"
	"strings"
	"testing"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/assert"

	"github.com/entflake/entflake/internal/dbtest"
	"github.com/entflake/entflake/schema"
)

// TestPrintsRunnableDDL: the printed statement is the lease's, and runs on
// each database.
func TestPrintsRunnableDDL(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		var out, errs bytes.Buffer
		assert.Equal(t, 0, run([]string{"-dialect", b.Dialect}, &out, &errs))
		assert.Empty(t, errs.String())
		want, err := schema.CreateSQL(b.Dialect)
		assert.NoError(t, err)
		assert.Contains(t, out.String(), want+";")
		db := b.Fresh(t)
		for range 2 { // idempotent
			_, err := db.Exec(strings.TrimSuffix(strings.SplitN(out.String(), "\n", 2)[1], ";\n"))
			assert.NoError(t, err)
		}
	})
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

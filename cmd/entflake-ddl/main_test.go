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

// TestPrintsRunnableDDL: the printed statements are the lease's, and run on
// each database, twice.
func TestPrintsRunnableDDL(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		var out, errs bytes.Buffer
		assert.Equal(t, 0, run([]string{"-dialect", b.Dialect}, &out, &errs))
		assert.Empty(t, errs.String())
		want, err := schema.CreateStatements(b.Dialect)
		assert.NoError(t, err)
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		assert.True(t, strings.HasPrefix(lines[0], "-- "))
		assert.Len(t, lines[1:], len(want))
		db := b.Fresh(t)
		for range 2 { // idempotent
			for i, l := range lines[1:] {
				assert.Equal(t, want[i]+";", l)
				_, err := db.Exec(strings.TrimSuffix(l, ";"))
				assert.NoError(t, err)
			}
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

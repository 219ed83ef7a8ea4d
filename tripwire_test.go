package entflake

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The tripwire reads the drivers' messages; the integration tests
// (entext/internal/integration, TestTripwire*) show it on the servers.

func TestMySQLDuplicate(t *testing.T) {
	for _, c := range []struct{ msg, entry, key string }{
		{"Duplicate entry '386112294263746560' for key 'PRIMARY'", "386112294263746560", "PRIMARY"}, // MariaDB
		{"Duplicate entry '42' for key 'widgets.PRIMARY'", "42", "widgets.PRIMARY"},                 // MySQL 8, TiDB
		{"Duplicate entry 'one' for key 'code'", "one", "code"},
		{"Doppelter Eintrag '42' für Schlüssel 'PRIMARY'", "42", "PRIMARY"}, // lc_messages=de_DE
		{"Duplicate entry '7-9' for key 'PRIMARY'", "7-9", "PRIMARY"},       // a two-column key
	} {
		entry, key, ok := mysqlDuplicate(c.msg)
		assert.True(t, ok, c.msg)
		assert.Equal(t, c.entry, entry, c.msg)
		assert.Equal(t, c.key, key, c.msg)
	}
	for _, msg := range []string{"", "Duplicate entry", "for key 'PRIMARY'"} {
		_, _, ok := mysqlDuplicate(msg)
		assert.False(t, ok, msg)
	}
}

func TestPgDuplicate(t *testing.T) {
	id, ok := pgDuplicate("Key (id)=(386112295182299136) already exists.")
	assert.True(t, ok)
	assert.Equal(t, int64(386112295182299136), id)
	id, ok = pgDuplicate("Schlüssel »(id)=(42)« existiert bereits.") // lc_messages=de_DE
	assert.True(t, ok)
	assert.Equal(t, int64(42), id)
	for _, detail := range []string{"", "Key (code)=(one) already exists.", "Key (a, b)=(1, 2) already exists."} {
		_, ok := pgDuplicate(detail)
		assert.False(t, ok, detail)
	}
}

func TestRepeats(t *testing.T) {
	assert.False(t, repeats([]int64{1, 2, 3}, []int64{1, 3}))
	assert.True(t, repeats([]int64{1, 2, 1}, []int64{1}))
	assert.False(t, repeats([]int64{1, 2, 2}, []int64{1}), "a repeat of an id not ours is no matter here")
}

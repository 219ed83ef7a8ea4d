package entflakeprom_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/entflakeprom"
)

// TestRulesNameExportedMetrics: every metric the shipped rules
// (deploy/prometheus/entflake-rules.yml) read is one this collector
// exports, and every recording rule they read is one they record: a rule
// over a renamed or misspelt metric would never fire, and promtool's own
// tests, which feed it the names they use, would not notice.
func TestRulesNameExportedMetrics(t *testing.T) {
	text, err := os.ReadFile("../deploy/prometheus/entflake-rules.yml")
	require.NoError(t, err)
	exported := map[string]bool{}
	for _, n := range []string{entflakeprom.WaitsName, entflakeprom.WaitSecondsName, entflakeprom.BorrowedSecondsName,
		entflakeprom.ErrorsName, entflakeprom.RollbacksName, entflakeprom.LargestRollbackName, entflakeprom.RenewalsName,
		entflakeprom.RenewalFailuresName, entflakeprom.FencingsName, entflakeprom.SwitchesName, entflakeprom.CollisionsName,
		entflakeprom.LeaseStateName, entflakeprom.ReadyName, entflakeprom.InfoName,
		entflakeprom.PoolLiveName, entflakeprom.PoolCapacityName, entflakeprom.PoolReadOKName} {
		exported[n] = true
	}
	recorded := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*- record: (\S+)`).FindAllSubmatch(text, -1) {
		recorded[string(m[1])] = true
	}
	require.NotEmpty(t, recorded)
	used := 0
	for _, m := range regexp.MustCompile(`\bentflake[_:][a-z0-9_:]+`).FindAll(text, -1) {
		name := string(m)
		used++
		assert.True(t, exported[name] || recorded[name], "the rules read %s, which the collector does not export", name)
	}
	assert.Greater(t, used, 8)
}

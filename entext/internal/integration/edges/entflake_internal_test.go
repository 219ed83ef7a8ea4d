package edges

import "testing"

// TestEntflakeMariaDBReturning: the bulk upsert's one statement with
// RETURNING (entflakeBulkPath) is chosen for MariaDB 10.5 and later only,
// by the server's VERSION(); MySQL and TiDB, whose VERSION() looks like an
// old MySQL's, have no RETURNING.
func TestEntflakeMariaDBReturning(t *testing.T) {
	for v, want := range map[string]bool{
		"10.11.19-MariaDB-0+deb12u1": true,
		"10.5.0-MariaDB":             true,
		"11.4.2-MariaDB-ubu2404":     true,
		"5.5.5-10.6.12-MariaDB-log":  true, // the prefix some proxies add
		"10.4.32-MariaDB":            false,
		"10.3.39-MariaDB-0+deb10u1":  false,
		"8.0.36":                     false,
		"8.4.0-commercial":           false,
		"8.0.11-TiDB-v7.5.0":         false,
		"5.7.44-log":                 false,
		"":                           false,
	} {
		if got := entflakeMariaDBReturning(v); got != want {
			t.Errorf("entflakeMariaDBReturning(%q) = %v, want %v", v, got, want)
		}
	}
}

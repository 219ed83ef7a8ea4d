package schema_test

import (
	"context"
	"strings"
	"testing"

	atlasmigrate "ariga.io/atlas/sql/migrate"
	atlas "ariga.io/atlas/sql/schema"
	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	entschema "entgo.io/ent/dialect/sql/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
	"github.com/entflake/entflake/schema"
)

func TestCreateStatements(t *testing.T) {
	want := map[string][]string{
		dialect.MySQL: {
			"CREATE TABLE IF NOT EXISTS `sys_sequence` (`service_name` varchar(64) NOT NULL, " +
				"`worker_id` int NOT NULL DEFAULT 0, `instance` varchar(128) NULL, " +
				"`updated_at` datetime NOT NULL DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY (`service_name`)) " +
				"DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
			"CREATE TABLE IF NOT EXISTS `sys_sequence_slot` (`worker_id` int NOT NULL, " +
				"`service_name` varchar(64) NULL, `instance` varchar(128) NULL, " +
				"`fence` bigint NOT NULL DEFAULT 0, `beats` bigint NOT NULL DEFAULT 0, " +
				"`taken_ms` bigint NOT NULL DEFAULT 0, `expires_ms` bigint NOT NULL DEFAULT 0, " +
				"`promise_ms` bigint NOT NULL DEFAULT 0, `layout` varchar(64) NULL, " +
				"`updated_at` datetime NOT NULL DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY (`worker_id`), " +
				"INDEX `sys_sequence_slot_layout` (`layout`)) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
		},
		dialect.Postgres: {
			`CREATE TABLE IF NOT EXISTS "sys_sequence" ("service_name" varchar(64) NOT NULL, ` +
				`"worker_id" integer NOT NULL DEFAULT 0, "instance" varchar(128) NULL, ` +
				`"updated_at" timestamp with time zone NOT NULL DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY ("service_name"))`,
			`CREATE TABLE IF NOT EXISTS "sys_sequence_slot" ("worker_id" integer NOT NULL, ` +
				`"service_name" varchar(64) NULL, "instance" varchar(128) NULL, ` +
				`"fence" bigint NOT NULL DEFAULT 0, "beats" bigint NOT NULL DEFAULT 0, ` +
				`"taken_ms" bigint NOT NULL DEFAULT 0, "expires_ms" bigint NOT NULL DEFAULT 0, ` +
				`"promise_ms" bigint NOT NULL DEFAULT 0, "layout" varchar(64) NULL, ` +
				`"updated_at" timestamp with time zone NOT NULL DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY ("worker_id"))`,
			`CREATE INDEX IF NOT EXISTS "sys_sequence_slot_layout" ON "sys_sequence_slot" ("layout")`,
		},
		dialect.SQLite: {
			`CREATE TABLE IF NOT EXISTS "sys_sequence" ("service_name" varchar(64) NOT NULL, ` +
				`"worker_id" integer NOT NULL DEFAULT 0, "instance" varchar(128) NULL, ` +
				`"updated_at" datetime NOT NULL DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY ("service_name"))`,
			`CREATE TABLE IF NOT EXISTS "sys_sequence_slot" ("worker_id" integer NOT NULL, ` +
				`"service_name" varchar(64) NULL, "instance" varchar(128) NULL, ` +
				`"fence" integer NOT NULL DEFAULT 0, "beats" integer NOT NULL DEFAULT 0, ` +
				`"taken_ms" integer NOT NULL DEFAULT 0, "expires_ms" integer NOT NULL DEFAULT 0, ` +
				`"promise_ms" integer NOT NULL DEFAULT 0, "layout" varchar(64) NULL, ` +
				`"updated_at" datetime NOT NULL DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY ("worker_id"))`,
			`CREATE INDEX IF NOT EXISTS "sys_sequence_slot_layout" ON "sys_sequence_slot" ("layout")`,
		},
	}
	for d, w := range want {
		got, err := schema.CreateStatements(d)
		require.NoError(t, err)
		assert.Equal(t, w, got)
	}
	_, err := schema.CreateStatements("sqlserver")
	assert.ErrorIs(t, err, schema.ErrUnknownDialect)
	assert.ErrorContains(t, err, `"sqlserver"`)
}

func TestTableIsFresh(t *testing.T) {
	a, b := schema.Table(), schema.Table()
	assert.NotSame(t, a, b)
	assert.Equal(t, a.Name, b.Name)
	a.Columns[0].Name = "changed"
	assert.Equal(t, schema.ColumnServiceName, schema.Table().Columns[0].Name)
}

func TestValidateService(t *testing.T) {
	for name, ok := range map[string]bool{
		"billing":                     true,
		strings.Repeat("a", 64):       true,
		strings.Repeat("界", 64):       true, // characters, not bytes
		"":                            false,
		strings.Repeat("a", 65):       false,
		"__global__":                  false,
		"__layout__":                  false,
		"__slots__":                   false,
		"__layout__ ":                 false, // equal under PAD SPACE
		"__SLOTS__":                   false, // equal under a _ci collation
		"__layout__x":                 true,
		"a\x00b":                      false,
		"\xff\xfe":                    false,
		"x'); DROP TABLE t; --":       true, // bound as a parameter, stored verbatim
		"svc with spaces and ünicode": true,
	} {
		err := schema.ValidateService(name)
		if ok {
			assert.NoError(t, err, "%q", name)
		} else {
			assert.ErrorIs(t, err, schema.ErrInvalidService, "%q", name)
		}
	}
}

// migrate runs ent's migration (Atlas) of entflake's tables alone and
// returns the changes it planned.
func migrate(t *testing.T, b dbtest.Backend, db *dbtest.DB) []atlas.Change {
	t.Helper()
	var planned []atlas.Change
	m, err := entschema.NewMigrate(entsql.OpenDB(b.Dialect, db.DB),
		entschema.WithDiffHook(func(next entschema.Differ) entschema.Differ {
			return entschema.DiffFunc(func(current, desired *atlas.Schema) ([]atlas.Change, error) {
				changes, err := next.Diff(current, desired)
				planned = append(planned, changes...)
				return changes, err
			})
		}))
	require.NoError(t, err)
	require.NoError(t, m.Create(context.Background(), schema.Tables()...))
	return planned
}

// ensure runs CreateStatements' DDL on db, as the lease's ensure step does.
func ensure(t *testing.T, b dbtest.Backend, db *dbtest.DB) {
	t.Helper()
	stmts, err := schema.CreateStatements(b.Dialect)
	require.NoError(t, err)
	for _, s := range stmts {
		_, err = db.Exec(s)
		require.NoError(t, err)
	}
}

// TestEnsureThenMigrate: tables made by CreateStatements (the lease's ensure
// step) are exactly what ent's migration wants: it plans no change, so a service
// does not ALTER the table at every start.
func TestEnsureThenMigrate(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		ensure(t, b, db)
		assert.Empty(t, migrate(t, b, db))
	})
}

// TestMigrateThenEnsure: a table made by ent's migration takes the lease's
// idempotent DDL without error, and keeps the defaults the Java allocator
// relies on when it inserts without updated_at.
func TestMigrateThenEnsure(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		assert.NotEmpty(t, migrate(t, b, db), "the first migration creates the table")
		assert.Empty(t, migrate(t, b, db), "the second has nothing to do")
		ensure(t, b, db)
		_, err := db.Exec("INSERT INTO sys_sequence (service_name, instance) VALUES ('__global__', 'pool')")
		require.NoError(t, err)
		var worker int
		var updated string
		require.NoError(t, db.QueryRow("SELECT worker_id, CAST(updated_at AS CHAR(32)) FROM sys_sequence").Scan(&worker, &updated))
		assert.Zero(t, worker)
		assert.NotEmpty(t, updated)
	})
}

// sourceDDL is the Java allocator's table (docker/mysql-init/22-sys-sequence.sql
// in the source), without its utf8mb4_0900_ai_ci collation, which MariaDB
// does not know.
const sourceDDL = "CREATE TABLE IF NOT EXISTS `sys_sequence` (" +
	"`service_name` VARCHAR(64) NOT NULL COMMENT '__global__ is the pool row', " +
	"`worker_id` INT NOT NULL DEFAULT 0 COMMENT 'pool row: last id handed out', " +
	"`instance` VARCHAR(128) DEFAULT NULL COMMENT 'service@pid@start', " +
	"`updated_at` DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, " +
	"PRIMARY KEY (`service_name`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='snowflake worker-id pool'"

// TestMigrateKeepsSourceRows: ent's migration over a table made by the Java
// source's own DDL keeps its rows.
func TestMigrateKeepsSourceRows(t *testing.T) {
	b := dbtest.Backends[0]
	db := b.Fresh(t)
	_, err := db.Exec(sourceDDL)
	require.NoError(t, err)
	_, err = db.Exec("INSERT INTO sys_sequence (service_name, worker_id, instance) VALUES ('__global__', 17, 'pool'), ('java-svc', 0, 'java-svc@1@1')")
	require.NoError(t, err)
	migrate(t, b, db)
	var n, pool int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM sys_sequence").Scan(&n))
	require.NoError(t, db.QueryRow("SELECT worker_id FROM sys_sequence WHERE service_name = '__global__'").Scan(&pool))
	assert.Equal(t, 2, n)
	assert.Equal(t, 17, pool)
}

// TestRefuseGlobalUniqueID: with true, the wrapped option is not applied
// and the migration fails, naming the types, before it creates anything;
// with false, it is the wrapped option and the migration runs.
func TestRefuseGlobalUniqueID(t *testing.T) {
	ctx := context.Background()
	var passed []bool
	refuse := schema.RefuseGlobalUniqueID(func(on bool) entschema.MigrateOption {
		passed = append(passed, on)
		return entschema.WithGlobalUniqueID(on)
	}, "Account", "Entry")
	db := dbtest.SQLite(t)
	drv := entsql.OpenDB(dialect.SQLite, db.DB)
	exists := func() bool {
		var n int
		require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM sqlite_master WHERE name = 'sys_sequence'").Scan(&n))
		return n == 1
	}

	m, err := entschema.NewMigrate(drv, refuse(true))
	require.NoError(t, err)
	err = m.Create(ctx, schema.Table())
	assert.ErrorIs(t, err, schema.ErrGlobalUniqueID)
	assert.ErrorContains(t, err, "the ids of Account, Entry are assigned before the INSERT")
	assert.Empty(t, passed, "true is not passed on")
	assert.False(t, exists(), "nothing was created")
	// A versioned migration's diff is refused too, and writes no file.
	dir, err := atlasmigrate.NewLocalDir(t.TempDir())
	require.NoError(t, err)
	m, err = entschema.NewMigrate(drv, entschema.WithDir(dir), refuse(true))
	require.NoError(t, err)
	assert.ErrorIs(t, m.NamedDiff(ctx, "entflake", schema.Table()), schema.ErrGlobalUniqueID)
	files, err := dir.Files()
	require.NoError(t, err)
	assert.Empty(t, files)
	m, err = entschema.NewMigrate(drv, entschema.WithDir(dir), refuse(false))
	require.NoError(t, err)
	require.NoError(t, m.NamedDiff(ctx, "entflake", schema.Table()))
	files, err = dir.Files()
	require.NoError(t, err)
	assert.NotEmpty(t, files, "without the option the diff is written")
	passed = nil

	m, err = entschema.NewMigrate(drv, refuse(false))
	require.NoError(t, err)
	require.NoError(t, m.Create(ctx, schema.Table()))
	assert.Equal(t, []bool{false}, passed)
	assert.True(t, exists())
}

// TestSeedStatement: the seed puts the pool row in on each database, runs
// again without error, and never moves a counter that is already there.
func TestSeedStatement(t *testing.T) {
	_, err := schema.SeedStatement("oracle")
	assert.ErrorIs(t, err, schema.ErrUnknownDialect)
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		seed, err := schema.SeedStatement(b.Dialect)
		require.NoError(t, err)
		db := b.Fresh(t)
		ensure(t, b, db)
		pool := func() (worker int, instance string) {
			require.NoError(t, db.QueryRow("SELECT worker_id, instance FROM sys_sequence WHERE service_name = '__global__'").
				Scan(&worker, &instance))
			return worker, instance
		}
		_, err = db.Exec(seed)
		require.NoError(t, err)
		w, inst := pool()
		assert.Equal(t, 0, w)
		assert.Equal(t, schema.PoolInstance, inst)
		_, err = db.Exec("UPDATE sys_sequence SET worker_id = 17 WHERE service_name = '__global__'")
		require.NoError(t, err)
		_, err = db.Exec(seed)
		require.NoError(t, err, "the seed is idempotent")
		w, _ = pool()
		assert.Equal(t, 17, w, "the seed never resets the counter")
	})
}

// olderStatements are CreateStatements as entflake made them before the
// slot table's index left expires_ms out (see schema.UpgradeStatements).
func olderStatements(t *testing.T, d string) []string {
	t.Helper()
	stmts, err := schema.CreateStatements(d)
	require.NoError(t, err)
	old, now := `("layout")`, `("layout", "expires_ms")`
	if d == dialect.MySQL {
		old, now = "(`layout`)", "(`layout`, `expires_ms`)"
	}
	var out []string
	changed := 0
	for _, s := range stmts {
		if strings.Contains(s, "sys_sequence_slot_layout") {
			s = strings.Replace(s, old, now, 1)
			changed++
		}
		out = append(out, s)
	}
	require.Equal(t, 1, changed, "the older DDL has the one index")
	return out
}

// layoutIndex returns the columns of the slot table's index, in order, read
// from the database's catalog.
func layoutIndex(t *testing.T, d string, db *dbtest.DB) []string {
	t.Helper()
	q := map[string]string{
		dialect.MySQL: "SELECT column_name FROM information_schema.statistics WHERE table_schema = DATABASE() " +
			"AND table_name = 'sys_sequence_slot' AND index_name = 'sys_sequence_slot_layout' ORDER BY seq_in_index",
		dialect.Postgres: "SELECT a.attname FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid " +
			"JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) " +
			"WHERE c.relname = 'sys_sequence_slot_layout' ORDER BY array_position(i.indkey::int2[], a.attnum)",
		dialect.SQLite: "SELECT name FROM pragma_index_info('sys_sequence_slot_layout') ORDER BY seqno",
	}[d]
	rows, err := db.Query(q)
	require.NoError(t, err)
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		require.NoError(t, rows.Scan(&c))
		cols = append(cols, strings.ToLower(c))
	}
	require.NoError(t, rows.Err())
	return cols
}

// TestUpgradeStatements: over the tables an earlier entflake made (its
// index on layout and expires_ms) and a slot row, the upgrade leaves the
// index on layout alone and the row as it was; run again, it changes
// nothing; and ent's migration then plans no change, so the upgraded
// tables are this entflake's. ent's migration alone, over the older
// tables, makes the same change.
func TestUpgradeStatements(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		older := func() *dbtest.DB {
			db := b.Fresh(t)
			for _, s := range olderStatements(t, b.Dialect) {
				_, err := db.Exec(s)
				require.NoError(t, err, s)
			}
			_, err := db.Exec("INSERT INTO sys_sequence_slot (worker_id, fence, expires_ms, promise_ms, layout) VALUES (7, 3, 5, 9, '0/10/12')")
			require.NoError(t, err)
			require.Equal(t, []string{"layout", "expires_ms"}, layoutIndex(t, b.Dialect, db))
			return db
		}
		t.Run("statements", func(t *testing.T) {
			db := older()
			stmts, err := schema.UpgradeStatements(b.Dialect)
			require.NoError(t, err)
			for range 2 {
				for _, s := range stmts {
					_, err := db.Exec(s)
					require.NoError(t, err, s)
				}
				assert.Equal(t, []string{"layout"}, layoutIndex(t, b.Dialect, db))
			}
			assert.Empty(t, migrate(t, b, db), "ent's migration wants the upgraded tables as they are")
			var fence, expires, promise int64
			require.NoError(t, db.QueryRow("SELECT fence, expires_ms, promise_ms FROM sys_sequence_slot WHERE worker_id = 7").
				Scan(&fence, &expires, &promise))
			assert.Equal(t, []int64{3, 5, 9}, []int64{fence, expires, promise})
		})
		t.Run("ent", func(t *testing.T) {
			db := older()
			assert.NotEmpty(t, migrate(t, b, db), "ent's migration changes the index")
			assert.Equal(t, []string{"layout"}, layoutIndex(t, b.Dialect, db))
			assert.Empty(t, migrate(t, b, db))
		})
	})
	_, err := schema.UpgradeStatements("sqlserver")
	assert.ErrorIs(t, err, schema.ErrUnknownDialect)
}

package main

import (
	"bytes"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/internal/dbtest"
)

// readmeFile is a Go file the README shows whole, marked by a comment
// `<!-- file: PATH [dialect=NAME] -->` on the line before its code block.
type readmeFile struct {
	path, dialect, text string
}

var fileMark = regexp.MustCompile("(?m)^<!-- file: (\\S+)(?: dialect=(\\S+))? -->\n```go\n((?s:.*?))```\n")

// readmeFiles reads the marked files of the README at the module root,
// and of docs/ent.md (the project's test).
func readmeFiles(t *testing.T) []readmeFile {
	t.Helper()
	var files []readmeFile
	for _, doc := range []string{"README.md", filepath.Join("docs", "ent.md")} {
		b, err := os.ReadFile(filepath.Join("..", doc))
		require.NoError(t, err)
		for _, m := range fileMark.FindAllStringSubmatch(string(b), -1) {
			files = append(files, readmeFile{path: m[1], dialect: m[2], text: m[3]})
		}
	}
	return files
}

// TestReadmeProject builds the project the README's "Add it to an ent
// project" shows, file for file, as a module of its own: it generates the
// ent code with go generate, runs the project's test (enttest with a
// generator and no database), and runs the program on MariaDB, PostgreSQL
// and SQLite with each dialect's openDriver, then eight copies of it at
// once on a fresh database of each, and a run that fails after Open (which
// must still give its worker id back before it exits). A README that drifts from the
// library (a renamed option, a driver name that does not register, a
// missing feature flag) fails here.
func TestReadmeProject(t *testing.T) {
	files := readmeFiles(t)
	dialects := map[string]bool{}
	for _, f := range files {
		if f.dialect != "" {
			dialects[f.dialect] = true
		}
	}
	require.GreaterOrEqual(t, len(files), 8, "the README's marked files, and the test's")
	require.Equal(t, map[string]bool{"mysql": true, "postgres": true, "sqlite3": true}, dialects)

	root, err := filepath.Abs("..")
	require.NoError(t, err)
	dir := t.TempDir()
	write := func(path, text string) {
		p := filepath.Join(dir, path)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
	// The module requires what entflake requires, at the same versions, so
	// that it builds from the module cache alone (GOPROXY=off below).
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	requires := string(mod[bytes.Index(mod, []byte("require")):])
	write("go.mod", "module example.com/app\n\ngo 1.26.0\n\n"+
		"require github.com/entflake/entflake v0.0.0\n\n"+
		"replace github.com/entflake/entflake => "+strconv.Quote(root)+"\n\n"+requires)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	write("go.sum", string(sum))
	for _, f := range files {
		if f.dialect == "" {
			write(f.path, f.text)
		}
	}
	useDialect := func(d string) {
		for _, f := range files {
			if f.dialect == "" {
				continue
			}
			p := filepath.Join(dir, f.path)
			if f.dialect == d {
				write(f.path, f.text)
			} else {
				require.NoError(t, os.RemoveAll(p))
			}
		}
	}
	goCmd := func(env []string, args ...string) (string, string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), append([]string{"GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off"}, env...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "go %s:\n%s%s", strings.Join(args, " "), stdout.String(), stderr.String())
		return stdout.String(), stderr.String()
	}

	useDialect("sqlite3")
	goCmd(nil, "generate", "./ent")
	_, err = os.Stat(filepath.Join(dir, "ent", "entflake.go"))
	require.NoError(t, err, "go generate ran the extension")
	goCmd(nil, "vet", "./...")
	out, _ := goCmd(nil, "test", "-count=1", ".")
	assert.Contains(t, out, "ok")

	created := regexp.MustCompile(`msg=created account=(\d+) worker_id=(\d+)`)
	// Each database is made in its subtest, so that a backend left out by
	// ENTFLAKE_TEST_BACKENDS skips only its own.
	dsns := map[string]func(t *testing.T) string{
		"mysql":    func(t *testing.T) string { return dbtest.MySQL(t).DSN },
		"postgres": func(t *testing.T) string { return dbtest.Postgres(t).DSN },
		"sqlite3": func(t *testing.T) string {
			dbtest.Selected(t, "sqlite")
			return filepath.Join(t.TempDir(), "app.db")
		},
	}
	for _, d := range []string{"mysql", "postgres", "sqlite3"} {
		t.Run(d, func(t *testing.T) {
			dsn := dsns[d](t)
			useDialect(d)
			for _, debug := range []string{"", "1"} {
				_, logs := goCmd([]string{"DATABASE_DSN=" + dsn, "DEBUG_SQL=" + debug}, "run", ".")
				m := created.FindStringSubmatch(logs)
				require.NotNil(t, m, "the program's log:\n%s", logs)
				assert.Contains(t, logs, "source=lease", "a leased worker id")
				assert.NotContains(t, logs, "level=WARN")
				assert.NotContains(t, logs, "level=ERROR")
				id, err := strconv.ParseInt(m[1], 10, 64)
				require.NoError(t, err)
				p, err := entflake.Decode(id, entflake.DefaultLayout, entflake.DefaultEpoch)
				require.NoError(t, err)
				assert.Equal(t, m[2], strconv.FormatInt(p.WorkerID, 10), "the account's id carries the worker id")
				if debug != "" {
					assert.Contains(t, logs, "INSERT INTO", "dialect.Debug logs the statements")
				}
			}

			// Eight copies at once on a fresh database: entflake.Migrate makes
			// ent's migrations take turns, and each copy leases its own worker id.
			fresh := dsns[d](t)
			bin := filepath.Join(t.TempDir(), "app")
			goCmd(nil, "build", "-o", bin, ".")
			type run struct {
				logs string
				err  error
			}
			runs := make(chan run, 8)
			for range 8 {
				go func() {
					cmd := exec.Command(bin)
					cmd.Env = append(os.Environ(), "DATABASE_DSN="+fresh)
					var stderr bytes.Buffer
					cmd.Stderr = &stderr
					err := cmd.Run()
					runs <- run{stderr.String(), err}
				}()
			}
			workers := map[string]bool{}
			for range 8 {
				r := <-runs
				require.NoError(t, r.err, "a copy failed:\n%s", r.logs)
				m := created.FindStringSubmatch(r.logs)
				require.NotNil(t, m, "a copy's log:\n%s", r.logs)
				assert.NotContains(t, r.logs, "level=WARN")
				assert.NotContains(t, r.logs, "level=ERROR")
				workers[m[2]] = true
			}
			assert.Len(t, workers, 8, "eight worker ids: each copy leased its own")

			// A run that fails after Open still gives its worker id back at
			// once: run returns the error, its deferred gen.Close releases
			// the slot, and only then does main exit 1. The failure: a view
			// named accounts, which ent's migration does not take for the
			// table and cannot create the table beside.
			blocked := dsns[d](t)
			bdb, err := sql.Open(map[string]string{"mysql": "mysql", "postgres": "pgx", "sqlite3": "sqlite"}[d], blocked)
			require.NoError(t, err)
			_, err = bdb.Exec("CREATE VIEW accounts AS SELECT 1 AS id")
			require.NoError(t, bdb.Close())
			require.NoError(t, err)
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(), "DATABASE_DSN="+blocked)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			var exit *exec.ExitError
			require.ErrorAs(t, cmd.Run(), &exit, "the failed run's log:\n%s", stderr.String())
			assert.Equal(t, 1, exit.ExitCode())
			assert.Contains(t, stderr.String(), "level=ERROR msg=app error=\"migrate: ")
			assert.Contains(t, stderr.String(), "worker id released", "the deferred Close ran before the exit")
		})
	}
}

// TestReadmeFirstScreen: the README's first code block opens SQLite as the
// whole project's db_sqlite.go does (the DSN's options are the same), and
// the text just after it links to that project, so that a newcomer's first
// runnable step is reachable from the first screen.
func TestReadmeFirstScreen(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	readme := string(b)
	first := regexp.MustCompile("(?s)```go\n(.*?)```\n").FindStringSubmatch(readme)
	require.NotNil(t, first)
	var sqliteFile string
	for _, f := range readmeFiles(t) {
		if f.dialect == "sqlite3" {
			sqliteFile = f.text
		}
	}
	options := regexp.MustCompile(`"file:"\+path\+"(\?[^"]+)"`).FindStringSubmatch(sqliteFile)
	require.NotNil(t, options, "db_sqlite.go's DSN")
	assert.Contains(t, first[1], `sql.Open("sqlite", "file:app.db`+options[1]+`")`)
	assert.Contains(t, first[1], "entsql.OpenDB(dialect.SQLite, db)")
	end := strings.Index(readme, first[0]) + len(first[0])
	assert.Contains(t, readme[end:end+200], "(#add-it-to-an-ent-project)", "a link to the whole project just after the first block")
}

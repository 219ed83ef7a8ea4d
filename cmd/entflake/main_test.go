package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/internal/dbtest"
	"github.com/entflake/entflake/schema"
)

// cli runs the command in-process and returns its exit code and output.
func cli(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errs bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errs)
	return code, out.String(), errs.String()
}

// records is a slog handler that keeps every record.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) messages(min slog.Level) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.recs {
		if rec.Level >= min {
			out = append(out, rec.Level.String()+" "+rec.Message)
		}
	}
	return out
}

// openGen opens a generator on db that leases a worker id, logging into recs.
func openGen(t *testing.T, b dbtest.Backend, db *dbtest.DB, recs *records, opts ...entflake.Option) *entflake.Generator {
	t.Helper()
	if recs == nil {
		recs = &records{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := entflake.OpenDB(ctx, db.Open(t), b.Dialect,
		append([]entflake.Option{entflake.WithService("billing"), entflake.WithLogger(slog.New(recs)),
			entflake.WithRequireLease()}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	require.Equal(t, entflake.SourceLease, g.Source())
	return g
}

// apply runs the statements of a ddl output on db.
func apply(t *testing.T, db *dbtest.DB, ddl string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(ddl), "\n") {
		if strings.HasPrefix(line, "--") {
			continue
		}
		require.True(t, strings.HasSuffix(line, ";"), line)
		_, err := db.Exec(strings.TrimSuffix(line, ";"))
		require.NoError(t, err, line)
	}
}

// TestDDLStartsQuietly: a database made from the ddl output (applied
// twice: it is idempotent) is one the lease starts on without a WARN and
// without restoring the counter row or creating a table; the same tables
// without the seed row (the old output) make the first start restore the
// row, which is what the seed is for.
func TestDDLStartsQuietly(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		code, out, errs := cli("", "ddl", "-dialect", b.Dialect)
		require.Equal(t, 0, code, errs)
		assert.Empty(t, errs)
		assert.True(t, strings.HasPrefix(out, "-- entflake"))
		seed, err := schema.SeedStatement(b.Dialect)
		require.NoError(t, err)
		assert.Contains(t, out, seed+";\n")

		db := b.Fresh(t)
		apply(t, db, out)
		apply(t, db, out)
		recs := &records{}
		g := openGen(t, b, db, recs)
		_, err = g.NextID()
		require.NoError(t, err)
		assert.Empty(t, recs.messages(slog.LevelWarn), "no WARN on a database made from the ddl output")
		for _, m := range recs.messages(slog.LevelDebug) {
			assert.NotContains(t, m, "counter row", "the pool row was there")
			assert.NotContains(t, m, "created", "the tables were there")
		}
		assert.Contains(t, recs.messages(slog.LevelInfo), "INFO entflake: worker id leased")

		// The control: without the seed, the first start restores the row.
		bare := b.Fresh(t)
		stmts, err := schema.CreateStatements(b.Dialect)
		require.NoError(t, err)
		for _, s := range stmts {
			_, err := bare.Exec(s)
			require.NoError(t, err)
		}
		recs = &records{}
		openGen(t, b, bare, recs)
		assert.Contains(t, recs.messages(slog.LevelInfo), "INFO entflake: counter row restored")
	})
}

// holderRow is one line of holders -json.
type holderRow struct {
	WorkerID  int64  `json:"worker_id"`
	Service   string `json:"service"`
	Instance  string `json:"instance"`
	State     string `json:"state"`
	ExpiresIn string `json:"expires_in"`
	PromiseMs int64  `json:"promise_ms"`
	Fence     int64  `json:"fence"`
	Layout    string `json:"layout"`
	TakenAt   string `json:"taken_at"`
}

func jsonLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var rows []T
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r T
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), sc.Text())
		rows = append(rows, r)
	}
	return rows
}

// TestHolders: a live holder, one released by Close and one expired (its
// expiry moved into the past by hand, as a crashed holder leaves it) show
// with their states; released slots only with -all.
func TestHolders(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		live := openGen(t, b, db, nil)
		released := openGen(t, b, db, nil)
		require.NoError(t, released.Close())
		expired := openGen(t, b, db, nil, entflake.WithService("reports"))
		require.NoError(t, expired.Close())
		_, err := db.Exec(dbtest.Rebind(b.Dialect, "UPDATE sys_sequence_slot SET expires_ms = ? WHERE worker_id = ?"),
			time.Now().Add(-time.Minute).UnixMilli(), expired.WorkerID())
		require.NoError(t, err)

		code, out, errs := cli("", "holders", "-dialect", b.Dialect, "-dsn", db.DSN, "-json", "-all")
		require.Equal(t, 0, code, errs)
		rows := jsonLines[holderRow](t, out)
		require.Len(t, rows, 3)
		byWorker := map[int64]holderRow{}
		for _, r := range rows {
			byWorker[r.WorkerID] = r
		}
		l := byWorker[live.WorkerID()]
		assert.Equal(t, "live", l.State)
		assert.Equal(t, "billing", l.Service)
		assert.Equal(t, live.Instance(), l.Instance)
		assert.Equal(t, "0/10/12 2024-01-01T00:00:00.000Z", l.Layout)
		d, err := time.ParseDuration(l.ExpiresIn)
		require.NoError(t, err, l.ExpiresIn)
		assert.Positive(t, d)
		assert.Greater(t, l.PromiseMs, time.Now().Add(-time.Minute).UnixMilli(), "how far its IDs may go")
		taken, err := time.Parse(time.RFC3339, l.TakenAt)
		require.NoError(t, err)
		assert.WithinDuration(t, time.Now(), taken, time.Minute)
		assert.Equal(t, "released", byWorker[released.WorkerID()].State)
		assert.Empty(t, byWorker[released.WorkerID()].ExpiresIn)
		assert.Equal(t, "expired", byWorker[expired.WorkerID()].State)
		assert.Equal(t, "reports", byWorker[expired.WorkerID()].Service)

		// The table, without -all: the released slot is counted, not shown.
		code, out, errs = cli("", "holders", "-dialect", b.Dialect, "-dsn", db.DSN)
		require.Equal(t, 0, code, errs)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 5, out) // header, 2 slots, blank, summary
		assert.Regexp(t, `^WORKER\s+SERVICE\s+INSTANCE\s+STATE\s+EXPIRES IN\s+IDS UP TO\s+FENCE\s+LAYOUT\s+TAKEN AT$`, lines[0])
		states := map[string]string{}
		for _, line := range lines[1:3] {
			f := strings.Fields(line)
			require.Len(t, f, 10, line) // the layout holds a space
			states[f[0]] = f[3]
			upTo := f[5]
			if f[3] == "expired" {
				assert.Equal(t, "none", upTo, "it issued no ID: %s", line)
			} else {
				_, err := time.Parse(time.RFC3339, upTo)
				assert.NoError(t, err, line)
			}
		}
		assert.Equal(t, map[string]string{
			strconv.FormatInt(live.WorkerID(), 10):    "live",
			strconv.FormatInt(expired.WorkerID(), 10): "expired",
		}, states)
		// Columns are aligned: every row's STATE starts where its header does.
		col := strings.Index(lines[0], "STATE")
		for _, line := range lines[1:3] {
			assert.Contains(t, []string{"live", "expired"}, strings.Fields(line[col:])[0], line)
		}
		assert.Contains(t, lines[4], "3 slots: 1 live, 1 expired, 1 released (not shown; -all shows them)")
	})
}

// TestDecodeRoundTrip: IDs of a generator with its own layout and epoch
// decode, from the arguments and from standard input, to what the
// generator says they are.
func TestDecodeRoundTrip(t *testing.T) {
	layout := entflake.Layout{ClockSeqBits: 2, WorkerBits: 8, SequenceBits: 12}
	epoch := time.Date(2020, 3, 1, 0, 0, 0, 0, time.UTC)
	g, err := entflake.New(201, entflake.WithLayout(layout), entflake.WithEpoch(epoch))
	require.NoError(t, err)
	ids := make([]int64, 50)
	require.NoError(t, g.NextIDs(ids))
	var args, stdin []string
	for _, id := range ids {
		args = append(args, strconv.FormatInt(id, 10))
		stdin = append(stdin, "  "+strconv.FormatInt(id, 10)+" ", "")
	}
	for _, epochFlag := range []string{"2020-03-01T00:00:00Z", strconv.FormatInt(epoch.UnixMilli(), 10)} {
		flags := []string{"decode", "-json", "-layout", "2/8/12", "-epoch", epochFlag}
		for name, c := range map[string]struct {
			args  []string
			stdin string
		}{"args": {append(flags, args...), ""}, "stdin": {flags, strings.Join(stdin, "\n")}} {
			code, out, errs := cli(c.stdin, c.args...)
			require.Equal(t, 0, code, errs)
			rows := jsonLines[decoded](t, out)
			require.Len(t, rows, len(ids), name)
			for i, r := range rows {
				p, err := g.Decode(ids[i])
				require.NoError(t, err)
				assert.Equal(t, args[i], r.ID)
				assert.Equal(t, p.Time.Format(millisUTC), r.Time)
				assert.Equal(t, int64(201), r.WorkerID)
				assert.Equal(t, p.Sequence, r.Sequence)
				require.NotNil(t, r.ClockSeq)
				assert.Equal(t, p.ClockSeq, *r.ClockSeq)
			}
		}
	}
	// The table, with the library's defaults.
	def, err := entflake.New(7)
	require.NoError(t, err)
	id, err := def.NextID()
	require.NoError(t, err)
	p, err := def.Decode(id)
	require.NoError(t, err)
	code, out, errs := cli("", "decode", strconv.FormatInt(id, 10))
	require.Equal(t, 0, code, errs)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	assert.Regexp(t, `^ID\s+TIME \(UTC\)\s+WORKER\s+SEQUENCE$`, lines[0])
	assert.Equal(t, []string{strconv.FormatInt(id, 10), p.Time.Format(millisUTC), "7", strconv.FormatInt(p.Sequence, 10)},
		strings.Fields(lines[1]))
}

// TestBadInput: every mistake exits 2 (the command line) or 1 (the work),
// with a message naming it; nothing panics, and no DSN password is echoed.
func TestBadInput(t *testing.T) {
	sqlite := dbtest.SQLite(t) // an empty database file
	future := strconv.FormatInt(int64(1)<<62, 10)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "usage: entflake <command>"},
		{[]string{"frob"}, 2, `unknown command "frob"`},
		{[]string{"decode", "-layout", "0/10"}, 2, `-layout "0/10": invalid ID layout: want clock-sequence/worker/sequence bits`},
		{[]string{"decode", "-layout", "0/x/12"}, 2, `"x" is not a number of bits`},
		{[]string{"decode", "-layout", "0/10/13"}, 2, "= 23, want 22"},
		{[]string{"decode", "-epoch", "yesterday"}, 2, `-epoch "yesterday": invalid epoch: want RFC 3339`},
		{[]string{"decode", "-epoch", "-5"}, 2, "before 1970"},
		{[]string{"decode", "-epoch", "2999-01-01T00:00:00Z"}, 2, "in the future"},
		{[]string{"decode", "-5"}, 2, "flag provided but not defined: -5"},
		{[]string{"decode", "--", "-5"}, 1, `ID "-5": invalid ID: -5 is negative`},
		{[]string{"decode", "12x"}, 1, `ID "12x": not a decimal integer`},
		{[]string{"decode", "99999999999999999999"}, 1, `ID "99999999999999999999": out of range`},
		{[]string{"decode", "0"}, 1, `ID "0": zero is no generated ID`},
		{[]string{"decode", future}, 1, `ID "` + future + `": its time`},
		{[]string{"holders"}, 2, `-dialect: unknown dialect ""`},
		{[]string{"holders", "-dialect", "oracle", "-dsn", "x"}, 2, `unknown dialect "oracle": want "mysql"`},
		{[]string{"holders", "-dialect", dialect.MySQL}, 2, "-dsn is required"},
		{[]string{"holders", "-dialect", dialect.MySQL, "-dsn", "x", "-timeout", "0s"}, 2, "-timeout 0s: must be positive"},
		{[]string{"holders", "-dialect", dialect.MySQL, "-dsn", "x", "extra"}, 2, "unexpected arguments"},
		{[]string{"holders", "-dialect", dialect.MySQL, "-dsn", "no/such dsn"}, 1, "-dsn: not a DSN the mysql driver accepts"},
		{[]string{"holders", "-dialect", dialect.MySQL, "-dsn", "root:s3cret@tcp(" + dbtest.ClosedPort(t) + ")/x"}, 1,
			"connect to the mysql database of -dsn (driver mysql)"},
		{[]string{"holders", "-dialect", dialect.Postgres, "-dsn", "postgres://root:s3cret@" + dbtest.ClosedPort(t) + "/x"}, 1,
			"connect to the postgres database of -dsn (driver pgx)"},
		{[]string{"holders", "-dialect", dialect.Postgres, "-dsn", "postgres://root:s3cret@%zz/x"}, 1, "-dsn"},
		// pgx reads a misspelt scheme as key=value and sends the key,
		// password and all, to the server, whose refusal echoes it.
		{[]string{"holders", "-dialect", dialect.Postgres, "-dsn", "postgress://root:s3cret@127.0.0.1:5432/test?sslmode=disable"}, 1,
			"postgress://root:xxxxx@"},
		{[]string{"holders", "-dialect", dialect.SQLite, "-dsn", "file:" + t.TempDir() + "/none.db?_pragma=busy_timeout(1)"}, 1,
			"no SQLite database file"},
		{[]string{"holders", "-dialect", dialect.SQLite, "-dsn", sqlite.DSN}, 1,
			"no sys_sequence_slot table in this database: no instance has leased from this database yet, or it is the wrong database"},
		{[]string{"ddl", "-dialect", "oracle"}, 2, `unknown dialect "oracle"`},
		{[]string{"ddl", "-dialect", dialect.MySQL, "extra"}, 2, "unexpected arguments"},
		{[]string{"ddl", "-nope"}, 2, "flag provided but not defined"},
	}
	for _, c := range cases {
		code, out, errs := cli("", c.args...)
		assert.Equal(t, c.code, code, "%q: %s", c.args, errs)
		assert.Contains(t, errs, c.want, "%q", c.args)
		assert.NotContains(t, errs, "s3cret", "%q", c.args)
		assert.NotContains(t, errs, "panic", "%q", c.args)
		assert.Empty(t, out, "%q: no output, not even a table's header", c.args)
	}
	// Good IDs among bad ones are still decoded.
	code, out, errs := cli("1\nabc\n", "decode")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "2024-01-01T00:00:00.000Z")
	assert.Contains(t, errs, `ID "abc"`)
	assert.Contains(t, errs, "1 of the IDs could not be decoded")
}

// TestDDLUpgrade: ddl -upgrade applies, twice, over the tables ddl made
// (what an earlier entflake made is schema's TestUpgradeStatements), and
// holders then reads them.
func TestDDLUpgrade(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		code, out, errs := cli("", "ddl", "-dialect", b.Dialect)
		require.Equal(t, 0, code, errs)
		code, up, errs := cli("", "ddl", "-dialect", b.Dialect, "-upgrade")
		require.Equal(t, 0, code, errs)
		assert.True(t, strings.HasPrefix(up, "-- entflake"))
		assert.Contains(t, up, schema.SlotLayoutIndex)
		db := b.Fresh(t)
		apply(t, db, out)
		apply(t, db, up)
		apply(t, db, up)
		code, out, errs = cli("", "holders", "-dialect", b.Dialect, "-dsn", db.DSN)
		require.Equal(t, 0, code, errs)
		assert.Contains(t, out, "0 slots")
	})
}

// TestHoldersEmpty: holders reads databases that
// have the tables but no slot, and says so.
func TestHoldersEmpty(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		code, out, errs := cli("", "ddl", "-dialect", b.Dialect)
		require.Equal(t, 0, code, errs)
		apply(t, db, out)
		code, out, errs = cli("", "holders", "-dialect", b.Dialect, "-dsn", db.DSN)
		require.Equal(t, 0, code, errs)
		assert.Contains(t, out, "0 slots: 0 live, 0 expired, 0 released. Database clock ")
	})
}

// TestRange: range shows the pool's worker range, a dry run says what
// -set would do and who lies outside, -apply changes it (a generator of
// the new range then opens, one of the old is refused), and bad input is
// a usage error.
func TestRange(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		code, _, errs := cli("", "range", "-dialect", b.Dialect, "-dsn", db.DSN)
		assert.Equal(t, 1, code)
		assert.Contains(t, errs, "the pool has no layout yet")

		var held []int64
		for range 3 {
			held = append(held, openGen(t, b, db, nil, entflake.WithWorkerRange(500, 520)).WorkerID())
		}
		code, out, errs := cli("", "range", "-dialect", b.Dialect, "-dsn", db.DSN)
		require.Equal(t, 0, code, errs)
		assert.Contains(t, out, "layout 0/10/12 2024-01-01T00:00:00.000Z, 1024 worker ids\n")
		assert.Contains(t, out, "worker range: 500-520\n")
		assert.Contains(t, out, "no live slot outside 500-520.")

		code, out, errs = cli("", "range", "-dialect", b.Dialect, "-dsn", db.DSN, "-set", "0-499")
		require.Equal(t, 0, code, errs)
		assert.Contains(t, out, "worker range: 500-520; would become 0-499 (dry run: -apply makes the change)")
		assert.Contains(t, out, "3 live slots outside 0-499")
		for _, id := range held {
			assert.Regexp(t, fmt.Sprintf(`(?m)^%d +billing +billing@`, id), out)
		}
		code, out, _ = cli("", "range", "-dialect", b.Dialect, "-dsn", db.DSN)
		assert.Equal(t, 0, code)
		assert.Contains(t, out, "worker range: 500-520\n", "the dry run changed nothing")

		code, out, errs = cli("", "range", "-dialect", b.Dialect, "-dsn", db.DSN, "-set", "0-499", "-apply")
		require.Equal(t, 0, code, errs)
		assert.Contains(t, out, "worker range: 0-499, was 500-520")
		assert.Contains(t, out, "3 live slots outside 0-499")
		g := openGen(t, b, db, nil, entflake.WithWorkerRange(0, 499))
		assert.LessOrEqual(t, g.WorkerID(), int64(499))
		_, err := entflake.OpenDB(context.Background(), db.Open(t), b.Dialect, entflake.WithService("billing"),
			entflake.WithWorkerRange(500, 520), entflake.WithLogger(slog.New(&records{})))
		require.ErrorIs(t, err, entflake.ErrWorkerRangeMismatch)

		code, out, errs = cli("", "range", "-dialect", b.Dialect, "-dsn", db.DSN, "-set", "all", "-apply")
		require.Equal(t, 0, code, errs)
		assert.Contains(t, out, "worker range: all (0-1023), was 0-499")
		assert.Contains(t, out, "no live slot outside all (0-1023).")

		code, _, errs = cli("", "range", "-dialect", b.Dialect, "-dsn", db.DSN, "-set", "0-1024", "-apply")
		assert.Equal(t, 1, code)
		assert.Contains(t, errs, "goes past the layout's last worker id, 1023")
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-set", "5"}, `-set "5": want LO-HI`},
		{[]string{"-set", "a-b"}, `-set "a-b": want LO-HI`},
		{[]string{"-set", "0-0"}, "at least two worker ids"},
		{[]string{"-apply"}, "-apply needs -set"},
	} {
		code, out, errs := cli("", append([]string{"range", "-dialect", dialect.SQLite, "-dsn", "x.db"}, c.args...)...)
		assert.Equal(t, 2, code, "%q", c.args)
		assert.Contains(t, errs, c.want, "%q", c.args)
		assert.Empty(t, out)
	}
}

// TestWiden: widen shows the pool's state, a dry run of each step changes
// nothing, -to starts the widening (a generator of the wider layout then
// opens beside the old one), -finish is refused while the old layout
// lives and finishes once it does not, and bad input is a usage error.
func TestWiden(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		old := openGen(t, b, db, nil)
		code, out, errs := cli("", "widen", "-dialect", b.Dialect, "-dsn", db.DSN)
		require.Equal(t, 0, code, errs)
		assert.Equal(t, "pool layout: 0/10/12 2024-01-01T00:00:00.000Z\nnot widening\n"+
			"live slots of 0/10/12 2024-01-01T00:00:00.000Z: 1\n", out)

		code, out, errs = cli("", "widen", "-dialect", b.Dialect, "-dsn", db.DSN, "-to", "0/12/10")
		require.Equal(t, 0, code, errs)
		assert.Contains(t, out, "widening to: 0/12/10 2024-01-01T00:00:00.000Z\n")
		assert.Contains(t, out, "dry run: -apply makes the change\n")
		code, out, _ = cli("", "widen", "-dialect", b.Dialect, "-dsn", db.DSN)
		assert.Equal(t, 0, code)
		assert.Contains(t, out, "not widening", "the dry run changed nothing")

		code, out, errs = cli("", "widen", "-dialect", b.Dialect, "-dsn", db.DSN, "-to", "0/12/10", "-apply")
		require.Equal(t, 0, code, errs)
		assert.Contains(t, out, "widening started\n")
		// Again: the widening stands, and the output says so (issue 33).
		code, out, errs = cli("", "widen", "-dialect", b.Dialect, "-dsn", db.DSN, "-to", "0/12/10", "-apply")
		require.Equal(t, 0, code, errs)
		assert.Contains(t, out, "the pool widens to 0/12/10 2024-01-01T00:00:00.000Z already: nothing changed\n")
		assert.NotContains(t, out, "dry run")
		wideGen := openGen(t, b, db, nil, entflake.WithLayout(entflake.Layout{WorkerBits: 12, SequenceBits: 10}))
		assert.GreaterOrEqual(t, wideGen.WorkerID(), int64(1024))

		code, _, errs = cli("", "widen", "-dialect", b.Dialect, "-dsn", db.DSN, "-finish", "-apply")
		assert.Equal(t, 1, code)
		assert.Contains(t, errs, "1 slot of the old layout \"0/10/12 2024-01-01T00:00:00.000Z\" is live")
		assert.Contains(t, errs, "frees itself when it expires: the last at 20", "when a crashed instance's slot frees itself (issue 33, item 4)")
		require.NoError(t, old.Close())
		code, out, errs = cli("", "widen", "-dialect", b.Dialect, "-dsn", db.DSN, "-finish", "-apply")
		require.Equal(t, 0, code, errs)
		assert.Contains(t, out, "widening finished: the pool's layout is 0/12/10 2024-01-01T00:00:00.000Z")
		code, out, _ = cli("", "widen", "-dialect", b.Dialect, "-dsn", db.DSN)
		assert.Equal(t, 0, code)
		assert.Contains(t, out, "pool layout: 0/12/10 2024-01-01T00:00:00.000Z\nnot widening\n")
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-to", "0/12"}, "-to:"},
		{[]string{"-to", "0/12/10", "-finish"}, "give one"},
		{[]string{"-apply"}, "-apply needs -to, -finish or -cancel"},
	} {
		code, out, errs := cli("", append([]string{"widen", "-dialect", dialect.SQLite, "-dsn", "x.db"}, c.args...)...)
		assert.Equal(t, 2, code, "%q", c.args)
		assert.Contains(t, errs, c.want, "%q", c.args)
		assert.Empty(t, out)
	}
}

// adoptDDL is a plain ent project's tables as ent's migration makes them
// (users, orders with their user's id, items, and the M2M join table),
// for the adopt command.
func adoptDDL(d string) []string {
	switch d {
	case dialect.MySQL:
		return []string{
			"CREATE TABLE `users` (`id` bigint NOT NULL AUTO_INCREMENT, `name` varchar(255) NOT NULL, PRIMARY KEY (`id`), UNIQUE INDEX `name` (`name`)) CHARSET utf8mb4 COLLATE utf8mb4_bin",
			"CREATE TABLE `items` (`id` bigint NOT NULL AUTO_INCREMENT, `sku` varchar(255) NOT NULL, PRIMARY KEY (`id`)) CHARSET utf8mb4 COLLATE utf8mb4_bin",
			"CREATE TABLE `orders` (`id` bigint NOT NULL AUTO_INCREMENT, `total` bigint NOT NULL, `user_id` bigint NOT NULL, PRIMARY KEY (`id`), CONSTRAINT `orders_users_orders` FOREIGN KEY (`user_id`) REFERENCES `users` (`id`) ON DELETE NO ACTION) CHARSET utf8mb4 COLLATE utf8mb4_bin",
			"CREATE TABLE `order_items` (`order_id` bigint NOT NULL, `item_id` bigint NOT NULL, PRIMARY KEY (`order_id`, `item_id`), CONSTRAINT `order_items_order_id` FOREIGN KEY (`order_id`) REFERENCES `orders` (`id`) ON DELETE CASCADE, CONSTRAINT `order_items_item_id` FOREIGN KEY (`item_id`) REFERENCES `items` (`id`) ON DELETE CASCADE) CHARSET utf8mb4 COLLATE utf8mb4_bin",
		}
	case dialect.Postgres:
		return []string{
			`CREATE TABLE "users" ("id" bigint NOT NULL GENERATED BY DEFAULT AS IDENTITY, "name" character varying NOT NULL, PRIMARY KEY ("id"))`,
			`CREATE TABLE "items" ("id" bigint NOT NULL GENERATED BY DEFAULT AS IDENTITY, "sku" character varying NOT NULL, PRIMARY KEY ("id"))`,
			`CREATE TABLE "orders" ("id" bigint NOT NULL GENERATED BY DEFAULT AS IDENTITY, "total" bigint NOT NULL, "user_id" bigint NOT NULL, PRIMARY KEY ("id"), CONSTRAINT "orders_users_orders" FOREIGN KEY ("user_id") REFERENCES "users" ("id") ON DELETE NO ACTION)`,
			`CREATE TABLE "order_items" ("order_id" bigint NOT NULL, "item_id" bigint NOT NULL, PRIMARY KEY ("order_id", "item_id"), CONSTRAINT "order_items_order_id" FOREIGN KEY ("order_id") REFERENCES "orders" ("id") ON DELETE CASCADE, CONSTRAINT "order_items_item_id" FOREIGN KEY ("item_id") REFERENCES "items" ("id") ON DELETE CASCADE)`,
		}
	}
	return []string{
		"CREATE TABLE `users` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `name` text NOT NULL)",
		"CREATE TABLE `items` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `sku` text NOT NULL)",
		"CREATE TABLE `orders` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `total` integer NOT NULL, `user_id` integer NOT NULL, CONSTRAINT `orders_users_orders` FOREIGN KEY (`user_id`) REFERENCES `users` (`id`) ON DELETE NO ACTION)",
		"CREATE TABLE `order_items` (`order_id` integer NOT NULL, `item_id` integer NOT NULL, PRIMARY KEY (`order_id`, `item_id`), CONSTRAINT `order_items_order_id` FOREIGN KEY (`order_id`) REFERENCES `orders` (`id`) ON DELETE CASCADE, CONSTRAINT `order_items_item_id` FOREIGN KEY (`item_id`) REFERENCES `items` (`id`) ON DELETE CASCADE)",
	}
}

// seedAdopt makes the tables and fills them: 40 users, 30 items, 120
// orders with two items each.
func seedAdopt(t *testing.T, b dbtest.Backend, db *dbtest.DB) {
	t.Helper()
	for _, s := range adoptDDL(b.Dialect) {
		if b.Dialect != dialect.MySQL {
			s = strings.ReplaceAll(s, "`", `"`)
		}
		_, err := db.Exec(s)
		require.NoError(t, err, s)
	}
	var q strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&q, "INSERT INTO users (name) VALUES ('user%02d');", i)
	}
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&q, "INSERT INTO items (sku) VALUES ('sku%02d');", i)
	}
	for i := 1; i <= 120; i++ {
		fmt.Fprintf(&q, "INSERT INTO orders (total, user_id) VALUES (%d, %d);", i, i%40+1)
		fmt.Fprintf(&q, "INSERT INTO order_items (order_id, item_id) VALUES (%d, %d), (%d, %d);", i, i%30+1, i, (i+7)%30+1)
	}
	for _, s := range strings.Split(strings.TrimSuffix(q.String(), ";"), ";") {
		_, err := db.Exec(s)
		require.NoError(t, err, s)
	}
}

// count is a COUNT(*) of query.
func count(t *testing.T, db *dbtest.DB, query string) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(query).Scan(&n))
	return n
}

// firstID masks the first id line, which depends on the time.
var firstID = regexp.MustCompile(`first id the generator issues now: \d+`)

// TestAdopt: "entflake adopt" on a plain ent project's tables: the dry
// run names each id column, its numbering and largest id, and the
// statements, and changes nothing; -apply makes the change (rows, edges
// and foreign keys kept; an INSERT without an id refused); run again, it
// has nothing to change. On MariaDB and PostgreSQL its output is the one
// docs/ent.md shows.
func TestAdopt(t *testing.T) {
	doc, err := os.ReadFile("../../docs/ent.md")
	require.NoError(t, err)
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		seedAdopt(t, b, db)
		args := []string{"adopt", "-dialect", b.Dialect, "-dsn", db.DSN, "-tables", "users,orders,items"}
		code, out, errs := cli("", args...)
		require.Equal(t, 0, code, errs)
		for _, w := range []string{"users.id: ", "orders.id: ", "items.id: ", "largest id 120", "statements:", "dry run: -apply makes the change"} {
			assert.Contains(t, out, w)
		}
		if !dbtest.TiDB(t) && b.Dialect != dialect.SQLite {
			// The docs show this run's output (its first id masked).
			block := "```\n$ entflake adopt -dialect " + b.Dialect + " -dsn \"$DSN\" -tables users,orders,items\n" +
				firstID.ReplaceAllString(out, "first id the generator issues now: 390000000000000000") + "```"
			// Indented as the list item of docs/ent.md that holds it.
			block = "   " + strings.ReplaceAll(block, "\n", "\n   ")
			masked := firstID.ReplaceAllString(string(doc), "first id the generator issues now: 390000000000000000")
			assert.True(t, strings.Contains(masked, block), "docs/ent.md shows the dry run's output on %s:\n%s", b.Name, block)
		}
		insert := "INSERT INTO users (name) VALUES ('late')"
		_, err := db.Exec(insert)
		require.NoError(t, err, "the dry run changed nothing")

		args = append(args, "-apply")
		code, out, errs = cli("", args...)
		require.Equal(t, 0, code, errs)
		assert.Contains(t, out, "adopted: an INSERT without an id now fails on these tables")
		_, err = db.Exec(insert)
		require.Error(t, err, "an INSERT without an id after -apply")
		assert.Equal(t, 41, count(t, db, "SELECT COUNT(*) FROM users"))
		assert.Equal(t, 120, count(t, db, "SELECT COUNT(*) FROM orders"))
		assert.Equal(t, 240, count(t, db, "SELECT COUNT(*) FROM order_items"), "the join table's rows (a cascade would take them)")
		_, err = db.Exec("INSERT INTO orders (id, total, user_id) VALUES (999, 1, 999)")
		assert.Error(t, err, "the foreign key holds")
		code, out, errs = cli("", args...)
		require.Equal(t, 0, code, errs)
		assert.Contains(t, out, "nothing to change: no id column of users, orders, items numbers rows")
	})
}

// TestAdoptRefuses: adopt without tables, of a missing table, and of a
// table that holds an id the generator could issue: refused, naming it,
// with nothing changed.
func TestAdoptRefuses(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		seedAdopt(t, b, db)
		base := []string{"adopt", "-dialect", b.Dialect, "-dsn", db.DSN}
		code, _, errs := cli("", base...)
		assert.Equal(t, 2, code)
		assert.Contains(t, errs, "-tables is required")
		code, _, errs = cli("", append(base, "-tables", "users,nope")...)
		assert.Equal(t, 1, code)
		assert.Contains(t, errs, `no table "nope"`)
		_, err := db.Exec("INSERT INTO items (id, sku) VALUES (4611686018427387904, 'large')")
		require.NoError(t, err)
		code, out, errs := cli("", append(base, "-tables", "users,items", "-apply")...)
		assert.Equal(t, 1, code)
		assert.Empty(t, out)
		assert.Contains(t, errs, `"items" holds id 4611686018427387904, at or above`)
		_, err = db.Exec("INSERT INTO users (name) VALUES ('late')")
		require.NoError(t, err, "nothing changed")
	})
}

// TestRangeCheck (issue 33, item 6): two databases given overlapping
// ranges (0-511 and 0-600, the operator's mistake that issued 583
// duplicate IDs in 20 s) are found, with the worker ids they share, exit
// status 1; made disjoint, the check passes and names the gap. No DSN is
// shown.
func TestRangeCheck(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		eu, us := b.Fresh(t), b.Fresh(t)
		openGen(t, b, eu, nil, entflake.WithWorkerRange(0, 511))
		g := openGen(t, b, us, nil, entflake.WithWorkerRange(0, 600))
		code, out, errs := cli("", "range", "-check", "-dialect", b.Dialect, eu.DSN, us.DSN)
		require.Equal(t, 1, code, "%s%s", out, errs)
		assert.Contains(t, out, "DSN 1: layout 0/10/12 2024-01-01T00:00:00.000Z, worker range 0-511\n")
		assert.Contains(t, out, "DSN 2: layout 0/10/12 2024-01-01T00:00:00.000Z, worker range 0-600\n")
		assert.Contains(t, out, "overlap: DSN 1 and DSN 2 both hand out worker ids 0-511")
		assert.Contains(t, errs, "the worker ranges overlap (1 overlap)")
		for _, dsn := range []string{eu.DSN, us.DSN} {
			assert.NotContains(t, out+errs, dsn)
		}

		// The second region moves to 600-1023 once its instance is gone.
		require.NoError(t, g.Close())
		code, out, errs = cli("", "range", "-dialect", b.Dialect, "-dsn", us.DSN, "-set", "600-1023", "-apply")
		require.Equal(t, 0, code, "%s%s", out, errs)
		code, out, errs = cli("", "range", "-check", "-dialect", b.Dialect, eu.DSN, us.DSN)
		require.Equal(t, 0, code, "%s%s", out, errs)
		assert.Contains(t, out, "in no pool's range: 512-599\n")
		assert.Contains(t, out, "no two ranges overlap")
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-check", "-dialect", dialect.SQLite, "a.db"}, "two databases at least"},
		{[]string{"-check", "-dialect", dialect.SQLite, "-dsn", "a.db", "b.db"}, "not -dsn"},
		{[]string{"-check", "-dialect", dialect.SQLite, "-set", "0-5", "a.db", "b.db"}, "do not go together"},
	} {
		code, _, errs := cli("", append([]string{"range"}, c.args...)...)
		assert.Equal(t, 2, code, "%q", c.args)
		assert.Contains(t, errs, c.want, "%q", c.args)
	}
}

// TestHoldersProm (issue 33): holders -prom writes the pool's live slots
// and capacity by layout, as entflakeprom's PoolCollector names them, in
// Prometheus's text format: three generators of a 10-id range read 3 of
// 10 (TestReadPoolUsage reads a widening's capacity).
func TestHoldersProm(t *testing.T) {
	t.Setenv(entflake.EnvWorkerID, "")
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		db := b.Fresh(t)
		for range 3 {
			openGen(t, b, db, nil, entflake.WithWorkerRange(100, 109))
		}
		code, out, errs := cli("", "holders", "-dialect", b.Dialect, "-dsn", db.DSN, "-prom")
		require.Equal(t, 0, code, errs)
		const l = `{layout="0/10/12 2024-01-01T00:00:00.000Z"}`
		assert.Equal(t, "# HELP entflake_pool_live_slots Live slots of the pool, by the layout they are held in.\n"+
			"# TYPE entflake_pool_live_slots gauge\n"+
			"entflake_pool_live_slots"+l+" 3\n"+
			"# HELP entflake_pool_capacity_slots Worker ids the pool hands out, by layout (its worker range's, or the layout's).\n"+
			"# TYPE entflake_pool_capacity_slots gauge\n"+
			"entflake_pool_capacity_slots"+l+" 10\n", out)
	})
	code, _, errs := cli("", "holders", "-dialect", dialect.SQLite, "-dsn", "x.db", "-prom", "-json")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "-prom goes with neither -all nor -json")
}

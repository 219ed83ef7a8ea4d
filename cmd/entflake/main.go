// Command entflake is entflake's tool for operators:
//
//	go run github.com/entflake/entflake/cmd/entflake <command> [flags] [args]
//
// Commands:
//
//	decode   [-epoch T] [-layout C/W/S] [-json] [ID...]
//	         takes IDs apart: time (UTC, ms), worker id, sequence, and the
//	         clock sequence when the layout has one. IDs come from the
//	         arguments, or one a line from standard input when there are
//	         none. The epoch (RFC 3339, or Unix milliseconds) and the layout
//	         default to the library's (entflake.DefaultEpoch,
//	         entflake.DefaultLayout); both must be those of the generator
//	         that issued the IDs (a slot's layout column names them).
//	holders  -dialect D -dsn DSN [-all] [-json] [-timeout 10s]
//	         shows sys_sequence_slot: who holds which worker id, whether the
//	         slot is live, expired or released (judged on the database's
//	         clock), when it expires, and how far its IDs may go. Released
//	         slots are shown with -all. It only reads.
//	adopt    -dialect D -dsn DSN -tables T1,T2 [-epoch T] [-apply]
//	         makes the id columns of an existing ent project's tables the
//	         SnowflakeID mixin's: AUTO_INCREMENT, IDENTITY (or serial) or
//	         SQLite's rowid alias dropped, rows and foreign keys kept. It
//	         names each column, its largest id, and the statements; -apply
//	         runs them. A table holding an id at or above the first ID the
//	         generator issues now (the -epoch, the library's by default) is
//	         refused. Within ent's migration, entflake.Adopt does the same.
//	ddl      -dialect D [-upgrade]
//	         prints the idempotent DDL of entflake's tables and the counter's
//	         row, for migration files (Atlas versioned migrations).
//
// Dialects are ent's: mysql (MySQL, MariaDB), postgres, sqlite3. DSNs are
// those of go-sql-driver/mysql, pgx (a URL or key=value string) and
// modernc.org/sqlite (a file path or file: URI; the file must exist).
//
// The exit code is 2 for a usage error (a bad flag, dialect, layout or
// epoch), 1 when the work failed (a bad ID, a database that cannot be
// reached or lacks the table), 0 otherwise.
package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"entgo.io/ent/dialect"
	_ "github.com/go-sql-driver/mysql" // registers "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	_ "modernc.org/sqlite"             // registers "sqlite"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/internal/lease"
	"github.com/entflake/entflake/internal/redact"
	"github.com/entflake/entflake/schema"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // the work failed
	exitUsage = 2 // the command line is wrong
)

const usage = `usage: entflake <command> [flags] [args]

commands:
  decode   [-epoch T] [-layout C/W/S] [-json] [ID...]   take IDs apart (IDs from stdin when none given)
  holders  -dialect D -dsn DSN [-all] [-json|-prom]    show who holds which worker id (-prom: how full the pool is)
  range    -dialect D -dsn DSN [-set LO-HI|all [-apply]]  show or change the pool's worker range
  range    -check -dialect D DSN DSN...                 check that databases' worker ranges are disjoint
  widen    -dialect D -dsn DSN [-to C/W/S|-finish|-cancel [-apply]]  widen the worker field online
  adopt    -dialect D -dsn DSN -tables T1,T2 [-apply]  drop AUTO_INCREMENT/IDENTITY from existing id columns
  ddl      -dialect D [-upgrade]                       print the DDL of entflake's tables (-upgrade: what brings older tables to it)

dialects: mysql (MySQL, MariaDB), postgres, sqlite3
"entflake <command> -h" shows a command's flags.
`

// usageError is a mistake on the command line (exit 2).
type usageError struct{ error }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "decode":
		err = decode(rest, stdin, stdout, stderr)
	case "holders":
		err = holders(rest, stdout, stderr)
	case "range":
		err = workerRange(rest, stdout, stderr)
	case "widen":
		err = widen(rest, stdout, stderr)
	case "adopt":
		err = adoptCmd(rest, stdout, stderr)
	case "ddl":
		err = ddl(rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "entflake: unknown command %q\n%s", cmd, usage)
		return exitUsage
	}
	// A driver's or a server's answer can echo the -dsn's password (a
	// misspelt scheme reaches PostgreSQL as a setting's name): no message
	// shows it.
	err = redact.Error(err)
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errFlags): // the flag package has said why
		return exitUsage
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "entflake %s: %v\n", args[0], err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "entflake %s: %v\n", args[0], err)
	return exitFail
}

// errFlags: the flag package rejected the arguments and printed why.
var errFlags = errors.New("bad flags")

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errFlags
	}
	return nil
}

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// dbFlags defines -dialect and -dsn, which every command that reads the
// database takes.
func dbFlags(fs *flag.FlagSet) (d, dsn *string) {
	d = fs.String("dialect", "", "mysql (MySQL, MariaDB), postgres or sqlite3")
	dsn = fs.String("dsn", "", "the database: a go-sql-driver/mysql DSN, a pgx URL, or a SQLite file")
	return d, dsn
}

// dbCommand is a command that reads the database: its flag set, with
// -dialect, -dsn and -timeout defined, which parse checks and connect
// uses.
type dbCommand struct {
	*flag.FlagSet
	dialect, dsn *string
	timeout      *time.Duration
}

// newDBCommand is the command name (entflake holders) writing its usage
// to stderr, whose -timeout (default timeout) bounds what usage says.
func newDBCommand(name string, stderr io.Writer, timeout time.Duration, usage string) *dbCommand {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &dbCommand{FlagSet: fs}
	c.dialect, c.dsn = dbFlags(fs)
	c.timeout = fs.Duration("timeout", timeout, usage)
	return c
}

// parse parses args, which must be flags only, and checks them (check).
func (c *dbCommand) parse(args []string) error {
	if err := parse(c.FlagSet, args); err != nil {
		return err
	}
	return c.check()
}

// check refuses arguments after the flags, and checks -dialect, -dsn and
// -timeout.
func (c *dbCommand) check() error {
	if c.NArg() > 0 {
		return usagef("unexpected arguments %q", c.Args())
	}
	return checkDBFlags(*c.dialect, *c.dsn, *c.timeout)
}

// connect opens -dsn within -timeout, which ctx then bounds; release
// closes the database and cancels ctx.
func (c *dbCommand) connect() (ctx context.Context, db *sql.DB, release func(), err error) {
	ctx, cancel := context.WithTimeout(context.Background(), *c.timeout)
	if db, err = open(ctx, *c.dialect, *c.dsn); err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, db, func() { db.Close(); cancel() }, nil
}

// checkDBFlags checks -dialect, -dsn and -timeout.
func checkDBFlags(d, dsn string, timeout time.Duration) error {
	if err := dialectFlag(d); err != nil {
		return err
	}
	if dsn == "" {
		return usagef("-dsn is required")
	}
	if timeout <= 0 {
		return usagef("-timeout %v: must be positive", timeout)
	}
	return nil
}

// dialectFlag checks -dialect.
func dialectFlag(d string) error {
	if err := schema.CheckDialect(d); err != nil {
		return usagef("-dialect: %w", err)
	}
	return nil
}

// ---- ddl

func ddl(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("entflake ddl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	d := fs.String("dialect", "", "mysql (MySQL, MariaDB), postgres or sqlite3")
	upgrade := fs.Bool("upgrade", false, "print instead what brings tables made by an earlier entflake to this one's")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	if err := dialectFlag(*d); err != nil {
		return err
	}
	if *upgrade {
		return schema.WriteUpgrade(stdout, *d)
	}
	return schema.WriteDDL(stdout, *d)
}

// ---- decode

// futureMargin is how far after now an ID's time may be before decode
// calls it a mistake: a generator issues ahead of its clock only by its
// burst lead, far less than this, so a time further ahead means the epoch or
// the layout is not the issuer's.
const futureMargin = 24 * time.Hour

// decoded is one ID taken apart, as -json writes it. The ID is a string,
// which JSON readers that hold numbers as doubles keep exact.
type decoded struct {
	ID       string `json:"id"`
	Time     string `json:"time"`
	WorkerID int64  `json:"worker_id"`
	Sequence int64  `json:"sequence"`
	ClockSeq *int64 `json:"clock_seq,omitempty"`
}

func decode(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("entflake decode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	epochFlag := fs.String("epoch", entflake.DefaultEpoch.Format(time.RFC3339),
		"the issuer's epoch: RFC 3339 (2024-01-01T00:00:00Z) or Unix milliseconds")
	def := entflake.DefaultLayout
	layoutFlag := fs.String("layout", fmt.Sprintf("%d/%d/%d", def.ClockSeqBits, def.WorkerBits, def.SequenceBits),
		"the issuer's layout: clock-sequence/worker/sequence bits, adding up to 22")
	asJSON := fs.Bool("json", false, "one JSON object a line instead of a table")
	if err := parse(fs, args); err != nil {
		return err
	}
	epoch, err := parseEpoch(*epochFlag)
	if err != nil {
		return usagef("-epoch %q: %w", *epochFlag, err)
	}
	layout, err := parseLayout(*layoutFlag)
	if err != nil {
		return usagef("-layout %q: %w", *layoutFlag, err)
	}

	var out func(decoded) error
	var flush func() error
	if *asJSON {
		enc := json.NewEncoder(stdout)
		out, flush = func(d decoded) error { return enc.Encode(d) }, func() error { return nil }
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		head := "ID\tTIME (UTC)\tWORKER\tSEQUENCE"
		if layout.ClockSeqBits > 0 {
			head += "\tCLOCK SEQ"
		}
		headed := false // no header over an empty table
		out = func(d decoded) error {
			if !headed {
				headed = true
				fmt.Fprintln(tw, head)
			}
			line := fmt.Sprintf("%s\t%s\t%d\t%d", d.ID, d.Time, d.WorkerID, d.Sequence)
			if d.ClockSeq != nil {
				line += fmt.Sprintf("\t%d", *d.ClockSeq)
			}
			_, err := fmt.Fprintln(tw, line)
			return err
		}
		flush = tw.Flush
	}

	// Every ID is tried; each bad one is named on stderr, and the command
	// fails at the end if any was bad.
	var bad int
	one := func(s string) error {
		d, err := decodeOne(s, layout, epoch)
		if err != nil {
			bad++
			fmt.Fprintf(stderr, "entflake decode: %v\n", err)
			return nil
		}
		return out(d)
	}
	if fs.NArg() > 0 {
		for _, a := range fs.Args() {
			if err := one(a); err != nil {
				return err
			}
		}
	} else {
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			if s := strings.TrimSpace(sc.Text()); s != "" {
				if err := one(s); err != nil {
					return err
				}
			}
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("read standard input: %w", err)
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if bad > 0 {
		return fmt.Errorf("%d of the IDs could not be decoded", bad)
	}
	return nil
}

func decodeOne(s string, layout entflake.Layout, epoch time.Time) (decoded, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return decoded{}, fmt.Errorf("ID %q: out of range: an ID is at most %d", s, int64(1<<63-1))
		}
		return decoded{}, fmt.Errorf("ID %q: not a decimal integer", s)
	}
	if id == 0 {
		return decoded{}, fmt.Errorf("ID %q: zero is no generated ID (an unset field?)", s)
	}
	p, err := entflake.Decode(id, layout, epoch)
	if err != nil {
		return decoded{}, fmt.Errorf("ID %q: %w", s, err)
	}
	if ahead := time.Until(p.Time); ahead > futureMargin {
		return decoded{}, fmt.Errorf("ID %q: its time %s is %s in the future: not the issuer's -epoch or -layout?",
			s, p.Time.Format(millisUTC), ahead.Round(time.Hour))
	}
	d := decoded{ID: s, Time: p.Time.Format(millisUTC), WorkerID: p.WorkerID, Sequence: p.Sequence}
	if layout.ClockSeqBits > 0 {
		d.ClockSeq = &p.ClockSeq
	}
	return d, nil
}

// millisUTC formats a time to the millisecond in UTC, as the library logs it.
const millisUTC = "2006-01-02T15:04:05.000Z"

// parseEpoch reads an epoch: RFC 3339, or Unix milliseconds.
func parseEpoch(s string) (time.Time, error) {
	var t time.Time
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		t = time.UnixMilli(ms).UTC()
	} else if t, err = time.Parse(time.RFC3339Nano, s); err != nil {
		return time.Time{}, fmt.Errorf("%w: want RFC 3339 (2024-01-01T00:00:00Z) or Unix milliseconds", entflake.ErrInvalidEpoch)
	}
	switch {
	case t.UnixMilli() < 0:
		return time.Time{}, fmt.Errorf("%w: %s is before 1970", entflake.ErrInvalidEpoch, t.Format(time.RFC3339))
	case t.After(time.Now()):
		return time.Time{}, fmt.Errorf("%w: %s is in the future", entflake.ErrInvalidEpoch, t.Format(time.RFC3339))
	}
	return t, nil
}

// parseLayout reads "c/w/s" and checks it with the library's own rule.
func parseLayout(s string) (entflake.Layout, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return entflake.Layout{}, fmt.Errorf("%w: want clock-sequence/worker/sequence bits, such as 0/10/12",
			entflake.ErrInvalidLayout)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil {
			return entflake.Layout{}, fmt.Errorf("%w: %q is not a number of bits", entflake.ErrInvalidLayout, p)
		}
		n[i] = v
	}
	l := entflake.Layout{ClockSeqBits: n[0], WorkerBits: n[1], SequenceBits: n[2]}
	return l, l.Validate()
}

// ---- holders

// holderJSON is one slot as holders -json writes it.
type holderJSON struct {
	WorkerID  int64  `json:"worker_id"`
	Service   string `json:"service"`
	Instance  string `json:"instance"`
	State     string `json:"state"`
	ExpiresMs int64  `json:"expires_ms"`
	ExpiresIn string `json:"expires_in,omitempty"`
	PromiseMs int64  `json:"promise_ms"`
	Fence     int64  `json:"fence"`
	Layout    string `json:"layout"`
	TakenAt   string `json:"taken_at"`
}

func holders(args []string, stdout, stderr io.Writer) error {
	fs := newDBCommand("entflake holders", stderr, 10*time.Second, "bound on connecting and reading")
	d := fs.dialect
	all := fs.Bool("all", false, "show released slots too")
	asJSON := fs.Bool("json", false, "one JSON object a line instead of a table")
	prom := fs.Bool("prom", false, "the pool's live slots and capacity, in Prometheus's text format (for a textfile collector)")
	if err := fs.parse(args); err != nil {
		return err
	}
	if *prom && (*all || *asJSON) {
		return usagef("-prom goes with neither -all nor -json")
	}
	ctx, db, release, err := fs.connect()
	if err != nil {
		return err
	}
	defer release()
	if *prom {
		return poolMetrics(ctx, db, *d, stdout)
	}
	now, hs, err := lease.Holders(ctx, db, *d)
	if errors.Is(err, lease.ErrNoSlotTable) {
		return fmt.Errorf("%w: no instance has leased from this database yet, or it is the wrong database", err)
	}
	if err != nil {
		return fmt.Errorf("read the slots: %w", err)
	}

	count := map[string]int{}
	var shown []lease.Holder
	for _, h := range hs {
		count[h.State(now)]++
		if *all || h.State(now) != lease.StateReleased {
			shown = append(shown, h)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, h := range shown {
			j := holderJSON{WorkerID: h.WorkerID, Service: h.Service, Instance: h.Instance, State: h.State(now),
				ExpiresMs: h.ExpiresMs, PromiseMs: h.PromiseMs, Fence: h.Fence, Layout: h.Layout, TakenAt: msTime(h.TakenMs)}
			if e := expiresIn(h, now); e != "-" {
				j.ExpiresIn = e
			}
			if err := enc.Encode(j); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tSERVICE\tINSTANCE\tSTATE\tEXPIRES IN\tIDS UP TO\tFENCE\tLAYOUT\tTAKEN AT")
	for _, h := range shown {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", h.WorkerID, dash(h.Service), dash(h.Instance),
			h.State(now), expiresIn(h, now), idsUpTo(h), h.Fence, dash(h.Layout), msTime(h.TakenMs))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	hidden := ""
	if !*all && count[lease.StateReleased] > 0 {
		hidden = " (not shown; -all shows them)"
	}
	_, err = fmt.Fprintf(stdout, "\n%s: %d live, %d expired, %d released%s. Database clock %s.\n",
		lease.Count(len(hs), "slot"), count[lease.StateLive], count[lease.StateExpired], count[lease.StateReleased], hidden, msTime(now))
	return err
}

// poolMetrics writes the pool's usage as entflakeprom's PoolCollector
// exports it, in Prometheus's text exposition format.
func poolMetrics(ctx context.Context, db *sql.DB, d string, stdout io.Writer) error {
	u, err := entflake.ReadPoolUsage(ctx, db, d)
	if err != nil {
		return fmt.Errorf("read the pool: %w", err)
	}
	caps := u.Capacities()
	layouts := make([]string, 0, len(caps)+len(u.Live))
	for l := range caps {
		layouts = append(layouts, l)
	}
	for l := range u.Live {
		if _, ok := caps[l]; !ok {
			layouts = append(layouts, l)
		}
	}
	sort.Strings(layouts)
	label := func(l string) string {
		return `{layout="` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(l) + `"}`
	}
	var b strings.Builder
	b.WriteString("# HELP entflake_pool_live_slots Live slots of the pool, by the layout they are held in.\n")
	b.WriteString("# TYPE entflake_pool_live_slots gauge\n")
	for _, l := range layouts {
		fmt.Fprintf(&b, "entflake_pool_live_slots%s %d\n", label(l), u.Live[l])
	}
	b.WriteString("# HELP entflake_pool_capacity_slots Worker ids the pool hands out, by layout (its worker range's, or the layout's).\n")
	b.WriteString("# TYPE entflake_pool_capacity_slots gauge\n")
	for _, l := range layouts {
		if n, ok := caps[l]; ok {
			fmt.Fprintf(&b, "entflake_pool_capacity_slots%s %d\n", label(l), n)
		}
	}
	_, err = io.WriteString(stdout, b.String())
	return err
}

// ---- range

func workerRange(args []string, stdout, stderr io.Writer) error {
	fs := newDBCommand("entflake range", stderr, 10*time.Second, "bound on connecting, the pool's locks, and the change")
	d := fs.dialect
	set := fs.String("set", "", `the new worker range, "LO-HI" (both included), or "all" for the whole layout`)
	apply := fs.Bool("apply", false, "with -set: make the change (without it, a dry run says what it would do)")
	check := fs.Bool("check", false, "compare the ranges of the pools whose DSNs follow (one per database of the fleet): "+
		"exit status 1 when two overlap")
	if err := parse(fs.FlagSet, args); err != nil {
		return err
	}
	if *check {
		// The DSNs follow the flags as arguments, one per database.
		return checkRanges(*d, *fs.dsn, *set, fs.Args(), *fs.timeout, stdout)
	}
	if err := fs.check(); err != nil {
		return err
	}
	if *apply && *set == "" {
		return usagef("-apply needs -set")
	}
	var lo, hi int64
	if *set != "" && *set != "all" {
		a, b, ok := strings.Cut(*set, "-")
		var errA, errB error
		lo, errA = strconv.ParseInt(a, 10, 64)
		hi, errB = strconv.ParseInt(b, 10, 64)
		if !ok || errA != nil || errB != nil {
			return usagef("-set %q: want LO-HI, two decimal worker ids (0-511), or all", *set)
		}
		if lo == 0 && hi == 0 {
			return usagef("-set %q: a range holds at least two worker ids", *set)
		}
	}
	ctx, db, release, err := fs.connect()
	if err != nil {
		return err
	}
	defer release()
	c, err := lease.SetRange(ctx, db, *d, lo, hi, *set == "", *apply)
	if err != nil {
		return err
	}
	show := func(rng string) string {
		if rng == "" {
			return fmt.Sprintf("all (0-%d)", c.Workers-1)
		}
		return rng
	}
	fmt.Fprintf(stdout, "layout %s, %d worker ids\n", c.Layout, c.Workers)
	switch {
	case *set == "":
		fmt.Fprintf(stdout, "worker range: %s\n", show(c.From))
	case c.From == c.To:
		fmt.Fprintf(stdout, "worker range: %s already; nothing to change\n", show(c.From))
	case c.Applied:
		fmt.Fprintf(stdout, "worker range: %s, was %s\n", show(c.To), show(c.From))
	default:
		fmt.Fprintf(stdout, "worker range: %s; would become %s (dry run: -apply makes the change)\n", show(c.From), show(c.To))
	}
	if len(c.Outside) == 0 {
		fmt.Fprintf(stdout, "no live slot outside %s.\n", show(c.To))
		return nil
	}
	fmt.Fprintf(stdout, "\n%d live slots outside %s: their holders issue under these worker ids until they stop, "+
		"and no other pool may hand them out before then:\n", len(c.Outside), show(c.To))
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tSERVICE\tINSTANCE\tEXPIRES IN\tLAYOUT")
	for _, h := range c.Outside {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", h.WorkerID, dash(h.Service), dash(h.Instance), expiresIn(h, c.NowMs), dash(h.Layout))
	}
	return tw.Flush()
}

// checkRanges is range -check: every pool's recorded range, read under
// its locks (a dry run of SetRange), compared. DSNs are named by their
// place on the command line, never shown: they may hold a password.
func checkRanges(d, dsn, set string, dsns []string, timeout time.Duration, stdout io.Writer) error {
	switch {
	case dsn != "":
		return usagef("-check takes the DSNs as arguments, one per database, not -dsn")
	case set != "":
		return usagef("-check and -set do not go together")
	case len(dsns) < 2:
		return usagef("-check needs the DSNs of two databases at least, as arguments")
	}
	if err := checkDBFlags(d, dsns[0], timeout); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pools := make([]lease.PoolRange, len(dsns))
	for i, dsn := range dsns {
		db, err := open(ctx, d, dsn)
		if err != nil {
			return fmt.Errorf("DSN %d: %w", i+1, err)
		}
		pools[i], err = lease.SetRange(ctx, db, d, 0, 0, true, false)
		db.Close()
		if err != nil {
			return fmt.Errorf("DSN %d: %w", i+1, err)
		}
		rng := pools[i].From
		if rng == "" {
			rng = fmt.Sprintf("all (0-%d)", pools[i].Workers-1)
		}
		fmt.Fprintf(stdout, "DSN %d: layout %s, worker range %s\n", i+1, pools[i].Layout, rng)
	}
	layout, overlaps, gaps, err := lease.CheckRanges(pools)
	if err != nil {
		return err
	}
	for _, p := range pools {
		if p.Layout != layout {
			fmt.Fprintf(stdout, "compared in %s, the widest: a range of W bits issues the IDs of its worker ids times 2^d in W+d\n", layout)
			break
		}
	}
	for _, g := range gaps {
		fmt.Fprintf(stdout, "in no pool's range: %d-%d\n", g.Lo, g.Hi)
	}
	for _, o := range overlaps {
		fmt.Fprintf(stdout, "overlap: DSN %d and DSN %d both hand out worker ids %d-%d: their IDs can be equal; "+
			"make the ranges disjoint (entflake range -set)\n", o.A+1, o.B+1, o.Lo, o.Hi)
	}
	if len(overlaps) > 0 {
		return fmt.Errorf("the worker ranges overlap (%s); the check sees only the databases named", lease.Count(len(overlaps), "overlap"))
	}
	fmt.Fprintln(stdout, "no two ranges overlap (the check sees only the databases named)")
	return nil
}

// ---- widen

func widen(args []string, stdout, stderr io.Writer) error {
	fs := newDBCommand("entflake widen", stderr, 10*time.Second, "bound on connecting, the pool's locks, and the change")
	d := fs.dialect
	to := fs.String("to", "", "start widening to this layout, clock-sequence/worker/sequence bits (0/12/10)")
	finish := fs.Bool("finish", false, "finish the widening: the wider layout becomes the pool's (once no old instance is live)")
	cancelW := fs.Bool("cancel", false, "cancel the widening: the old layout stays the pool's (while no new instance is live)")
	apply := fs.Bool("apply", false, "make the change (without it, a dry run says what it would do)")
	if err := fs.parse(args); err != nil {
		return err
	}
	steps := 0
	for _, b := range []bool{*to != "", *finish, *cancelW} {
		if b {
			steps++
		}
	}
	if steps > 1 {
		return usagef("-to, -finish and -cancel are steps of their own: give one")
	}
	if *apply && steps == 0 {
		return usagef("-apply needs -to, -finish or -cancel")
	}
	var layout entflake.Layout
	if *to != "" {
		var err error
		if layout, err = parseLayout(*to); err != nil {
			return usagef("-to: %w", err)
		}
	}
	ctx, db, release, err := fs.connect()
	if err != nil {
		return err
	}
	defer release()
	var (
		w    entflake.Widening
		done string
	)
	switch {
	case *to != "":
		w, err = entflake.StartWidening(ctx, db, *d, layout, *apply)
		done = "widening started"
	case *finish:
		w, err = entflake.FinishWidening(ctx, db, *d, *apply)
		done = "widening finished: the pool's layout is " + w.To + "; the old layout is refused from now on"
	case *cancelW:
		w, err = entflake.CancelWidening(ctx, db, *d, *apply)
		done = "widening cancelled: the pool's layout stays " + w.From
	default:
		w, err = entflake.WideningStatus(ctx, db, *d)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "pool layout: %s\n", w.From)
	if w.To != "" {
		fmt.Fprintf(stdout, "widening to: %s\n", w.To)
	} else {
		fmt.Fprintln(stdout, "not widening")
	}
	layouts := make([]string, 0, len(w.Live))
	for l := range w.Live {
		layouts = append(layouts, l)
	}
	sort.Strings(layouts)
	if len(layouts) == 0 {
		fmt.Fprintln(stdout, "live slots: none")
	}
	for _, l := range layouts {
		fmt.Fprintf(stdout, "live slots of %s: %d\n", l, w.Live[l])
	}
	if w.To != "" && len(w.Shared) > 0 {
		ids := make([]string, len(w.Shared))
		for i, id := range w.Shared {
			ids[i] = strconv.FormatInt(id, 10)
		}
		fmt.Fprintf(stdout, "old worker ids live whose IDs the new layout shares (their new worker ids wait for them): %s\n",
			strings.Join(ids, ", "))
	}
	switch {
	case steps == 0:
	case w.Applied:
		fmt.Fprintln(stdout, done)
	case *apply && *to != "":
		// StartWidening applies nothing, and refuses nothing, only when the
		// pool widens to that layout already.
		fmt.Fprintf(stdout, "the pool widens to %s already: nothing changed\n", w.To)
	default:
		fmt.Fprintln(stdout, "dry run: -apply makes the change")
	}
	return nil
}

// idsUpTo shows how far a slot's IDs went: its promise as a time, or
// "none" when the promise is not above the epoch its layout names (a holder
// that issued nothing releases with its epoch as the promise).
func idsUpTo(h lease.Holder) string {
	if _, epoch, ok := strings.Cut(h.Layout, " "); ok {
		if t, err := time.Parse(time.RFC3339Nano, epoch); err == nil && h.PromiseMs <= t.UnixMilli() {
			return "none"
		}
	}
	return msTime(h.PromiseMs)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// msTime shows a Unix-ms column: a time, "never" for the far value of a
// slot without expiry or limit, "-" for 0.
func msTime(ms int64) string {
	switch {
	case ms == 0:
		return "-"
	case lease.Forever(ms):
		return "never"
	}
	return time.UnixMilli(ms).UTC().Format(millisUTC)
}

// expiresIn is how long a live slot stays live, to the second (rounded up,
// so that a live slot never shows 0s); "-" for the others.
func expiresIn(h lease.Holder, now int64) string {
	switch {
	case h.State(now) != lease.StateLive:
		return "-"
	case lease.Forever(h.ExpiresMs):
		return "never"
	}
	left := time.Duration(h.ExpiresMs-now) * time.Millisecond
	return (left + time.Second - 1).Truncate(time.Second).String()
}

// drivers maps ent's dialect names to the database/sql drivers the library's
// tests use.
var drivers = map[string]string{dialect.MySQL: "mysql", dialect.Postgres: "pgx", dialect.SQLite: "sqlite"}

// open connects to the database and checks that it answers. Errors name
// the driver and say what was tried, never the DSN itself (it may hold a
// password).
func open(ctx context.Context, d, dsn string) (*sql.DB, error) {
	drv := drivers[d]
	if d == dialect.SQLite {
		// Opening a file that is not there would create an empty database.
		path := sqlitePath(dsn)
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("-dsn: no SQLite database file %q: %w", path, err)
		}
	}
	db, err := sql.Open(drv, dsn)
	if err != nil {
		return nil, fmt.Errorf("-dsn: not a DSN the %s driver accepts: %w", drv, err)
	}
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to the %s database of -dsn (driver %s): %w", d, drv, err)
	}
	return db, nil
}

// adoptCmd shows, and with -apply makes, the change of an existing
// project's id columns (entflake.AdoptTables).
func adoptCmd(args []string, stdout, stderr io.Writer) error {
	fs := newDBCommand("entflake adopt", stderr, time.Minute, "bound on connecting and the change (a SQLite rebuild copies every row)")
	d := fs.dialect
	tables := fs.String("tables", "", "the tables of the types given the SnowflakeID mixin, comma-separated")
	epochFlag := fs.String("epoch", entflake.DefaultEpoch.Format(time.RFC3339),
		"the generator's epoch: RFC 3339 (2024-01-01T00:00:00Z) or Unix milliseconds")
	apply := fs.Bool("apply", false, "make the change (without it, a dry run says what it would do)")
	if err := fs.parse(args); err != nil {
		return err
	}
	var names []string
	for _, n := range strings.Split(*tables, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return usagef("-tables is required: the tables of the types given the mixin (users,orders)")
	}
	epoch, err := parseEpoch(*epochFlag)
	if err != nil {
		return usagef("-epoch %q: %w", *epochFlag, err)
	}
	ctx, db, release, err := fs.connect()
	if err != nil {
		return err
	}
	defer release()
	quiet := slog.New(slog.DiscardHandler) // this command prints what it did
	a, err := entflake.AdoptTables(ctx, db, *d, names, *apply, entflake.WithEpoch(epoch), entflake.WithLogger(quiet))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "first id the generator issues now: %d\n", a.FirstID)
	if len(a.Columns) == 0 {
		fmt.Fprintf(stdout, "nothing to change: no id column of %s numbers rows\n", strings.Join(names, ", "))
		return nil
	}
	for _, c := range a.Columns {
		fmt.Fprintf(stdout, "%s.%s: %s, largest id %d\n", c.Table, c.Column, c.Numbering, c.MaxID)
	}
	fmt.Fprintln(stdout, "statements:")
	for _, st := range a.Statements {
		fmt.Fprintf(stdout, "  %s;\n", st)
	}
	if a.Applied {
		fmt.Fprintln(stdout, "adopted: an INSERT without an id now fails on these tables")
	} else {
		fmt.Fprintln(stdout, "dry run: -apply makes the change")
	}
	return nil
}

// sqlitePath is the file a modernc.org/sqlite DSN names: the DSN itself, or
// the path of a file: URI without its query.
func sqlitePath(dsn string) string {
	p, _, _ := strings.Cut(dsn, "?")
	if rest, ok := strings.CutPrefix(p, "file:"); ok {
		if u, err := url.PathUnescape(rest); err == nil {
			return u
		}
		return rest
	}
	return p
}

package lease

import (
	"fmt"
	"reflect"
	"strings"

	"entgo.io/ent/dialect"

	"github.com/entflake/entflake/schema"
)

// Every statement the lease sends, for every dialect, is in this file. The
// tables' DDL and the pool row's seed are not: they come from package schema
// (schema.TableStatements, schema.SeedStatement), which cmd/entflake's ddl
// prints, so that tables made from its output are the lease's own.
//
// Values that come from users (service names, instance tags, layouts) are
// always bound as parameters. Numbers the lease computes itself (worker ids,
// fences, milliseconds, bounds) are formatted into the text of statements
// that have no string to bind: go-sql-driver/mysql sends such a statement in
// one round trip (COM_QUERY), where a bound one costs two (prepare, then
// execute) unless the DSN sets interpolateParams. Formatting an int64 with
// %d cannot inject anything.
//
// Liveness is decided by the database's clock, inside the statement that
// acts on it (NOW_MS below), never by a clock of the client's: a slot is
// free when its expires_ms has passed on the database's clock. Uniqueness
// does not depend on any clock: it rests on promise_ms (see package doc).
//
// Three rules hold for every statement here; each closes a class of holes
// that reviews found one by one before (and the chaos suite's statement
// matrix hunts the class):
//
//  1. A compare-and-set compares a value that never repeats over the life
//     of the pool, also across a row deleted and made again. The claim
//     compares beats, which every write moves up by one and with which a
//     row is made at the database's clock in ms times 1000 (its
//     incarnation: above the beats of any earlier version of the row,
//     unless that version was written a thousand times per millisecond of
//     its life, or the database's clock went back past its making), and
//     the promise it read, from which its floor comes. Renewals and
//     releases compare the fence and the holder's instance tag, unique to
//     one generator (service@host@pid@ms@random): a row made again has no
//     tag, and no two generators share one. The claim's check of the
//     '__layout__' row compares a text that can repeat (a change of layout
//     and back, the row deleted and made again); it only orders the claim
//     against a change of layout, which moves the beats of every slot row
//     it affects, so a claim it lets through compares a slot row that
//     nothing changed.
//  2. Missing state reads as the worst case, never as fresh. A marker row
//     ('__layout__', '__slots__') missing or unreadable beside slot rows
//     that exist is a deficit (see pool.go): rows made from then on start
//     above every promise in the table and the database's clock plus the
//     longest TTL any holder used. Only a pool without slot rows is new.
//     State kept twice and not confirmed (the layout in both marker rows:
//     the copy unreadable or naming another, so one was edited) is not
//     trusted either way: the slot rows, which carry the layout they were
//     held in, say which layout the pool has, and a take of another is a
//     change of layout, with its guard. The pool's rows are a cache of
//     what the slot rows can say: when both are lost, rows held in two
//     layouts of which one widens the other say the pool widens
//     (heldWidening), and every take checks the other layout's rows. A
//     step that ends state (a cancel, a finish) floors above what was
//     lost with it: the end of the last deletion window, above every
//     promise of a row found deleted. Only the locked take puts a lost
//     marker row back, at its worst: an operator's change (operate: a
//     range, a widening's start, finish or cancel) refuses while one is
//     lost, since writing back what it read would make a lost window
//     and count read as none, and a row made again start at 1. Nor is
//     what a try of the locked take learnt lost with its rollback (a
//     deadlock the server broke, a connection cut): the take's next try
//     starts from it (seen, in session.go), so every row deleted between
//     the two is not a new pool to it.
//  3. A fact a decision rests on is read inside the transaction that acts
//     on it, under the locks that keep it true until the write lands, or
//     re-checked by the write's own compare-and-set; no count or read
//     taken earlier decides anything later. The locked take's first count
//     of the slot rows (countRows) locks nothing: it only finds deletions
//     that happened before it. A change of layout, and a widening's
//     cross-check that finds a row missing, count the rows again under a
//     lock on every one of them (lockSlots, lockedCount in pool.go), so
//     that a live holder's row deleted in between is a deficit (rule 2),
//     not a row that was never there; a widening's finish and cancel
//     count the rows the same way (widenCensus), and judge that count
//     (settled). Claims re-check what they read by their compare-and-set
//     (rule 1).

// reservedRows are the names of the lease's own rows of sys_sequence, as
// SQL literals.
const reservedRows = "'" + schema.PoolService + "', '" + schema.LayoutService + "', '" + schema.SlotsService + "'"

// sqlText is the text of every statement for one dialect. Fields named like
// a format take the arguments listed beside them.
type sqlText struct {
	// migrateLock and migrateUnlock take and give back the lock that
	// Migrate holds around an application's migration (see migrate.go),
	// on one pinned connection; empty where no lock is needed (SQLite).
	migrateLock, migrateUnlock string
	// selectedDB answers the session's database, NULL when the DSN names
	// none (MySQL's DATABASE()): read when migrateLock answers NULL, which
	// GET_LOCK does for a NULL name.
	selectedDB string
	// exists: one bound table name; COUNT of that table, or (PostgreSQL) a
	// bool. Looking first lets a user without CREATE privilege lease from
	// existing tables: MariaDB and PostgreSQL refuse CREATE TABLE IF NOT
	// EXISTS without the privilege even when the table is there.
	exists string
	// seed puts the counter row ('__global__') in unless it is there
	// (schema.SeedStatement).
	seed string
	// holders: every slot, by worker id, and the database's clock (see
	// holdersFormat); for Holders, which the CLI shows.
	holders string
	// poolLayout: the '__layout__' row's text, read without a lock, for
	// ReadUsage: a scrape of the pool's capacity must never wait for, or
	// hold up, a take; what it reads may be overtaken at once.
	poolLayout string
	// counter: workers. Moves the '__global__' counter to its next value,
	// modulo the worker range, in one statement: the only statement that
	// touches the row every starter shares, so the critical section on it is
	// one statement long, whatever the rest of the lease does.
	counter string
	// counterDurable is counter with a durable commit, where it differs:
	// for the lifetime lease, whose worker id is the counter's value.
	counterDurable string
	// readSlot: worker id (see with). The slot (NULLs when its row does
	// not exist yet), the database clock, the pool's own rows of
	// sys_sequence ('__layout__': the layout every live slot has, and the
	// copy of the longest TTL; '__slots__': the count of slot rows made,
	// the longest TTL, the end of a window in which rows found deleted are
	// made with a floor, the copy of the layout), and on
	// MySQL the server's VERSION() (TiDB needs the locked take, see
	// claimShared). One round trip: the take decides from it whether a
	// claim can go alone.
	readSlot string
	// claim: service, instance, layout, ttl ms, promise ms, worker id,
	// beats, promise ms as read, takeover (1 or 0), promise ms, ttl ms, the
	// '__layout__' row's instance as read. The compare-and-set of a take: it
	// succeeds only if nobody wrote the row since it was read (beats, which
	// every write moves and a row made again starts above: rule 1), the
	// promise the floor was derived from is still the row's, the slot has expired
	// on the database's clock or (takeover) unconditionally, the promise is
	// at most the database's clock + TTL (the cap: see renew), and the
	// pool's layout row still says what the take read. The fence moves up
	// by one.
	//
	// The layout row is read with a shared lock (claimShared): a take that
	// changes the pool's layout locks that row exclusively (lockMarkers)
	// before it looks for live slots of another layout, so a claim either
	// committed before that look and is seen by it, or waits for the change
	// to commit and then finds the row changed and matches nothing. Two
	// layouts are never live at once, and claims of the same layout do not
	// wait for one another.
	claim string
	// claimLocked is claim without the shared lock, for a claim inside the
	// locked take, which holds the layout row exclusively already.
	claimLocked string
	// The locked take (session.locked), which sets up the pool's own rows,
	// changes its layout, and makes slot rows, one transaction that holds
	// both of the pool's rows exclusively:
	//
	// seedMarkers puts the two rows in where they are missing (tables from
	// an older entflake, or made by hand): '__layout__' with no layout,
	// '__slots__' with the count -1 (not known: counted when locked).
	seedMarkers string
	// lockMarkers reads both rows with an exclusive lock, and the database
	// clock.
	lockMarkers string
	// liveOther: layout (twice). A live slot of another layout, if any; on
	// MySQL a locking read, which sees the latest rows also where a plain
	// read would see the transaction's snapshot (TiDB takes it at BEGIN).
	liveOther string
	// layoutMax: the highest promise and expiry of the slots of each
	// layout (and of those never held, which have none). layoutMaxLocked
	// is the same as a locking read, for MySQL and MariaDB, whose locked
	// take runs REPEATABLE READ: a plain read there sees the snapshot its
	// first plain read took (countRows), and a renewal or a release that
	// committed since, which takes none of the pool's rows' locks, would be
	// missed (TiDB's locked take reads committed rows: see beginLocked).
	// PostgreSQL refuses FOR UPDATE with GROUP BY, and needs none: its
	// locked take runs READ COMMITTED; SQLite's holds the write lock.
	layoutMax, layoutMaxLocked string
	// raiseNever: promise ms (twice). Gives every slot never held (no
	// layout) a promise of at least that (see restoreLayout); beats move,
	// so that no claim read before matches.
	raiseNever string
	// convert: layout (twice), floor ms (twice), layout (five times),
	// floor ms. A layout change: every slot row takes the new layout; a row
	// of another layout takes the new layout's floor less one as its
	// promise (its time field is above every ID the old layouts can have
	// issued; the old promise, in another epoch's time frame, may read
	// higher or lower) and a new fence (no renewal of its old holder can
	// match it again), any other row a promise of at least that. MySQL
	// assigns left to right: promise_ms and fence are computed from the
	// row's old layout.
	convert string
	// writeMarker: worker id, instance, service name. Writes one of the
	// pool's rows.
	writeMarker string
	// countRows: the slot rows, and the database clock, in one statement,
	// so that a deletion the count does not see committed after the clock
	// was read.
	countRows string
	// chunkRows: from, to. The rows of a range of worker ids (one row of
	// NULL when there are none), each with the count of all slot rows, the
	// lowest promise of the slots not live (see makeRows in pool.go) and the
	// database's clock: one statement, so one snapshot.
	chunkRows string
	// makeRows: the chunk's first worker id, the promise ms, and the
	// worker ids to make as makeRange and makeList conditions joined by
	// OR. It makes
	// slot rows, none of them held (fence 0, free), skipping rows that
	// exist. A row is made with beats at the database's clock in ms times
	// 1000, its incarnation: no earlier version of the row, deleted since,
	// had that value or one above it (rule 1 below). The clock is the same
	// throughout one statement (nowMs), and is read once, in a derived
	// table of one row. The server makes the worker ids itself, as the
	// chunk's first id plus a number from 0 to 1,023 (two derived tables
	// of 32 digits, crossed: no recursive WITH, which MySQL before 8 and
	// TiDB before 5.1 lack, nor its depth limit), kept where the BETWEEN
	// of a long run of the ids asked for, or the IN of the others, holds it
	// (makeRowsText in pool.go): under 2 KB for a whole chunk and 8 KB at
	// most, where each row's values written out take 132 KB, and reading
	// that was most of what making a chunk cost TiDB (the statement for
	// which the locked take holds the pool's lock the longest: alone,
	// without its COMMIT, a quarter to a third of the time written out;
	// BenchmarkMakeRows, and bench/README.md for PostgreSQL and SQLite).
	// The WHERE keeps SQLite from reading the conflict clause's ON as the
	// join's. The MySQL family's conflict clause leaves a row
	// that exists as it was (worker_id = worker_id), and so does
	// PostgreSQL's and SQLite's DO NOTHING. Rows another instance made
	// meanwhile (one of an older version in a rolling upgrade, which does
	// not take the pool's rows' locks) are skipped, not an error: every
	// row the take asked for is there once the statement has run, and
	// makeRows counts them all as made (see it in pool.go). Only the
	// worker ids asked for are made, never the whole chunk: a row that was
	// there when makeRows read the chunk and is deleted before this
	// statement stays missing, for the next count to find (a deletion).
	makeRows string
	// makeRange: the first and the last worker id of a run of rows to
	// make; makeList: worker ids, comma-separated. Conditions of makeRows.
	makeRange, makeList string
	// makeRowsListed, makeRow (worker id, promise ms), one for each row
	// with ", " between them, and makeRowsListedEnd are MySQL's and
	// MariaDB's makeRows: every row's values written out, clock and all.
	// They take INSERT ... SELECT ... ON DUPLICATE KEY UPDATE for unsafe
	// under statement-based binary logging (note 1592, and row logging
	// under MIXED), whatever the SELECT reads, and the listed form cost
	// there little more (MariaDB, medians, 7.4 ms against 5.0). TiDB, which
	// has no statement-based binary log (its changes replicate as rows)
	// and where the listed form cost the most, takes makeRows (see
	// session.makeRowsText).
	makeRowsListed, makeRow, makeRowsListedEnd string
	// renewKeep: ttl ms, worker id, fence, instance (bound). A renewal whose
	// promise the cap refused: it keeps the slot live with its old promise.
	renewKeep string
	// candidates: size of the worker range, start, near ms, the range's
	// first and last worker ids, and a condition more (sharedFilter, or
	// ""). Up to 8 free slots of the range, those whose promise is below
	// near first, then in counter order from start, each with the
	// database's clock.
	candidates string
	// census: the range's first and last worker ids. Live slots of the
	// range, its rows, its lowest worker id without a row (NULL if none
	// past an existing one), and whether its first has one.
	census string
	// liveAny: a live slot, if any (its worker id); on MySQL a locking read,
	// as liveOther. For a change of the pool's worker range, after
	// lockSlots.
	liveAny string
	// lockSlots locks every slot row ("" on SQLite): a renewal in flight,
	// its UPDATE done and its COMMIT not, holds its row, and the look for
	// live slots that follows waits for it; no row can be deleted until the
	// transaction ends, so the rows it returns are a count that stays true
	// (lockedCount, rule 3). For a change of layout, a widening's census
	// and a change of the worker range.
	lockSlots string
	// crossRows: first and last worker id. The slot rows of a range, with
	// their expiry, promise, holder and layout and the database's clock,
	// locked ("FOR UPDATE"; SQLite's locked take holds the write lock):
	// the rows of the other layout of a widening that share a slot's IDs
	// (crossCheck in widen.go). Inside the locked take, on MySQL a locking
	// read reads the latest committed rows, and on PostgreSQL (READ
	// COMMITTED) it waits for a renewal in flight and reads the row it
	// committed.
	crossRows string
	// fenceRange: first and last worker id. Moves the fence and the beats
	// of the rows of a range that are not live: a renewal of theirs that
	// was sent before they expired, and reaches them after the statement
	// that judged them expired (its NOW is that of its start: MySQL fixes
	// it there, and a wait for the row's lock does not move it), matches
	// nothing. A widening's take fences the other layout's rows it floors
	// above, and its cancel the wider layout's (widen.go), as a change of
	// layout fences the old layout's (convert).
	fenceRange string
	// raiseBelow: a worker id (three times, in the text); promise ms
	// (twice, as arguments). Raises the promise of every row below the
	// worker id to the highest promise of the rows from it up, or to the
	// promise ms given if higher (the end of a deletion window: rows lost
	// from there up had promises below it), moving their beats (no claim
	// read before matches): a widening cancelled (widen.go). The highest
	// promise is read in a derived table, which MySQL materialises before
	// the update (it refuses a subquery on the table an UPDATE writes,
	// error 1093, but not on a derived one); COALESCE, since MySQL's
	// GREATEST and SQLite's MAX are NULL when an argument is.
	raiseBelow string
	// liveOutside: the range's first and last worker ids. The live slots
	// outside the range, as holders reads them (for SetRange).
	liveOutside string
	// readBack: worker id. The fence and holder of a slot whose claim went
	// unanswered.
	readBack string
	// holder: bound worker id. Who holds a slot, for error messages.
	holder string
	// renew: ttl ms, promise ms, worker id, fence, instance (bound),
	// promise ms, ttl ms. Keeps a live slot live and raises (never lowers)
	// its promise. It names the holder's instance as well as the fence: a
	// row deleted and made again starts at fence 0, which another holder's
	// fence may reach. A slot that has expired on the database's clock is
	// not renewed: a take may have judged it dead. Every write moves beats,
	// so that it always changes the row: go-sql-driver reports changed rows,
	// not matched ones, and a write that changed nothing would read as lost.
	//
	// The cap: no promise is acknowledged past the database's clock + the
	// holder's TTL (the claim has the same condition). A holder whose clock
	// runs ahead of the database's by more than its Margin is refused it
	// (renewKeep then keeps the slot live). So a slot row found deleted can
	// be made again with a floor of the database's clock + the longest TTL,
	// above any promise its lost holder can have had.
	renew string
	// release: promise ms, worker id, fence, instance (bound). Frees the slot now and leaves
	// the exact last issued millisecond as its promise.
	release string
	// audit: service, worker id, instance (bound; MySQL twice, for its ON
	// DUPLICATE KEY UPDATE). The service's row in sys_sequence: who started
	// last and which worker id it took.
	audit string
	// bind: readSlot takes its worker id and layout as bound parameters
	// (PostgreSQL: pgx prepares a statement once per connection and text,
	// and a text that changed with every worker id would be prepared, and
	// planned, at every call). Otherwise they are formatted into the text
	// (go-sql-driver: one round trip, not two).
	bind bool
}

// with returns a statement and its arguments: bound, or formatted into the
// text (see bind).
func (q *sqlText) with(format string, args ...any) (string, []any) {
	if q.bind {
		return format, args
	}
	return fmt.Sprintf(format, args...), nil
}

// nowMs is each dialect's database clock in Unix milliseconds. It is read
// within the statement that decides, and it stays the same throughout one
// statement on all three.
const (
	// UTC_TIMESTAMP does not depend on the session's time zone, and
	// TIMESTAMPDIFF between two zone-less values has no DST ambiguity
	// (UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) is an hour off in the hour a DST
	// zone repeats). Both are fixed for the statement, also when the binary
	// log replays it.
	mysqlNowMs = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)"
	// statement_timestamp, not now() (the transaction's start, stale inside
	// a long transaction) nor clock_timestamp() (moves within a statement).
	// EXTRACT returns numeric (PostgreSQL 14+), so FLOOR is exact.
	pgNowMs = "FLOOR(EXTRACT(EPOCH FROM statement_timestamp()) * 1000)::bigint"
	// unixepoch('subsec') needs SQLite 3.42 (modernc.org/sqlite bundles a
	// later one); 'now' is fixed for one statement. A float, so it may read
	// a millisecond low: liveness only, never uniqueness, depends on it.
	sqliteNowMs = "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
)

// Statements every dialect shares but for these, written as format
// arguments: %[1]s the Unix ms clock expression (nowMs), %[2]s the
// timestamp for updated_at (NOW() or CURRENT_TIMESTAMP), %[3]s the
// two-argument maximum (GREATEST, or SQLite's max), %[4]s the shared lock
// of the layout row in a claim (see claim), %[5]s an exclusive locking
// read's clause (FOR UPDATE, or nothing on SQLite, which runs one writer at
// a time). Their placeholders are '?'; PostgreSQL's text numbers them
// (rebind).
const (
	claimFormat = "UPDATE sys_sequence_slot SET fence = fence + 1, beats = beats + 1, service_name = ?, instance = ?, layout = ?, " +
		"taken_ms = %[1]s, expires_ms = %[1]s + ?, promise_ms = ?, updated_at = %[2]s " +
		"WHERE worker_id = ? AND beats = ? AND promise_ms = ? AND (? = 1 OR expires_ms < %[1]s) AND ? <= %[1]s + ? " +
		"AND EXISTS (SELECT 1 FROM sys_sequence WHERE service_name = '" + schema.LayoutService + "' AND instance = ?%[4]s)"
	holderFormat = "SELECT fence, service_name, instance, expires_ms, promise_ms, layout, %[1]s " +
		"FROM sys_sequence_slot WHERE worker_id = ?"
	renewFormat = "UPDATE sys_sequence_slot SET beats = beats + 1, expires_ms = %[1]s + ?, " +
		"promise_ms = %[3]s(promise_ms, ?), updated_at = %[2]s WHERE worker_id = ? AND fence = ? AND instance = ? " +
		"AND expires_ms >= %[1]s AND ? <= %[1]s + ?"
	renewKeepFormat = "UPDATE sys_sequence_slot SET beats = beats + 1, expires_ms = %[1]s + ?, updated_at = %[2]s " +
		"WHERE worker_id = ? AND fence = ? AND instance = ? AND expires_ms >= %[1]s"
	releaseFormat = "UPDATE sys_sequence_slot SET beats = beats + 1, expires_ms = 0, promise_ms = ?, updated_at = %[2]s " +
		"WHERE worker_id = ? AND fence = ? AND instance = ?"
	lockMarkersFormat = "SELECT service_name, worker_id, instance, %[1]s FROM sys_sequence " +
		"WHERE service_name IN ('" + schema.LayoutService + "', '" + schema.SlotsService + "')%[5]s"
	liveOtherFormat = "SELECT worker_id, layout FROM sys_sequence_slot WHERE (layout < ? OR layout > ?) AND expires_ms >= %[1]s " +
		"ORDER BY worker_id LIMIT 1%[5]s"
	layoutMaxFormat  = "SELECT layout, MAX(promise_ms), MAX(expires_ms) FROM sys_sequence_slot GROUP BY layout"
	raiseNeverFormat = "UPDATE sys_sequence_slot SET promise_ms = ?, beats = beats + 1, updated_at = %[2]s " +
		"WHERE layout IS NULL AND promise_ms < ?"
	convertFormat = "UPDATE sys_sequence_slot SET promise_ms = CASE WHEN layout < ? OR layout > ? THEN ? ELSE %[3]s(promise_ms, ?) END, " +
		"fence = CASE WHEN layout < ? OR layout > ? THEN fence + 1 ELSE fence END, " +
		"layout = ?, beats = beats + 1, updated_at = %[2]s WHERE layout IS NULL OR layout < ? OR layout > ? OR promise_ms < ?"
	writeMarkerFormat = "UPDATE sys_sequence SET worker_id = ?, instance = ?, updated_at = %[2]s WHERE service_name = ?"
	poolLayoutText    = "SELECT instance FROM sys_sequence WHERE service_name = '" + schema.LayoutService + "'"
	countRowsFormat   = "SELECT COUNT(*), %[1]s FROM sys_sequence_slot"
	chunkRowsFormat   = "SELECT s.worker_id, (SELECT COUNT(*) FROM sys_sequence_slot), " +
		"(SELECT MIN(promise_ms) FROM sys_sequence_slot WHERE expires_ms < %[1]s), " +
		"%[1]s FROM (SELECT 1 AS one) AS k LEFT JOIN sys_sequence_slot AS s ON s.worker_id >= %%d AND s.worker_id <= %%d"
	lockSlotsFormat  = "SELECT worker_id FROM sys_sequence_slot%[5]s"
	raiseBelowFormat = "UPDATE sys_sequence_slot SET promise_ms = %[3]s((SELECT m FROM (SELECT COALESCE(MAX(promise_ms), 0) AS m " +
		"FROM sys_sequence_slot WHERE worker_id >= %%d) AS t), ?), beats = beats + 1, updated_at = %[2]s WHERE worker_id < %%d AND promise_ms < " +
		"%[3]s((SELECT m FROM (SELECT COALESCE(MAX(promise_ms), 0) AS m FROM sys_sequence_slot WHERE worker_id >= %%d) AS t2), ?)"
	fenceRangeFormat = "UPDATE sys_sequence_slot SET fence = fence + 1, beats = beats + 1, updated_at = %[2]s " +
		"WHERE worker_id >= %%d AND worker_id <= %%d AND expires_ms < %[1]s"
	crossRowsFormat = "SELECT worker_id, expires_ms, promise_ms, instance, layout, %[1]s FROM sys_sequence_slot " +
		"WHERE worker_id >= %%d AND worker_id <= %%d ORDER BY worker_id%[5]s"
	liveAnyFormat = "SELECT worker_id FROM sys_sequence_slot WHERE expires_ms >= %[1]s ORDER BY worker_id LIMIT 1%[5]s"
	// makeRowsFormat takes the clock (%[1]s, nowMs), the timestamp, the
	// side of the square of digits (%[3]d, chunkSide), the digits' derived
	// table (%[4]s, chunkDigits) and the conflict clause; makeRows' own
	// arguments are written %%[n].
	makeRowsFormat = "INSERT INTO sys_sequence_slot (worker_id, fence, beats, taken_ms, expires_ms, promise_ms, updated_at) " +
		"SELECT ids.w, 0, c.n * 1000, 0, 0, %%[2]d, c.t FROM (SELECT %%[1]d + a.n * %[3]d + b.n AS w " +
		"FROM (%[4]s) AS a CROSS JOIN (%[4]s) AS b) AS ids CROSS JOIN (SELECT %[1]s AS n, %[2]s AS t) AS c WHERE (%%[3]s)%[5]s"
	makeRangeText = "ids.w BETWEEN %d AND %d"
	makeListText  = "ids.w IN (%s)"
	// The MySQL family's listed form (see makeRowsListed).
	mysqlMakeRowsListed    = "INSERT INTO sys_sequence_slot (worker_id, fence, beats, taken_ms, expires_ms, promise_ms, updated_at) VALUES "
	mysqlMakeRow           = "(%d, 0, " + mysqlNowMs + " * 1000, 0, 0, %d, NOW())"
	mysqlMakeRowsListedEnd = " ON DUPLICATE KEY UPDATE worker_id = worker_id"
)

// chunkSide is the side of the square of digits from which makeRows makes
// a chunk's worker ids: chunkSide * chunkSide is chunkRows.
const chunkSide = 32

// chunkDigits is a derived table of the digits 0 to chunkSide-1, as n:
// a VALUES table, with values (PostgreSQL and SQLite, where its column is
// column1), else a UNION ALL of one-row SELECTs (the MySQL family: TiDB
// has no VALUES table). PostgreSQL plans the UNION ALL's 32 arms, twice,
// in 0.7 ms, the VALUES table in 0.1 (EXPLAIN ANALYZE on PostgreSQL 15,
// with 4 ms to run either).
func chunkDigits(values bool) string {
	var b strings.Builder
	if values {
		b.WriteString("SELECT column1 AS n FROM (VALUES (0)")
		for d := 1; d < chunkSide; d++ {
			fmt.Fprintf(&b, ", (%d)", d)
		}
		b.WriteString(") AS v")
		return b.String()
	}
	b.WriteString("SELECT 0 AS n")
	for d := 1; d < chunkSide; d++ {
		fmt.Fprintf(&b, " UNION ALL SELECT %d", d)
	}
	return b.String()
}

// seedMarkersFormat is seedMarkers without its conflict clause (%[3]s)
// and with the timestamp (%[2]s). The count -1 means "not known yet": the
// first locked take counts the rows there are.
const seedMarkersFormat = "INSERT INTO sys_sequence (service_name, worker_id, instance, updated_at) VALUES " +
	"('" + schema.LayoutService + "', 0, NULL, %[2]s), ('" + schema.SlotsService + "', -1, NULL, %[2]s) %[1]s"

// shared fills in the statements every dialect shares; valuesTable says
// that the dialect has VALUES tables, for makeRows' digits (chunkDigits).
func (q *sqlText) shared(nowMs, ts, greatest, shareLock, forUpdate, conflictNothing, makeRowsEnd string, numbered, valuesTable bool) {
	f := func(format string) string {
		s := fmt.Sprintf(format, nowMs, ts, greatest, shareLock, forUpdate)
		if numbered {
			s = rebind(s)
		}
		return s
	}
	q.claim, q.claimLocked = f(claimFormat), f(strings.Replace(claimFormat, "%[4]s", "", 1))
	q.holder, q.renew, q.renewKeep, q.release = f(holderFormat), f(renewFormat), f(renewKeepFormat), f(releaseFormat)
	q.lockMarkers, q.liveOther, q.layoutMax, q.convert = f(lockMarkersFormat), f(liveOtherFormat), layoutMaxFormat, f(convertFormat)
	q.layoutMaxLocked, q.raiseNever = layoutMaxFormat, f(raiseNeverFormat)
	if forUpdate != "" && !numbered {
		q.layoutMaxLocked = layoutMaxFormat + forUpdate // MySQL's (see layoutMax)
	}
	q.writeMarker, q.countRows, q.chunkRows = f(writeMarkerFormat), f(countRowsFormat), f(chunkRowsFormat)
	q.poolLayout = poolLayoutText
	q.liveAny, q.crossRows, q.raiseBelow, q.fenceRange = f(liveAnyFormat), f(crossRowsFormat), f(raiseBelowFormat), f(fenceRangeFormat)
	if forUpdate != "" {
		q.lockSlots = f(lockSlotsFormat)
	}
	q.makeRows = fmt.Sprintf(makeRowsFormat, nowMs, ts, chunkSide, chunkDigits(valuesTable), makeRowsEnd)
	q.makeRange, q.makeList = makeRangeText, makeListText
	q.seedMarkers = fmt.Sprintf(seedMarkersFormat, conflictNothing, ts)
	q.readBack = readBack
}

// rebind numbers a statement's placeholders for PostgreSQL: the n-th '?'
// becomes $n. The statements it is used on have no '?' inside a string.
func rebind(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// readBack is the same on every dialect.
const readBack = "SELECT fence, instance FROM sys_sequence_slot WHERE worker_id = %d"

// readSlotFormat, candidatesFormat and censusFormat are shared: their only
// differences are the clock expression and the placeholders, and they have
// no placeholders.
const (
	// Its arguments: the clock, the worker id's placeholder (text for
	// MySQL and SQLite, bound for PostgreSQL), and the server's version
	// (MySQL) or an empty string.
	readSlotFormat = "SELECT s.fence, s.beats, s.expires_ms, s.promise_ms, s.service_name, s.instance, s.layout, k.now_ms, " +
		"l.service_name, l.instance, l.worker_id, m.service_name, m.worker_id, m.instance, %[3]s " +
		"FROM (SELECT %[2]s AS worker_id, %[1]s AS now_ms) AS k " +
		"LEFT JOIN sys_sequence_slot AS s ON s.worker_id = k.worker_id " +
		"LEFT JOIN sys_sequence AS l ON l.service_name = '" + schema.LayoutService + "' " +
		"LEFT JOIN sys_sequence AS m ON m.service_name = '" + schema.SlotsService + "'"
	candidatesFormat = "SELECT worker_id, fence, beats, promise_ms, %[1]s FROM sys_sequence_slot " +
		"WHERE worker_id >= %%[4]d AND worker_id <= %%[5]d AND expires_ms < %[1]s%%[6]s " +
		"ORDER BY CASE WHEN promise_ms < %%[3]d THEN 0 ELSE 1 END, (worker_id + %%[1]d - %%[2]d) %%%% %%[1]d LIMIT 8"
	censusFormat = "SELECT " +
		"(SELECT COUNT(*) FROM sys_sequence_slot WHERE worker_id >= %%[1]d AND worker_id <= %%[2]d AND expires_ms >= %s), " +
		"(SELECT COUNT(*) FROM sys_sequence_slot WHERE worker_id >= %%[1]d AND worker_id <= %%[2]d), " +
		"(SELECT MIN(a.worker_id + 1) FROM sys_sequence_slot AS a WHERE a.worker_id >= %%[1]d AND a.worker_id + 1 <= %%[2]d " +
		"AND NOT EXISTS (SELECT 1 FROM sys_sequence_slot AS b WHERE b.worker_id = a.worker_id + 1)), " +
		"(SELECT COUNT(*) FROM sys_sequence_slot WHERE worker_id = %%[1]d)"
)

// holdersFormat reads every slot with the database's clock (%s), for
// Holders. The clock is a one-row derived table joined to every slot: each
// dialect's clock expression is fixed for the duration of one statement
// (see nowMs), so every row is judged against the same instant, and the
// LEFT JOIN still returns the clock (with NULL slot columns) when the table
// is empty. It reads with the session's default isolation and locks
// nothing: a snapshot for display, which a take may overtake at once.
const holdersFormat = "SELECT s.worker_id, s.service_name, s.instance, s.fence, s.taken_ms, s.expires_ms, s.promise_ms, s.layout, k.now_ms " +
	"FROM (SELECT %s AS now_ms) AS k LEFT JOIN sys_sequence_slot AS s ON 1 = 1 ORDER BY s.worker_id"

// liveOutsideFormat is holdersFormat for the live slots outside a range
// (%%d twice: its first and last worker ids), read in SetRange's
// transaction after its lock of every slot row: on MySQL as a locking
// read, which reads the latest committed rows where a plain one would
// read the transaction's snapshot (%[2]s).
const liveOutsideFormat = "SELECT s.worker_id, s.service_name, s.instance, s.fence, s.taken_ms, s.expires_ms, s.promise_ms, s.layout, k.now_ms " +
	"FROM (SELECT %[1]s AS now_ms) AS k JOIN sys_sequence_slot AS s ON s.expires_ms >= k.now_ms " +
	"AND (s.worker_id < %%d OR s.worker_id > %%d) ORDER BY s.worker_id%[2]s"

// MySQL and MariaDB. Tested on MariaDB 10.11; nothing here is missing from
// MySQL 5.7 or 8.x. No statement needs READ COMMITTED, which the server
// refuses for writes under binlog_format=STATEMENT (error 1665): each runs
// on its own (autocommit), or in a transaction of the session's default
// isolation.
var mysqlText = func() sqlText {
	q := sqlText{
		// information_schema lists only tables the user has some privilege on,
		// which a user allowed to lease has. DATABASE() is the DSN's database.
		exists: "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
		seed:   seed(dialect.MySQL),
		// GET_LOCK names are the server's, not a database's: the name carries
		// DATABASE(), so that applications on other databases of the server
		// do not wait for each other. The timeout is a year (MariaDB 10.11
		// answers NULL to a negative one, which MySQL takes as for ever): the
		// caller's context bounds the wait, and ending it closes the
		// connection, which frees a lock it held. 1 is
		// "got it"; the lock is the session's, freed when the connection
		// closes too. TiDB answers some callers 1105 "pessimistic lock retry
		// limit reached" under contention instead of waiting (Migrate retries).
		migrateLock:   "SELECT GET_LOCK(CONCAT('entflake_migrate:', DATABASE()), 31536000)",
		migrateUnlock: "SELECT RELEASE_LOCK(CONCAT('entflake_migrate:', DATABASE()))",
		selectedDB:    "SELECT DATABASE()",
		// LAST_INSERT_ID(expr) returns expr and stores it in the session; the
		// server also sends it in the statement's OK packet, where
		// go-sql-driver's Result.LastInsertId reads it: one round trip, no
		// second statement on the same connection (measured 64 of 64 distinct
		// under 64 concurrent starters on MariaDB). InnoDB holds the row's lock
		// while it computes the new value, so concurrent starters queue and
		// each sees the previous one's result. The row always changes (the
		// value moves), so "changed rows" tells whether it matched. TiDB's OK
		// packet has differed from MySQL's for some statements
		// (pingcap/tidb#55965): tidb/run runs the counter's tests there (64
		// concurrent takes distinct, the wrap to 0 read from the OK packet).
		// TiDB runs this autocommit UPDATE optimistically, and
		// innodb_lock_wait_timeout does not bound its wait for a locked row
		// (TestAutocommitLockWait): there the take's context ends the wait, on
		// the client, and the abandoned UPDATE may still move the counter.
		counter: "UPDATE sys_sequence SET worker_id = LAST_INSERT_ID((worker_id + 1) %% %d), updated_at = NOW() " +
			"WHERE service_name = '__global__'",
		readSlot:   fmt.Sprintf(readSlotFormat, mysqlNowMs, "%d", "VERSION()"),
		candidates: fmt.Sprintf(candidatesFormat, mysqlNowMs),
		census:     fmt.Sprintf(censusFormat, mysqlNowMs),
		holders:    fmt.Sprintf(holdersFormat, mysqlNowMs),
		// FOR UPDATE: see liveOutsideFormat.
		liveOutside: fmt.Sprintf(liveOutsideFormat, mysqlNowMs, " FOR UPDATE"),
		// The audit row records the worker id actually handed out (the Java
		// allocator wrote a constant 0 here). The key met is the one the
		// server compares equal under the column's collation: PAD SPACE
		// (utf8mb4_bin included) ignores trailing spaces, a _ci collation
		// (a table another tool made) case. So the update leaves the
		// lease's own rows as they are, by the server's own comparison of
		// the row it met (IN compares under that collation too), whatever
		// a name schema.ValidateService let through.
		audit: "INSERT INTO sys_sequence (service_name, worker_id, instance, updated_at) VALUES (?, ?, ?, NOW()) " +
			"ON DUPLICATE KEY UPDATE worker_id = IF(service_name IN (" + reservedRows + "), worker_id, ?), " +
			"instance = IF(service_name IN (" + reservedRows + "), instance, ?), " +
			"updated_at = IF(service_name IN (" + reservedRows + "), updated_at, NOW())",
	}
	// MySQL evaluates WHERE on the row as it was, and SET left to right; no
	// assignment of claim reads a column another one wrote. A subquery may
	// read another table with a locking clause (checked on MariaDB 10.11:
	// a claim whose LOCK IN SHARE MODE meets a locked take's exclusive lock
	// waits for its commit, then reads the row as committed and matches
	// nothing; a locked take's FOR UPDATE waits for a claim that holds the
	// share lock, and then sees its slot). TiDB refuses LOCK IN SHARE MODE
	// (error 1235, "noop implementation"), and does not lock what a subquery
	// of an autocommit UPDATE reads even with FOR UPDATE (checked on the
	// TiDB that tidb/run builds): there every claim runs as a locked take
	// (session.conforms), which costs it three more round trips.
	q.shared(mysqlNowMs, "NOW()", "GREATEST", " LOCK IN SHARE MODE", " FOR UPDATE",
		"ON DUPLICATE KEY UPDATE service_name = service_name", mysqlMakeRowsListedEnd, false, false)
	q.makeRowsListed, q.makeRow, q.makeRowsListedEnd = mysqlMakeRowsListed, mysqlMakeRow, mysqlMakeRowsListedEnd // see makeRowsListed
	return q
}()

// The lease's session settings on MySQL, saved and put back on the pinned
// connection so that it goes back to the pool as it came (no reconnect per
// lease). The right-hand sides of one SET are all read before any variable
// is assigned (checked on MariaDB 10.11: SET @a = @@autocommit, autocommit
// = 0 leaves @a at the old value), so the save and the change are one round
// trip, and so is the restore.
//
// autocommit = 1, because a DSN or the server's init_connect may turn it
// off, and then nothing the lease writes would be committed. Bounds on
// server-side waits, in whole seconds (at least 1), so that a statement
// queued on a row lock gives up on the server too when the client has gone
// (the server's default innodb_lock_wait_timeout is 50 s; lock_wait_timeout,
// for the metadata locks of CREATE TABLE, a year).
const (
	mysqlSessionSave = "SET @entflake_autocommit = @@session.autocommit, " +
		"@entflake_lock_wait = @@session.innodb_lock_wait_timeout, @entflake_mdl_wait = @@session.lock_wait_timeout, " +
		"SESSION autocommit = 1, SESSION innodb_lock_wait_timeout = %d, SESSION lock_wait_timeout = %d"
	mysqlSessionRestore = "SET SESSION autocommit = @entflake_autocommit, " +
		"SESSION innodb_lock_wait_timeout = @entflake_lock_wait, SESSION lock_wait_timeout = @entflake_mdl_wait, " +
		"@entflake_autocommit = NULL, @entflake_lock_wait = NULL, @entflake_mdl_wait = NULL"
)

// PostgreSQL (tested on 15).
var pgText = func() sqlText {
	q := sqlText{
		// to_regclass resolves through search_path and returns NULL, rather than
		// failing, for a table that is not there; it needs no privilege on it.
		exists: "SELECT to_regclass($1) IS NOT NULL",
		seed:   seed(dialect.Postgres),
		// Advisory locks are the database's: one fixed key ("entflmig" as 8
		// bytes, not pgCreateLock's, which the lease takes to create its
		// tables and a migration may wait for) serves every application of
		// the database. The session's, freed by pg_advisory_unlock or when
		// the connection closes; pgx cancels the wait when the context ends.
		migrateLock:   "SELECT 1 FROM pg_advisory_lock(7308907228523489639)",
		migrateUnlock: "SELECT CASE WHEN pg_advisory_unlock(7308907228523489639) THEN 1 ELSE 0 END",
		// The row lock serialises starters; RETURNING hands back the new value.
		// Run on its own it commits at once; under a REPEATABLE READ or
		// SERIALIZABLE default a concurrent starter's update makes it fail with
		// 40001, and the lease runs it again in a READ COMMITTED transaction.
		//
		// synchronous_commit is off for this statement's own transaction
		// (set_config with is_local, which lasts until its commit): the row lock
		// is then released without waiting for the WAL to reach the disk, so
		// that starters do not queue behind one fsync each. A crash may lose the
		// last few moves of the counter, which only says where a search starts;
		// the slots, written with synchronous commits, decide. The lifetime
		// lease, for which the counter's value is the worker id, keeps the
		// durable commit (counterDurable).
		counter: "WITH nosync AS (SELECT set_config('synchronous_commit', 'off', true)) " +
			"UPDATE sys_sequence SET worker_id = (worker_id + 1) %% %d, updated_at = CURRENT_TIMESTAMP " +
			"FROM nosync WHERE service_name = '__global__' RETURNING worker_id",
		counterDurable: "UPDATE sys_sequence SET worker_id = (worker_id + 1) %% %d, updated_at = CURRENT_TIMESTAMP " +
			"WHERE service_name = '__global__' RETURNING worker_id",
		readSlot:   fmt.Sprintf(readSlotFormat, pgNowMs, "$1::integer", "''"),
		candidates: fmt.Sprintf(candidatesFormat, pgNowMs),
		census:     fmt.Sprintf(censusFormat, pgNowMs),
		holders:    fmt.Sprintf(holdersFormat, pgNowMs),
		// Its SetRange runs READ COMMITTED: each statement reads the latest
		// committed rows.
		liveOutside: fmt.Sprintf(liveOutsideFormat, pgNowMs, ""),
		bind:        true,
		// The audit row is one row for every instance of a service, and a
		// mass start writes it from each: an upsert that waited for the
		// row's lock would queue them all behind one another's commits
		// (4,096 starters waited up to 4.9 s each). The row says who
		// started last, and among writers of one moment any is last, so a
		// writer that finds it locked leaves it to the one writing it: the
		// UPDATE reads the row FOR UPDATE SKIP LOCKED (no row when another
		// transaction holds it), and the INSERT runs only when the UPDATE
		// wrote nothing, where ON CONFLICT DO NOTHING waits for no row lock
		// (only for a concurrent insert of the key, at the service's first
		// start). Every part of one statement sees one snapshot, so the
		// INSERT's NOT EXISTS reads the CTE's result, not the table.
		audit: "WITH u AS (UPDATE sys_sequence SET worker_id = $2, instance = $3, updated_at = CURRENT_TIMESTAMP " +
			"WHERE service_name = (SELECT service_name FROM sys_sequence WHERE service_name = $1 FOR UPDATE SKIP LOCKED) RETURNING 1) " +
			"INSERT INTO sys_sequence (service_name, worker_id, instance, updated_at) SELECT $1, $2, $3, CURRENT_TIMESTAMP " +
			"WHERE NOT EXISTS (SELECT 1 FROM u) ON CONFLICT (service_name) DO NOTHING",
	}
	// PostgreSQL's SET sees the row as it was in every assignment. A
	// sub-SELECT may lock the rows it reads; under READ COMMITTED, a claim
	// whose FOR SHARE meets a locked take's lock waits for its commit, then
	// reads the row's new version and matches nothing, and a locked take's
	// FOR UPDATE waits for a claim that holds the share lock, after which
	// its next statement (a new snapshot) sees the claim (both checked on
	// PostgreSQL 15).
	q.shared(pgNowMs, "CURRENT_TIMESTAMP", "GREATEST", " FOR SHARE", " FOR UPDATE", "ON CONFLICT (service_name) DO NOTHING",
		" ON CONFLICT (worker_id) DO NOTHING", true, true)
	return q
}()

// PostgreSQL's creation lock: concurrent CREATE TABLE IF NOT EXISTS on a
// fresh database can fail on the catalog's unique index
// (pg_type_typname_nsp_index); starters that find a table missing serialise
// on this transaction-scoped advisory lock and look again. The key is
// arbitrary and fixed ('entflake' in ASCII). lock_timeout, local to the
// transaction, bounds the wait for it and for the DDL's locks.
const (
	pgCreateLock = "SELECT pg_advisory_xact_lock(7308907228522703717)"
	pgLockWait   = "SELECT set_config('lock_timeout', $1, true)"
)

// SQLite (3.42 or later, for RETURNING and unixepoch('subsec');
// modernc.org/sqlite bundles one). It runs one writer at a time, so every
// UPDATE is atomic; its clock is the process's own.
var sqliteText = func() sqlText {
	q := sqlText{
		exists: "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
		seed:   seed(dialect.SQLite),
		counter: "UPDATE sys_sequence SET worker_id = (worker_id + 1) %% %d, updated_at = CURRENT_TIMESTAMP " +
			"WHERE service_name = '__global__' RETURNING worker_id",
		readSlot:   fmt.Sprintf(readSlotFormat, sqliteNowMs, "%d", "''"),
		candidates: fmt.Sprintf(candidatesFormat, sqliteNowMs),
		census:     fmt.Sprintf(censusFormat, sqliteNowMs),
		holders:    fmt.Sprintf(holdersFormat, sqliteNowMs),
		// SetRange holds the write lock.
		liveOutside: fmt.Sprintf(liveOutsideFormat, sqliteNowMs, ""),
		audit: "INSERT INTO sys_sequence (service_name, worker_id, instance, updated_at) VALUES (?, ?, ?, CURRENT_TIMESTAMP) " +
			"ON CONFLICT (service_name) DO UPDATE SET worker_id = excluded.worker_id, instance = excluded.instance, updated_at = excluded.updated_at",
	}
	// SQLite has no GREATEST; max() with two arguments is its scalar
	// maximum. It has no locking reads, and needs none: one writer runs at
	// a time, each statement is atomic, and the locked take holds the write
	// lock from its BEGIN IMMEDIATE.
	q.shared(sqliteNowMs, "CURRENT_TIMESTAMP", "max", "", "", "ON CONFLICT (service_name) DO NOTHING",
		" ON CONFLICT (worker_id) DO NOTHING", false, true)
	return q
}()

// SQLite's per-connection settings: busy_timeout is 0 unless set (a second
// writer then fails at once with SQLITE_BUSY); the lease sets it on its
// pinned connection for its own duration and puts the old value back.
// BEGIN IMMEDIATE takes the write lock at the start of a transaction (see
// session.begin).
//
// A database in memory gets no statement of its own: its slots expire and
// are renewed as on any database. Whether another handle in the process
// can reach it (a shared cache, file:x?mode=memory&cache=shared, as ent's
// own examples open it) cannot be told from a connection, which reports no
// file for either; and a slot that never expires could not be told from a
// lost one when rows are deleted.
const (
	sqliteBegin    = "BEGIN IMMEDIATE"
	sqliteCommit   = "COMMIT"
	sqliteBusyRead = "PRAGMA busy_timeout"
	sqliteBusySet  = "PRAGMA busy_timeout = %d"
)

// seed is schema.SeedStatement of a dialect it knows.
func seed(d string) string {
	s, err := schema.SeedStatement(d)
	if err != nil {
		panic(err) // only called with the three dialects above
	}
	return s
}

// textFor returns the statements of a dialect that schema.CheckDialect
// accepted.
func textFor(d string) *sqlText {
	switch d {
	case dialect.MySQL:
		return &mysqlText
	case dialect.Postgres:
		return &pgText
	}
	return &sqliteText
}

// Statements returns every statement text of dialect d, by its name in
// sqlText (a format where it takes one: its text before the arguments),
// for the chaos suite's statement matrix, which must hold every statement
// the lease sends or say why not (chaos/matrix_test.go). Empty texts (a
// statement the dialect does not need) are left out.
func Statements(d string) map[string]string {
	v := reflect.ValueOf(*textFor(d))
	out := map[string]string{}
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.String && f.String() != "" {
			out[v.Type().Field(i).Name] = f.String()
		}
	}
	return out
}

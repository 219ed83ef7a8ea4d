#!/usr/bin/env bash
# pgprobe-floor.sh: what PostgreSQL itself charges for the node probe's
# shape, with no Go, no ent and no driver in the way.
#
# FindNodes asks one UNION ALL of one primary-key lookup per node type
# (node.go); entgql's Noder then reads the row from the one table found.
# This script times, with pgbench (C, libpq, prepared statements, one
# connection), the known-type lookup of a row and the bare probe over 1,
# 3, 8 and 20 tables of 1,000 rows each, interleaved over several rounds,
# and prints each one's median latency and the ratio a Noder would have at
# best: (fixed + probe) / fixed. That ratio is a floor for
# BenchmarkNoder's "probe / fixed" (entflakegql/internal/nodebench), which
# adds the Go driver's and ent's costs on top.
#
#   bench/pgprobe-floor.sh [rounds] [seconds per run]   (defaults 5 and 4)
#
# It needs pgbench and psql (Debian: postgresql-client) and a PostgreSQL
# server as CONTRIBUTING.md sets up (PGHOST, PGPORT and PGUSER override
# 127.0.0.1, 5432 and root). It makes a database of its own,
# entflake_pgprobe, and drops it at the end.
set -euo pipefail
rounds=${1:-5}
secs=${2:-4}
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-root}
db=entflake_pgprobe
for tool in pgbench psql; do
	command -v "$tool" >/dev/null || { echo "pgprobe-floor: $tool not found (Debian: postgresql-client)" >&2; exit 1; }
done

work=$(mktemp -d)
cleanup() {
	psql -qX -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

PGOPTIONS="-c client_min_messages=warning" psql -qX -v ON_ERROR_STOP=1 -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
# Table i holds the ids i, 20+i, 40+i, ...: each id is in exactly one
# table, as a snowflake id is. VACUUM ANALYZE gives the planner statistics
# and the index-only scans a visibility map, which only helps the probe.
{
	for i in $(seq 0 19); do
		echo "CREATE TABLE t$i (id bigint PRIMARY KEY, name text NOT NULL, created timestamptz NOT NULL DEFAULT now());"
		echo "INSERT INTO t$i (id, name) SELECT g * 20 + $i, 'row ' || g FROM generate_series(0, 999) AS g;"
	done
	echo "VACUUM ANALYZE;"
} | psql -qX -v ON_ERROR_STOP=1 -d "$db" >/dev/null

# fixed: the row of a known type (table 7), as ent's query reads it.
printf '%s\n' '\set id random(0, 999) * 20 + 7' \
	'SELECT id, name, created FROM t7 WHERE id = :id LIMIT 2;' >"$work/fixed.sql"
# probeN: FindNodes' statement over N tables for an id one of them holds.
probe() {
	local n=$1 s="" b
	for i in $(seq 0 $((n - 1))); do
		b="SELECT $i, id FROM t$i WHERE id = :id"
		s=${s:+$s UNION ALL }$b
	done
	printf '%s\n' "\\set id random(0, 999) * 20 + random(0, $((n - 1)))" "$s;" >"$work/probe$n.sql"
}
scripts="fixed"
for n in 1 3 8 20; do
	probe "$n"
	scripts="$scripts probe$n"
done

echo "pgprobe-floor: $(psql -qXAt -d "$db" -c 'SHOW server_version'), $rounds rounds of ${secs} s, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
	for s in $scripts; do
		# -M prepared: parsed and planned once per connection, as pgx's
		# statement cache does for ent's queries and the probe.
		ms=$(pgbench -n -M prepared -c 1 -T "$secs" -f "$work/$s.sql" "$db" 2>&1 |
			awk '/^latency average/ { print $4 }')
		[ -n "$ms" ] || { echo "pgprobe-floor: pgbench gave no latency for $s" >&2; exit 1; }
		echo "$s $ms" >>"$work/all"
		echo "round $r: $s $ms ms"
	done
done

echo
echo "medians (µs), and a Noder's floor: (fixed + probe) / fixed"
sort -k1,1 -k2,2g "$work/all" | awk '
	{ v[$1, ++n[$1]] = $2 * 1000 }
	END {
		for (s in n) {
			c = n[s]
			m[s] = (c % 2) ? v[s, (c + 1) / 2] : (v[s, c / 2] + v[s, c / 2 + 1]) / 2
		}
		printf "fixed      %6.1f\n", m["fixed"]
		split("1 3 8 20", ns, " ")
		for (i = 1; i <= 4; i++) {
			p = "probe" ns[i]
			printf "probe %-3s  %6.1f   Noder floor %.2fx\n", ns[i], m[p], (m["fixed"] + m[p]) / m["fixed"]
		}
	}'

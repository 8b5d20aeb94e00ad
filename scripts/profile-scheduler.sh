#!/usr/bin/env bash
# Where the scheduler's time goes, counted by callgrind (instructions, not
# seconds: repeatable on a busy machine). Seeds N queued tasks of the bench
# tool into a fresh SQLite store, runs the bench's agentgate server on it under
# callgrind until every task has run its first step, stops it with SIGINT (a
# graceful stop) and prints the functions with the most inclusive
# instructions, and instructions per step.
#
#   scripts/profile-scheduler.sh [BENCH_BINARY] [N]
#
# BENCH_BINARY defaults to target/release/agentgate-bench
# (`cargo build --release -p agentgate-bench`), N to 5000.
set -euo pipefail
bin="${1:-target/release/agentgate-bench}"
count="${2:-5000}"
dir="$(mktemp -d -t agentgate-profile.XXXXXX)"
trap 'rm -rf "$dir"' EXIT
db="$dir/tasks.db"

# The store's own migrations make the schema: start the server once, stop it.
"$bin" serve agentgate --store "sqlite://$db" >"$dir/first.out" &
pid=$!
until grep -q '^listening' "$dir/first.out" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || { echo "the server did not start" >&2; exit 1; }
    sleep 0.1
done
kill -INT "$pid"
wait "$pid" || true

now_ms="$(($(date +%s%N) / 1000000))"
# The next start makes a new store key: forget the secret sealed with this one.
sqlite3 "$db" "DELETE FROM secrets; WITH RECURSIVE s(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM s WHERE n + 1 < $count)
  INSERT INTO tasks (id, owner, tool, args, status, status_message, created_at, updated_at, ttl_ms, due_at)
  SELECT printf('prof%023d', n), 'anonymous', 'bench_sleep', '{\"ms\":3000000}', 'working', 'queued',
         $now_ms, $now_ms, 3600000, $now_ms FROM s;"

valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out" \
    "$bin" serve agentgate --store "sqlite://$db" >"$dir/run.out" 2>"$dir/valgrind.err" &
pid=$!
until [ "$(sqlite3 "$db" 'SELECT COUNT(*) FROM tasks WHERE steps = 0')" = 0 ]; do
    kill -0 "$pid" 2>/dev/null || { cat "$dir/valgrind.err" >&2; exit 1; }
    sleep 0.5
done
kill -INT "$pid"
wait "$pid" || true

total="$(callgrind_annotate "$dir/callgrind.out" 2>/dev/null | awk '/PROGRAM TOTALS/ && !done { gsub(",", "", $1); print $1; done = 1 }')"
echo "steps: $count; instructions: $total; per step: $((total / count))"
callgrind_annotate --inclusive=yes "$dir/callgrind.out" 2>/dev/null |
    sed -n '/file:function/,$p' | sed -n 1,60p

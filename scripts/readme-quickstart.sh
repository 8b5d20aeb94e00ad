#!/usr/bin/env bash
# Runs every code block of the docs marked as a quick start, as written.
#
#   scripts/readme-quickstart.sh [PAGE.md ...]
#
# The pages default to README.md and every page under docs/, in that order
# (.ci/run names them). Their blocks run in the order given.
#
# A block is marked by the line `<!-- quick-start -->` right before its
# ```sh fence. Each marked block runs in order, line by line (a line ending in
# `\` continues on the next), in one shell, as a newcomer would paste it:
#
# - a line that starts a server that runs until Ctrl-C (`agentgate sim`,
#   `serve --listen`, `demo` without `--no-serve`, spelled `agentgate …` or
#   `cargo run -- …`) is started in the background, the way a
#   newcomer runs it in a second terminal, and the block goes on once that
#   server prints that it is ready (its own "listening"/"keeps serving" line);
# - every other line runs in the foreground and must exit 0 (`export` lines
#   change this shell, as they would change the newcomer's);
# - when the block ends, its servers are stopped (SIGINT, as Ctrl-C would).
#
# `agentgate` is found on PATH as after `cargo install --path crates/agentgate`:
# target/debug goes first on PATH (the build `cargo test` and the README's
# demo make, which .ci/run runs first). The client's task list and the default task store go to a temporary
# directory, so nothing of the developer's is touched.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$#" -gt 0 ]; then
    pages=("$@")
else
    pages=(README.md)
    while IFS= read -r page; do pages+=("$page"); done < <(find docs -name '*.md' | LC_ALL=C sort)
fi
for page in "${pages[@]}"; do
    [ -f "$page" ] || { echo "readme: no such page: $page" >&2; exit 1; }
done

[ -x target/debug/agentgate ] || {
    echo "target/debug/agentgate is missing: run cargo build -p agentgate first" >&2
    exit 1
}
export PATH="$PWD/target/debug:$PATH"
work="$(mktemp -d -t agentgate-readme.XXXXXX)"
export AGENTGATE_CLIENT_STATE="$work/client"
export XDG_DATA_HOME="$work/data"
servers=()

stop_servers() {
    local pid
    for pid in "${servers[@]}"; do
        # Each server runs in its own process group (setsid): `cargo run`'s
        # child goes down with it.
        kill -INT -- "-$pid" 2>/dev/null || true
    done
    for pid in "${servers[@]}"; do
        for _ in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL -- "-$pid" 2>/dev/null || true
    done
    servers=()
}
trap 'stop_servers; rm -rf "$work"' EXIT

# The marked blocks of one page, one command per line (continuations
# joined), blocks separated by a line holding only `--end-of-block--`.
blocks() {
    awk '
        /^<!-- quick-start -->$/ { marked = 1; next }
        marked && /^```sh$/ { inside = 1; marked = 0; next }
        inside && /^```/ { inside = 0; if (pending != "") print pending; pending = ""; print "--end-of-block--"; next }
        inside {
            line = $0
            if (line ~ /\\$/) { sub(/\\$/, "", line); pending = pending line; next }
            print pending line
            pending = ""
            next
        }
        { marked = 0 }
    ' "$1"
}

# A server that runs until Ctrl-C, and the line it prints once it is ready.
ready_pattern() {
    local re_prefix='^([A-Z_]+=[^ ]+[[:space:]]+)*(agentgate|cargo run --)[[:space:]]+'
    if [[ "$1" =~ ${re_prefix}sim([[:space:]]|$) ]]; then
        echo "GitHub emulator listening on"
    elif [[ "$1" =~ ${re_prefix}serve[[:space:]].*--listen ]]; then
        echo "^listening http"
    elif [[ "$1" =~ ${re_prefix}demo([[:space:]]|$) ]] && [[ "$1" != *--no-serve* ]]; then
        echo "The gateway keeps serving"
    fi
}

start_server() {
    local line="$1" pattern="$2" log
    log="$work/server-${#servers[@]}-$RANDOM.log"
    echo "  (background) $line"
    setsid bash -c "$line" </dev/null >"$log" 2>&1 &
    local pid=$!
    servers+=("$pid")
    # A build may come first; the server then starts in seconds.
    for _ in $(seq 1 6000); do
        if grep -qE "$pattern" "$log"; then
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            cat "$log" >&2
            echo "readme: the server exited before it was ready: $line" >&2
            return 1
        fi
        sleep 0.1
    done
    cat "$log" >&2
    echo "readme: the server was not ready after 10 minutes: $line" >&2
    return 1
}

count=0
while IFS= read -r line; do
    if [ "$line" = "--end-of-block--" ]; then
        stop_servers
        count=$((count + 1))
        echo "== quick-start block $count passed"
        continue
    fi
    # Comments and blank lines are for people.
    stripped="${line%%#*}"
    [[ "$stripped" =~ ^[[:space:]]*$ ]] && continue
    line="$(sed -e 's/[[:space:]]*$//' <<<"$line")"
    pattern="$(ready_pattern "$line")"
    if [ -n "$pattern" ]; then
        start_server "$line" "$pattern"
    else
        echo "\$ $line"
        if ! eval "$line" </dev/null; then
            echo "readme: a quick-start command failed: $line" >&2
            exit 1
        fi
    fi
done < <(for page in "${pages[@]}"; do blocks "$page"; done)

if [ "$count" -eq 0 ]; then
    echo "readme: no block marked <!-- quick-start --> in ${pages[*]}" >&2
    exit 1
fi
echo "readme: $count quick-start blocks ran as written (${pages[*]})"

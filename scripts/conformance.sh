#!/usr/bin/env bash
# Runs the official MCP conformance suite against the conformance fixture
# (agentgate's engine on a fresh SQLite store): the scenarios required for
# protocol 2026-07-28 and every tasks-* scenario; then writes the results
# page, docs/conformance.md, from the suite's own results
# (`conformance-report`, beside the fixture binary). Exits non-zero on any
# failed check or missing result.
#
#   scripts/conformance.sh [--check] [path/to/conformance-fixture]
#
# --check (CI): leave docs/conformance.md alone and fail if it differs from
# the page this run produced, so the committed page cannot drift from the
# suite's results. Without it the page is rewritten.
#
# `cargo build -p conformance-fixture` builds both binaries. Needs Node (the
# suite runs on Node 22, fetched by npx) and the npm registry.
# CONFORMANCE_RESULTS=DIR keeps the raw results (checks.json per scenario,
# the suite's listings) in DIR instead of a temporary directory.
set -euo pipefail

suite="@modelcontextprotocol/conformance@0.2.0-alpha.12"
revision="2026-07-28"
root="$(cd "$(dirname "$0")/.." && pwd)"
page="$root/docs/conformance.md"

check=0
if [ "${1:-}" = "--check" ]; then
    check=1
    shift
fi
fixture="${1:-target/debug/conformance-fixture}"
report="$(dirname "$fixture")/conformance-report"
[ -x "$fixture" ] && [ -x "$report" ] || {
    echo "conformance: $fixture or $report is missing: cargo build -p conformance-fixture" >&2
    exit 1
}

work="$(mktemp -d)"
trap 'kill "${pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
results="${CONFORMANCE_RESULTS:-$work/results}"
rm -rf "$results"
mkdir -p "$results/checks"

"$fixture" --listen 127.0.0.1:0 --store "sqlite://$work/tasks.db" >"$work/url" 2>"$work/fixture.log" &
pid=$!
for _ in $(seq 1 100); do
    [ -s "$work/url" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/fixture.log"; echo "fixture exited" >&2; exit 1; }
    sleep 0.1
done
url="$(sed -n 's/^listening //p' "$work/url" | head -n 1)"
[ -n "$url" ] || { cat "$work/fixture.log"; echo "fixture printed no URL" >&2; exit 1; }
echo "conformance fixture at $url"

suite_cmd() {
    npx -y -p node@22 -p "$suite" -- conformance "$@"
}

# What the page is made from, besides each scenario's checks.json: which
# suite, which revision, every server scenario it has, and what the revision
# requires (and runs without scoring).
echo "$suite" >"$results/suite"
echo "$revision" >"$results/revision"
suite_cmd list --server >"$results/scenarios.txt" 2>/dev/null
suite_cmd list --server --requirements "$revision" >"$results/requirements.txt" 2>/dev/null

failed=0
# `--requirements` runs what the revision requires and, unscored, what the
# suite has beside it for that revision: every tasks-* scenario of the tasks
# extension among them (the report fails if one has no result). The suite's
# exit status is the first signal of a failure; a count of failed checks in
# its summary lines is the second; the report (below) is the third.
echo "== required scenarios for $revision, and the tasks extension's"
suite_cmd server --url "$url" --requirements "$revision" -o "$results/checks" 2>&1 |
    tee "$work/out.txt" || failed=1
if grep -qE '(^|[^0-9])[1-9][0-9]* failed|FAILURE' "$work/out.txt"; then failed=1; fi

"$report" "$results" >"$work/conformance.md" || failed=1
if [ "$check" -eq 1 ]; then
    if ! cmp -s "$work/conformance.md" "$page"; then
        echo "conformance: docs/conformance.md differs from this run's results:" >&2
        diff -u "$page" "$work/conformance.md" >&2 || true
        echo "conformance: run scripts/conformance.sh and commit docs/conformance.md" >&2
        failed=1
    fi
else
    cp "$work/conformance.md" "$page"
    echo "conformance: wrote docs/conformance.md"
fi

if [ "$failed" -ne 0 ]; then
    echo "conformance: FAILED (fixture log follows)" >&2
    tail -n 50 "$work/fixture.log" >&2
    exit 1
fi
echo "conformance: all scenarios passed"

#!/usr/bin/env bash
# Runs the official MCP conformance suite against the conformance fixture
# (agentgate's engine on a fresh SQLite store): every tasks-* scenario, then
# the scenarios required for protocol 2026-07-28. Exits non-zero on any failure.
#
#   scripts/conformance.sh [path/to/conformance-fixture]
#
# Needs Node (the suite runs on Node 22, fetched by npx) and the npm registry.
set -euo pipefail

suite="@modelcontextprotocol/conformance@0.2.0-alpha.12"
fixture="${1:-target/debug/conformance-fixture}"
work="$(mktemp -d)"
trap 'kill "${pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

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

run() {
    npx -y -p node@22 -p "$suite" -- conformance server --url "$url" "$@"
}

failed=0
# The suite's exit status is the first signal; a count of failed checks in its
# summary lines is the second.
check() {
    if grep -qE '(^|[^0-9])[1-9][0-9]* failed|FAILURE' "$1"; then failed=1; fi
}
for scenario in tasks-lifecycle tasks-capability-negotiation tasks-wire-fields \
    tasks-request-state-removal tasks-mrtr-input tasks-request-headers \
    tasks-dispatch-and-envelope tasks-status-notifications tasks-required-task-error \
    tasks-mrtr-composition; do
    echo "== $scenario"
    run --scenario "$scenario" -o "$work/results" 2>&1 | tee "$work/out.txt" || failed=1
    check "$work/out.txt"
done
echo "== required scenarios for 2026-07-28"
run --requirements 2026-07-28 -o "$work/results" 2>&1 | tee "$work/out.txt" || failed=1
check "$work/out.txt"

if [ "$failed" -ne 0 ]; then
    echo "conformance: FAILED (fixture log follows)" >&2
    tail -n 50 "$work/fixture.log" >&2
    exit 1
fi
echo "conformance: all scenarios passed"

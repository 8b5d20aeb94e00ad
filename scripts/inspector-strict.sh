#!/usr/bin/env bash
# Runs MCP Inspector's tool-schema portability check (`--strict`) on every
# tool agentgate lists with all three backends set up: `agentgate demo`
# serves them against its emulators, and the Inspector CLI lists them over
# Streamable HTTP. It exits non-zero on any error-severity finding (a bare
# boolean schema); warnings are printed.
#
#   scripts/inspector-strict.sh [path/to/agentgate]
#
# The Inspector needs Node 22.19 or later; like scripts/conformance.sh, it
# runs on Node 22 fetched by npx (the `node` package), so the machine's Node
# 20 is enough to start it. Needs the npm registry.
set -euo pipefail

inspector="@modelcontextprotocol/inspector@2.12.0"
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${1:-$root/target/debug/agentgate}"

out="$(mktemp)"
"$bin" demo --listen 127.0.0.1:0 > "$out" 2>&1 &
demo=$!
trap 'kill "$demo" 2>/dev/null || true; wait "$demo" 2>/dev/null || true; rm -f "$out"' EXIT

# The demo prints its URL once it serves; wait for that line (bounded).
url=""
for _ in $(seq 1 240); do
    url="$(sed -n 's/^ *Streamable HTTP: //p' "$out" | head -n 1)"
    [ -n "$url" ] && break
    kill -0 "$demo" 2>/dev/null || { echo "inspector-strict: the demo exited:"; cat "$out"; exit 1; }
    sleep 0.5
done
if [ -z "$url" ]; then
    echo "inspector-strict: the demo printed no URL within 2 minutes:"
    cat "$out"
    exit 1
fi

echo "inspector-strict: $inspector --strict on $url"
npx -y -p node@22 -p "$inspector" -- \
    mcp-inspector --cli --transport http --server-url "$url" --method tools/list --strict \
    > /dev/null
echo "inspector-strict: no error-severity finding"

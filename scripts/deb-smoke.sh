#!/usr/bin/env bash
# Installs an agentgate .deb (scripts/package-deb.sh), checks what it installed, starts the
# service exactly as its systemd unit would (its user, its environment, its command line;
# only the port is a free one), asks /readyz, stops it with SIGTERM, and purges the package.
#
#   scripts/deb-smoke.sh target/debian/agentgate_0.1.0_amd64.deb
#
# Needs root (dpkg -i). The unit itself is checked with `systemd-analyze verify`, not
# started by systemd: a CI machine or container need not run systemd as PID 1.
set -euo pipefail
deb="$1"
if [ "$(id -u)" -ne 0 ]; then
    echo "deb-smoke: dpkg -i needs root" >&2
    exit 1
fi
if dpkg -s agentgate >/dev/null 2>&1; then
    echo "deb-smoke: agentgate is installed on this machine already; not touching it" >&2
    exit 1
fi

dpkg-deb --field "$deb" Package Version Architecture Depends
dpkg -i "$deb"
log="$(mktemp -t deb-smoke.XXXXXX.log)"
cleanup() {
    pkill -TERM -u agentgate -x agentgate 2>/dev/null || true
    dpkg --purge agentgate >/dev/null
    rm -f "$log"
}
trap cleanup EXIT

/usr/bin/agentgate --version | head -1
getent passwd agentgate >/dev/null || { echo "deb-smoke: no agentgate user" >&2; exit 1; }
[ "$(stat -c %U:%a /var/lib/agentgate)" = "agentgate:700" ] || {
    echo "deb-smoke: /var/lib/agentgate is $(stat -c %U:%a /var/lib/agentgate), not agentgate:700" >&2
    exit 1
}
unit=/lib/systemd/system/agentgate.service
if command -v systemd-analyze >/dev/null; then
    systemd-analyze verify "$unit"
    echo "systemd-analyze verify: $unit is valid"
fi

# The unit's command line, user, home and working directory.
read -r -a exec_start <<<"$(sed -n 's/^ExecStart=//p' "$unit")"
(
    cd /var/lib/agentgate
    exec runuser -u agentgate -- env -i HOME=/var/lib/agentgate PATH=/usr/bin:/bin \
        "${exec_start[@]}" --listen 127.0.0.1:0
) >"$log" 2>&1 &
server=$!
url=""
for _ in $(seq 1 300); do
    url="$(sed -n 's/^listening //p' "$log" | head -1)"
    [ -n "$url" ] && break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$url" ]; then
    echo "deb-smoke: the installed service did not start; its output:" >&2
    cat "$log" >&2
    exit 1
fi
python3 - "${url%/mcp}/readyz" <<'EOF'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=10) as answer:
    print(f"GET {sys.argv[1]}: {answer.status} {answer.read().decode().strip()}")
EOF
[ -f /var/lib/agentgate/tasks.db ] || { echo "deb-smoke: no task store in /var/lib/agentgate" >&2; exit 1; }
pkill -TERM -u agentgate -x agentgate
wait "$server" || true
echo "deb-smoke: installed, served as the unit would, stopped; purging"

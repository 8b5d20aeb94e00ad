#!/usr/bin/env bash
# The two install paths that need no Rust toolchain, tried as an operator would: the Debian
# package under systemd, and the container image. Both are built from one .deb
# (scripts/package-deb.sh) by packaging/Containerfile on the base scripts/container-base.sh
# makes, so neither touches this machine's own packages or users.
#
#   scripts/install-smoke.sh target/debian/agentgate_0.1.0_amd64.deb
#
# 1. The package under systemd (the Containerfile's `with-systemd` stage): installed with
#    dpkg -i, the unit enabled and started by systemd as PID 1, with its sandboxing. Checked:
#    the user, the state directory's mode, `systemd-analyze verify`, the third-party
#    licences in /usr/share/doc/agentgate, the service's user,
#    /readyz, a clean `systemctl stop`, and that `dpkg --purge` removes the store and user.
# 2. The image (the default stage), agentgate as PID 1: it refuses a public address without
#    [auth], serves with a token from the environment (401 without it), keeps its store in
#    the volume, and exits 0 on `podman stop`.
#
# Needs root (podman, debootstrap).
set -euo pipefail
cd "$(dirname "$0")/.."
deb="$1"
base="$(scripts/container-base.sh)"
source scripts/podman-env.sh

say() { printf 'install-smoke: %s\n' "$*"; }
fail() {
    printf 'install-smoke: %s\n' "$*" >&2
    exit 1
}

work="$(mktemp -d -t agentgate-install-smoke.XXXXXX)"
context="$work/context"
config="$work/config"
mkdir "$context" "$config"
tag="localhost/agentgate-smoke:$$"
cleanup() {
    podman rm -f -t 0 "agentgate-systemd-$$" "agentgate-image-$$" >/dev/null 2>&1 || true
    podman volume rm -f "agentgate-tasks-$$" >/dev/null 2>&1 || true
    podman rmi -f "$tag" "$tag-systemd" >/dev/null 2>&1 || true
    rm -rf "$work" "$podman_conf"
}
trap cleanup EXIT
cp "$deb" "$context/"

# Host networking for the builds only: the systemd stage installs systemd-sysv with apt.
build() {
    podman build --quiet --network host --build-arg "BASE=$base" \
        -f packaging/Containerfile "$@" "$context" >"$work/build.log" 2>&1 ||
        { cat "$work/build.log" >&2; fail "podman build $* failed"; }
}
build --target with-systemd -t "$tag-systemd"
build -t "$tag"
say "built $tag and $tag-systemd from $(basename "$deb") on $base"

# In the container: run a command; ask an HTTP GET with bash alone (the image has no client).
in_systemd() { podman exec "agentgate-systemd-$$" "$@"; }
http_get_inside='exec 3<>/dev/tcp/127.0.0.1/8722 && printf "GET $1 HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" >&3 && cat <&3'

# 1. The package under systemd. --network none: the unit's loopback address is the
# container's own.
podman run -d --name "agentgate-systemd-$$" --systemd=always --network none "$tag-systemd" >/dev/null
state=""
for _ in $(seq 1 200); do
    state="$(in_systemd systemctl is-active agentgate.service 2>/dev/null || true)"
    [ "$state" = active ] && break
    sleep 0.1
done
if [ "$state" != active ]; then
    in_systemd systemctl status --no-pager agentgate.service >&2 || true
    in_systemd journalctl --no-pager -u agentgate.service >&2 || true
    fail "systemd did not start agentgate.service (state: ${state:-none})"
fi
in_systemd systemd-analyze verify /lib/systemd/system/agentgate.service
in_systemd zgrep -q '^rmcp [0-9.]*: ' /usr/share/doc/agentgate/third-party-licenses.txt.gz ||
    fail "the package does not carry the licences of the crates compiled in"
pid="$(in_systemd systemctl show -P MainPID agentgate.service)"
user="$(in_systemd stat -c %U "/proc/$pid")"
[ "$user" = agentgate ] || fail "the service runs as $user, not agentgate"
mode="$(in_systemd stat -c %U:%a /var/lib/agentgate)"
[ "$mode" = agentgate:700 ] || fail "/var/lib/agentgate is $mode, not agentgate:700"
ready=""
for _ in $(seq 1 100); do
    ready="$(in_systemd bash -c "$http_get_inside" _ /readyz 2>/dev/null || true)"
    [[ "$ready" == "HTTP/1.0 200"* || "$ready" == "HTTP/1.1 200"* ]] && break
    sleep 0.1
done
[[ "$ready" == *" 200 "* ]] || fail "GET /readyz from the systemd service: ${ready:-no answer}"
in_systemd test -f /var/lib/agentgate/tasks.db || fail "no task store in /var/lib/agentgate"
in_systemd systemctl stop agentgate.service
result="$(in_systemd systemctl show -P Result agentgate.service)"
[ "$result" = success ] || fail "systemctl stop ended the service with result $result"
in_systemd dpkg --purge agentgate >/dev/null
in_systemd test ! -e /var/lib/agentgate || fail "dpkg --purge left /var/lib/agentgate"
if in_systemd getent passwd agentgate >/dev/null; then fail "dpkg --purge left the agentgate user"; fi
say "the package under systemd: enabled, started as user agentgate, /readyz 200, stopped cleanly, purged"
podman rm -f -t 0 "agentgate-systemd-$$" >/dev/null

# 2. The image, agentgate as PID 1. First as a newcomer would run it, with no [auth]: a
# public address must be refused, saying what to do.
if refusal="$(podman run --rm --network none "$tag" 2>&1)"; then
    fail "the image served 0.0.0.0 with no [auth]"
fi
[[ "$refusal" == *"[auth]"* ]] || fail "the refusal does not name [auth]: $refusal"
say "without [auth] the image refuses to serve 0.0.0.0: $(printf '%s' "$refusal" | tail -1)"

cat >"$config/agentgate.toml" <<'TOML'
[auth]
mode = "tokens"
[[auth.tokens]]
principal = "ci"
token_env = "AGENTGATE_CI_TOKEN"
TOML
token="smoke-$RANDOM-$RANDOM-$RANDOM"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
podman volume create "agentgate-tasks-$$" >/dev/null
podman run -d --name "agentgate-image-$$" --network host \
    -v "$config/agentgate.toml:/etc/agentgate/agentgate.toml:ro" \
    -v "agentgate-tasks-$$:/var/lib/agentgate" \
    -e AGENTGATE_CI_TOKEN="$token" -e AGENTGATE_LISTEN="0.0.0.0:$port" \
    "$tag" >/dev/null
python3 - "http://127.0.0.1:$port" "$token" <<'EOF'
import json, sys, time, urllib.error, urllib.request
base, token = sys.argv[1], sys.argv[2]
for _ in range(200):
    try:
        with urllib.request.urlopen(f"{base}/readyz", timeout=5) as answer:
            assert answer.status == 200, answer.status
            break
    except (urllib.error.URLError, ConnectionError):
        time.sleep(0.1)
else:
    sys.exit("install-smoke: the image never answered /readyz")
initialize = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "install-smoke", "version": "1"}}}).encode()
def post(headers):
    request = urllib.request.Request(f"{base}/mcp", data=initialize, method="POST", headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream",
        **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
status, _ = post({})
assert status == 401, f"initialize with no token: {status}, not 401"
status, body = post({"authorization": f"Bearer {token}"})
assert status == 200 and "serverInfo" in body, f"initialize with the token: {status} {body[:200]}"
print("install-smoke: the image serves /mcp: 401 with no token, initialize answered with it")
EOF
podman stop -t 30 "agentgate-image-$$" >/dev/null
code="$(podman inspect -f '{{.State.ExitCode}}' "agentgate-image-$$")"
[ "$code" = 0 ] || fail "agentgate exited $code on podman stop: $(podman logs "agentgate-image-$$" 2>&1 | tail -5)"
podman run --rm -v "agentgate-tasks-$$:/data" --entrypoint /bin/sh "$tag" -c 'test -s /data/tasks.db' ||
    fail "no task store in the image's volume"
say "the image: refuses without [auth], serves with a token, keeps its store in the volume, stops with 0"

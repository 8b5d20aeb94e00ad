#!/usr/bin/env bash
# Builds the agentgate Debian package: the binary, a systemd unit and a default config.
#
#   cargo build --release -p agentgate        # about 13 minutes on 2 cores, the first time
#   scripts/package-deb.sh                     # → target/debian/agentgate_<version>_<arch>.deb
#   sudo dpkg -i target/debian/agentgate_*.deb
#   sudoedit /etc/agentgate/agentgate.env      # the backends' secrets, KEY=value
#   sudo systemctl enable --now agentgate
#
# Options: --binary PATH (default target/release/agentgate; CI packages its debug build),
#          --out DIR (default target/debian).
#
# Installs /usr/bin/agentgate, /lib/systemd/system/agentgate.service,
# /etc/agentgate/agentgate.toml (a conffile: an edited one survives upgrades) and the docs;
# the postinst creates the system user `agentgate` and its state directory
# /var/lib/agentgate (the SQLite task store and its key). Nothing starts by itself: a
# gateway without its backends' credentials has nothing to serve.
# /usr/share/doc/agentgate/third-party-licenses.txt.gz carries the licence of every crate
# compiled in (scripts/third-party-licenses.py, from cargo metadata).
# Needs dpkg-deb and objdump (binutils), both in Debian, and python3.
set -euo pipefail
cd "$(dirname "$0")/.."

binary=target/release/agentgate
out=target/debian
while [ $# -gt 0 ]; do
    case "$1" in
        --binary) binary="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        *) echo "package-deb: unknown argument $1 (--binary PATH, --out DIR)" >&2; exit 2 ;;
    esac
done
if [ ! -x "$binary" ]; then
    echo "package-deb: $binary is not built: run cargo build --release -p agentgate (or pass --binary)" >&2
    exit 1
fi

version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
arch="$(dpkg --print-architecture)"
# The newest glibc symbol version the binary links against is the libc6 it needs.
glibc="$(objdump -T "$binary" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)"

stage="$(mktemp -d -t agentgate-deb.XXXXXX)"
trap 'rm -rf "$stage"' EXIT
install -D -m 0755 "$binary" "$stage/usr/bin/agentgate"
install -D -m 0644 packaging/agentgate.service "$stage/lib/systemd/system/agentgate.service"
install -D -m 0644 packaging/agentgate.toml "$stage/etc/agentgate/agentgate.toml"
install -D -m 0644 README.md "$stage/usr/share/doc/agentgate/README.md"
cp -r docs "$stage/usr/share/doc/agentgate/docs"
install -D -m 0644 packaging/copyright "$stage/usr/share/doc/agentgate/copyright"
# The crates compiled into the binary, with their licence texts (gzip, as Debian ships docs).
python3 scripts/third-party-licenses.py "$stage/usr/share/doc/agentgate/third-party-licenses.txt" >/dev/null
gzip -9n "$stage/usr/share/doc/agentgate/third-party-licenses.txt"

mkdir -p "$stage/DEBIAN"
cat >"$stage/DEBIAN/control" <<EOF
Package: agentgate
Version: $version
Architecture: $arch
Maintainer: agentgate developers <agentgate@example.invalid>
Depends: libc6 (>= $glibc), libgcc-s1, adduser
Section: net
Priority: optional
Homepage: https://example.invalid/agentgate
Description: long-running AI agents behind the Model Context Protocol as durable tasks
 agentgate serves Amazon Q Business, the GitHub Copilot cloud agent, A2A agents and other
 MCP servers' slow tools as MCP tasks that survive restarts: a handle at once, status while
 the agent works, questions as input_required, cancel, and every result the backend returned.
EOF
echo "/etc/agentgate/agentgate.toml" >"$stage/DEBIAN/conffiles"
install -m 0755 packaging/postinst "$stage/DEBIAN/postinst"
install -m 0755 packaging/postrm "$stage/DEBIAN/postrm"

mkdir -p "$out"
deb="$out/agentgate_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$stage" "$deb" >/dev/null
echo "$deb"

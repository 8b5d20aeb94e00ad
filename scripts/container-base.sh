#!/usr/bin/env bash
# Builds the container base image localhost/agentgate-base:bookworm (a minimal
# Debian 12) from Debian's own packages with debootstrap, for machines that
# reach Debian's mirror but no container registry (CI). Where a registry is
# reachable, packaging/Containerfile's default base (Debian's image) does the
# same job. Installs podman, runc and debootstrap from Debian when missing.
#
#   scripts/container-base.sh          # about a minute; nothing to do if the image exists
#
# Needs root (debootstrap). Prints the image's name.
set -euo pipefail
cd "$(dirname "$0")/.."
image=localhost/agentgate-base:bookworm
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if [ "$(id -u)" -ne 0 ]; then
    echo "container-base: debootstrap needs root" >&2
    exit 1
fi
missing=()
for tool in podman runc debootstrap; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        podman runc debootstrap uidmap slirp4netns >/dev/null
fi
source scripts/podman-env.sh
rootfs=""
trap 'rm -rf "$podman_conf" ${rootfs:+"$rootfs"}' EXIT

if podman image exists "$image"; then
    echo "$image"
    exit 0
fi
rootfs="$(mktemp -d -t agentgate-rootfs.XXXXXX)"
# minbase: the Essential set and apt; adduser is the agentgate package's one
# other dependency, ca-certificates what its HTTPS clients need.
debootstrap --variant=minbase --include=adduser,ca-certificates bookworm "$rootfs" "$mirror" \
    >"$rootfs.log" 2>&1 || { cat "$rootfs.log" >&2; rm -f "$rootfs.log"; exit 1; }
rm -f "$rootfs.log"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | podman import --quiet \
    --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
echo "$image"

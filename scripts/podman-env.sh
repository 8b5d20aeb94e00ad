# Sourced by the container scripts: podman settings for machines like CI's,
# which lack CAP_SYS_RESOURCE (podman's default open-file limit, 1048576,
# cannot be set there) and run cgroups v1 beside a controller-less v2
# hierarchy (crun refuses that "hybrid" mode; runc accepts it). On a usual
# Linux host neither is needed, and the scripts work without them.
podman_conf="$(mktemp -t agentgate-containers.XXXXXX.conf)"
cat >"$podman_conf" <<CONF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=4096:4096"]
[engine]
runtime = "runc"
CONF
export CONTAINERS_CONF="$podman_conf"

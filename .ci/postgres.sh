#!/usr/bin/env bash
# Makes sure a PostgreSQL server answers on 127.0.0.1:5432 and lets user
# `postgres` in without a password (trust auth), for the PostgreSQL store tests:
#
#   .ci/postgres.sh
#   AGENTGATE_REQUIRE_POSTGRES=1 cargo test -p agentgate-core --test external store_postgres
#
# - A server already answering is used as it is (it must accept `postgres`
#   without a password; the script says so if it does not).
# - Otherwise Debian's `postgresql` package is installed if no server binaries
#   are found, and a throw-away cluster with trust auth is created in
#   $AGENTGATE_PG_DATA (default ${TMPDIR:-/tmp}/agentgate-postgres) and started
#   on 127.0.0.1:5432. PostgreSQL refuses to run as root, so as root the
#   cluster runs as the `postgres` system user.
# - Stop that cluster with: pg_ctl -D "$AGENTGATE_PG_DATA" stop
# - AGENTGATE_PG_PORT picks another port (default 5432), e.g. to try the script
#   next to a running server; the tests then need AGENTGATE_TEST_POSTGRES_URL.
set -euo pipefail

HOST=127.0.0.1
PORT="${AGENTGATE_PG_PORT:-5432}"
DATA="${AGENTGATE_PG_DATA:-${TMPDIR:-/tmp}/agentgate-postgres}"

say() { echo "postgres.sh: $*"; }

ready() {
    if command -v pg_isready >/dev/null 2>&1; then
        pg_isready -q -h "$HOST" -p "$PORT"
    else
        # No client tools yet: is anything listening at all?
        (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null
    fi
}

# True when user postgres can log in without a password (or psql is missing,
# so it cannot be checked here).
trusted() {
    if ! command -v psql >/dev/null 2>&1; then
        say "psql not found; not checking that user postgres needs no password"
        return 0
    fi
    psql -w -h "$HOST" -p "$PORT" -U postgres -d postgres -Atqc 'SELECT 1' >/dev/null 2>&1
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        say "need root (or sudo) to run: $*" >&2
        exit 1
    fi
}

# The directory holding initdb and pg_ctl: on PATH, or Debian's newest
# /usr/lib/postgresql/<version>/bin.
server_bin_dir() {
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(command -v initdb)"
        return 0
    fi
    local dir
    dir=$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -type d -name bin 2>/dev/null |
        sort -V | tail -n 1)
    if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
        echo "$dir"
        return 0
    fi
    return 1
}

# Waits (bounded) until the server accepts connections.
wait_ready() {
    local tries=60
    while ! ready; do
        tries=$((tries - 1))
        if [ "$tries" -le 0 ]; then
            return 1
        fi
        sleep 1
    done
}

# 1. A server is already there.
if ready; then
    if trusted; then
        say "PostgreSQL already accepts connections on $HOST:$PORT; nothing to do"
        exit 0
    fi
    say "a server answers on $HOST:$PORT but user postgres cannot log in without a" \
        "password; allow it in pg_hba.conf (trust for 127.0.0.1) or point" \
        "AGENTGATE_TEST_POSTGRES_URL at a server with credentials in the URL" >&2
    exit 1
fi

# 2. Server binaries, installed if missing.
installed_now=no
if ! BIN=$(server_bin_dir); then
    say "no PostgreSQL server binaries found; installing Debian's postgresql package"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql
    installed_now=yes
    if ! BIN=$(server_bin_dir); then
        say "installed postgresql, but found no initdb/pg_ctl" >&2
        exit 1
    fi
fi
say "using server binaries in $BIN"
export PATH="$BIN:$PATH"

# The package may have started its own cluster, with password auth on TCP.
if [ "$installed_now" = yes ] && ready; then
    if trusted; then
        say "the freshly installed package's cluster accepts user postgres; done"
        exit 0
    fi
    if command -v pg_lsclusters >/dev/null 2>&1; then
        say "stopping the package's own cluster (it wants passwords) to run a trust-auth one"
        pg_lsclusters --no-header | while read -r version cluster _; do
            as_root pg_ctlcluster "$version" "$cluster" stop || true
        done
    fi
fi

# 3. A throw-away cluster with trust auth, run by a non-root user.
if [ "$(id -u)" -eq 0 ]; then
    RUN_AS=postgres
    if ! id "$RUN_AS" >/dev/null 2>&1; then
        say "creating system user $RUN_AS to run the server (PostgreSQL refuses root)"
        useradd --system --home-dir "$DATA" --shell /bin/bash "$RUN_AS"
    fi
    run() { (cd / && runuser -u "$RUN_AS" -- env PATH="$PATH" "$@"); }
else
    RUN_AS=$(id -un)
    run() { "$@"; }
fi

if [ ! -s "$DATA/PG_VERSION" ]; then
    say "creating a cluster with trust auth in $DATA (owned by $RUN_AS)"
    mkdir -p "$DATA"
    chmod 700 "$DATA"
    [ "$(id -u)" -ne 0 ] || chown "$RUN_AS" "$DATA"
    run initdb -D "$DATA" -U postgres --auth=trust --encoding=UTF8 --no-instructions >/dev/null
else
    say "reusing the cluster in $DATA"
fi

say "starting PostgreSQL on $HOST:$PORT as $RUN_AS (log: $DATA/server.log)"
run pg_ctl -D "$DATA" -l "$DATA/server.log" -w -t 60 \
    -o "-c listen_addresses=$HOST -c port=$PORT -k $DATA" start

if ! wait_ready; then
    say "PostgreSQL did not become ready on $HOST:$PORT; its log:" >&2
    tail -n 50 "$DATA/server.log" >&2 || true
    exit 1
fi
if ! trusted; then
    say "the server runs but user postgres cannot log in; see $DATA/server.log" >&2
    exit 1
fi
say "PostgreSQL is ready on $HOST:$PORT (user postgres, trust auth)"

#!/usr/bin/env bash
# Install and start the services Arbiter's CI runs against (run as root), idempotently:
#
#   PostgreSQL  127.0.0.1:5432, user postgres, trust on loopback (Debian's postgresql)
#   Redis       127.0.0.1:6379, no persistence (Debian's redis-server)
#   MariaDB     127.0.0.1:3306, root without a password on loopback (Debian's mariadb-server;
#               the Slurm lab's accounting database)
#
# A fresh machine starts none of them. This script installs what is missing from Debian's
# packages, starts what does not answer, and waits until each one answers; a service that
# already answers is left alone. `.ci/run` calls it first; developers run `make services`.
#
# Environment (all optional):
#   ARBITER_SERVICES   which services, space-separated (default: "postgres redis mariadb")
#   ARBITER_SERVICES_TIMEOUT  seconds to wait for each service to answer (default 60)
set -euo pipefail

SERVICES=${ARBITER_SERVICES:-postgres redis mariadb}
TIMEOUT=${ARBITER_SERVICES_TIMEOUT:-60}
LOG_DIR=/var/log/arbiter-services

say() { printf '[services] %s\n' "$*"; }
die() {
    printf '[services] error: %s\n' "$*" >&2
    exit 1
}
wanted() { [[ " $SERVICES " == *" $1 "* ]]; }

[[ $(id -u) -eq 0 ]] || die "run as root (installs Debian packages and starts daemons)"
mkdir -p "$LOG_DIR"

# --- Packages --------------------------------------------------------------------------------
# Make apt ready once, before the first install: no prompts, no daemons started by the
# packages' own init scripts (a container has no init: a policy-rc.d that exits 101 forbids
# it, removed again unless it was there before), and fresh package lists (a new machine's may
# be stale or empty).
APT_READY=0
apt_ready() {
    ((APT_READY)) && return 0
    export DEBIAN_FRONTEND=noninteractive
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    apt-get -y -q -o DPkg::Lock::Timeout=300 update >"$LOG_DIR/apt.log" 2>&1 ||
        die "apt-get update failed (see $LOG_DIR/apt.log)"
    APT_READY=1
}

# Whether every package named is installed (then nothing is done for it).
installed() {
    local pkg
    for pkg in "$@"; do
        [[ $(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null) == "install ok installed" ]] ||
            return 1
    done
}

apt_failed() {
    tail -n 30 "$LOG_DIR/apt.log" >&2
    die "apt-get install $* failed (see $LOG_DIR/apt.log)"
}

wait_until() {
    local what=$1
    shift
    local i
    for ((i = 0; i < TIMEOUT; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 1
    done
    die "$what did not answer within $TIMEOUT s"
}

# Each service's Debian packages, installed only when missing.
if wanted postgres && ! installed postgresql postgresql-client; then
    apt_ready && say "installing postgresql postgresql-client from Debian's packages"
    apt-get -y -q -o DPkg::Lock::Timeout=300 install --no-install-recommends \
        postgresql postgresql-client >>"$LOG_DIR/apt.log" 2>&1 || apt_failed postgresql
fi
if wanted redis && ! installed redis-server redis-tools; then
    apt_ready && say "installing redis-server redis-tools from Debian's packages"
    apt-get -y -q -o DPkg::Lock::Timeout=300 install --no-install-recommends \
        redis-server redis-tools >>"$LOG_DIR/apt.log" 2>&1 || apt_failed redis-server
fi
if wanted mariadb && ! installed mariadb-server mariadb-client; then
    apt_ready && say "installing mariadb-server mariadb-client from Debian's packages"
    apt-get -y -q -o DPkg::Lock::Timeout=300 install --no-install-recommends \
        mariadb-server mariadb-client >>"$LOG_DIR/apt.log" 2>&1 || apt_failed mariadb-server
fi

# Lua 5.1 (the Lua Debian's Slurm links): the job_submit plugin's own tests run it.
if ! installed lua5.1; then
    apt_ready && say "installing lua5.1 from Debian's packages"
    apt-get -y -q -o DPkg::Lock::Timeout=300 install --no-install-recommends \
        lua5.1 >>"$LOG_DIR/apt.log" 2>&1 || apt_failed lua5.1
fi

# --- PostgreSQL ------------------------------------------------------------------------------
pg_answers() { pg_isready -q -h 127.0.0.1 -p 5432 && psql -h 127.0.0.1 -U postgres -Atqc 'select 1'; }

start_postgres() {
    if pg_answers >/dev/null 2>&1; then
        say "PostgreSQL answers on 127.0.0.1:5432"
        return
    fi
    local version conf
    version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
    [[ -n $version ]] || die "no PostgreSQL server under /usr/lib/postgresql"
    if [[ ! -d /etc/postgresql/$version/main ]]; then
        say "creating PostgreSQL $version cluster main"
        pg_createcluster "$version" main >"$LOG_DIR/postgres-create.log" 2>&1 ||
            die "pg_createcluster failed (see $LOG_DIR/postgres-create.log)"
    fi
    conf=/etc/postgresql/$version/main
    # Trust on loopback only (CI and the tests connect as postgres without a password).
    cat >"$conf/pg_hba.conf" <<'EOF'
# Written by Arbiter's deploy/services.sh: trust on loopback only, for CI and the test suite.
local   all   all                  trust
host    all   all   127.0.0.1/32   trust
host    all   all   ::1/128        trust
EOF
    mkdir -p "$conf/conf.d"
    cat >"$conf/conf.d/arbiter.conf" <<'EOF'
# Written by Arbiter's deploy/services.sh.
listen_addresses = '127.0.0.1'
port = 5432
max_connections = 200
EOF
    say "starting PostgreSQL $version"
    pg_ctlcluster --skip-systemctl-redirect "$version" main start ||
        pg_ctlcluster --skip-systemctl-redirect "$version" main restart ||
        die "PostgreSQL did not start (see /var/log/postgresql/)"
    wait_until PostgreSQL pg_answers
    say "PostgreSQL answers on 127.0.0.1:5432"
}

# --- Redis -----------------------------------------------------------------------------------
redis_answers() { [[ $(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null) == PONG ]]; }

start_redis() {
    if redis_answers; then
        say "Redis answers on 127.0.0.1:6379"
        return
    fi
    say "starting Redis"
    mkdir -p /var/lib/redis
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
        --dir /var/lib/redis --logfile "$LOG_DIR/redis.log" || die "redis-server did not start"
    wait_until Redis redis_answers
    say "Redis answers on 127.0.0.1:6379"
}

# --- MariaDB ---------------------------------------------------------------------------------
mariadb_answers() { mariadb --protocol=tcp -h127.0.0.1 -P3306 -uroot -e 'select 1'; }

start_mariadb() {
    if mariadb_answers >/dev/null 2>&1; then
        say "MariaDB answers on 127.0.0.1:3306"
        return
    fi
    local data=/var/lib/mysql
    mkdir -p /run/mysqld
    chown mysql:mysql /run/mysqld 2>/dev/null || true
    if [[ ! -d $data/mysql ]]; then
        say "initialising MariaDB in $data"
        mariadb-install-db --user=mysql --datadir="$data" --skip-test-db \
            >"$LOG_DIR/mariadb-install.log" 2>&1 ||
            die "mariadb-install-db failed (see $LOG_DIR/mariadb-install.log)"
    fi
    say "starting MariaDB"
    # innodb-lock-wait-timeout: slurmdbd's rollups hold long locks (see deploy/slurm).
    setsid mariadbd --user=mysql --datadir="$data" --socket=/run/mysqld/mysqld.sock \
        --port=3306 --bind-address=127.0.0.1 --skip-name-resolve \
        --pid-file=/run/mysqld/mysqld.pid --log-error="$LOG_DIR/mariadb.err" \
        --innodb-lock-wait-timeout=900 </dev/null >"$LOG_DIR/mariadb.out" 2>&1 &
    # Root connects over TCP without a password from loopback (the Slurm lab's slurmdbd and
    # .ci/run do): the socket's unix_socket login sets that up on the first start.
    wait_until "MariaDB (socket)" mariadb -uroot --socket=/run/mysqld/mysqld.sock -e 'select 1'
    if ! mariadb_answers >/dev/null 2>&1; then
        mariadb -uroot --socket=/run/mysqld/mysqld.sock -e "
            CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
            GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
            ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('');
            FLUSH PRIVILEGES;" || die "could not let root connect over TCP"
    fi
    wait_until MariaDB mariadb_answers
    say "MariaDB answers on 127.0.0.1:3306"
}

wanted postgres && start_postgres
wanted redis && start_redis
wanted mariadb && start_mariadb
exit 0

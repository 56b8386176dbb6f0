# Shared settings and helpers for deploy/slurm/up.sh and deploy/slurm/down.sh.
# Sourced, not executed. The caller has already set `set -euo pipefail`.

# --- Locations -----------------------------------------------------------------------------
# The repository root is two levels above this file; the state directory defaults to
# var/slurm inside it (var/ is git-ignored). Every path Slurm sees must be absolute.
SLURM_SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SLURM_SCRIPT_DIR/../.." && pwd)
STATE_DIR=${ARBITER_SLURM_DIR:-$REPO_ROOT/var/slurm}
case $STATE_DIR in /*) ;; *) STATE_DIR=$REPO_ROOT/$STATE_DIR ;; esac

ETC=$STATE_DIR/etc       # slurm.conf, gres.conf, slurmdbd.conf
RUN=$STATE_DIR/run       # pid files and sockets
LOG=$STATE_DIR/log       # one log per daemon
CONF=$ETC/slurm.conf
MUNGE_SOCKET=$RUN/munge.socket
MARKER=$STATE_DIR/.arbiter-slurm   # proves the directory is ours before --purge deletes it
DB_MARK=$STATE_DIR/.db-initialised # up.sh created the database and user below

# --- Fixed names (tests and the Django side rely on them) ----------------------------------
CLUSTER=arbiter
NODE=gpu01
PARTITION=gpu
# A second cluster on one host (a second work tree) needs its own database and user too: the
# user's password is each state directory's own (etc/db.pass), so two clusters sharing one user
# reset each other's password and the first slurmdbd loses its database. A database other than
# the default one therefore gets its own user by default.
DB_NAME=${ARBITER_SLURM_DB_NAME:-slurm_acct_db}
if [[ $DB_NAME == slurm_acct_db ]]; then DEFAULT_DB_USER=slurm; else DEFAULT_DB_USER=${DB_NAME}_user; fi
DB_USER=${ARBITER_SLURM_DB_USER:-$DEFAULT_DB_USER}
# MariaDB to use, or to start privately when nothing answers there.
DB_PORT=${ARBITER_SLURM_DB_PORT:-3306}

# Ports: slurmctld, slurmd, slurmdbd. Override the base only to run two clusters on one host.
PORT_BASE=${ARBITER_SLURM_PORT_BASE:-6817}
CTLD_PORT=$PORT_BASE
SLURMD_PORT=$((PORT_BASE + 1))
DBD_PORT=$((PORT_BASE + 2))

# Seconds to wait for each daemon to become ready.
TIMEOUT=${ARBITER_SLURM_TIMEOUT:-90}

# Daemons in start order; down.sh stops them in reverse. mariadbd only when up.sh started a
# private one (its pid file exists only then).
DAEMONS=(mariadbd munged slurmdbd slurmctld slurmd)

export SLURM_CONF=$CONF

# --- Messages ------------------------------------------------------------------------------
say() { printf '[slurm %s] %s\n' "$SLURM_STEP" "$*"; }
warn() { printf '[slurm %s] WARNING: %s\n' "$SLURM_STEP" "$*" >&2; }
die() {
    printf '[slurm %s] ERROR: %s\n' "$SLURM_STEP" "$*" >&2
    exit 1
}

# Print the last lines of a log to stderr, to explain a failure.
show_log() {
    local file=$1
    [[ -s $file ]] || return 0
    printf -- '--- last lines of %s ---\n' "$file" >&2
    tail -n 20 "$file" >&2
    printf -- '---\n' >&2
}

# Elapsed seconds (one decimal) since a `date +%s.%N` value.
elapsed() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }

# --- Processes -----------------------------------------------------------------------------
pid_file() { printf '%s/%s.pid' "$RUN" "$1"; }

# True while a process exists and is not a zombie. Daemons are re-parented to PID 1, which
# may reap them late; an exited, unreaped daemon counts as stopped.
alive() { [[ -r /proc/$1/stat && $(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null) != Z ]]; }

# PID of a daemon we started, if it is still alive and still that program; else nothing.
running_pid() {
    local name=$1 file pid
    file=$(pid_file "$name")
    [[ -s $file ]] || return 1
    pid=$(tr -dc '0-9' <"$file")
    [[ -n $pid ]] || return 1
    alive "$pid" && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$name" ]] || return 1
    printf '%s' "$pid"
}

is_running() { running_pid "$1" >/dev/null; }

# True when something listens on a local TCP port.
port_in_use() {
    if command -v ss >/dev/null; then
        [[ -n $(ss -Hltn "sport = :$1") ]]
    else
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
    fi
}

# Poll a command until it succeeds or TIMEOUT seconds pass.
wait_for() {
    local what=$1 deadline
    shift
    deadline=$((SECONDS + TIMEOUT))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}

# --- MariaDB as root -----------------------------------------------------------------------
# CI's server takes root without a password over TCP; Debian's stock server only over the
# unix socket (unix_socket auth, `ERROR 1698`). Try both; sets DB_ROOT to the working command.
DB_ROOT=()
db_root_connect() {
    DB_ROOT=(mariadb --protocol=tcp -h127.0.0.1 -P"$DB_PORT" -uroot)
    db_root -N -e 'SELECT 1' >/dev/null 2>&1 && return 0
    # The default socket may belong to another server: accept it only if it serves DB_PORT.
    DB_ROOT=(mariadb -uroot)
    [[ $(db_root -N -e 'SELECT @@port' 2>/dev/null) == "$DB_PORT" ]] && return 0
    DB_ROOT=()
    return 1
}

db_root() { "${DB_ROOT[@]}" "$@"; }

# --- TCP quick ACK on loopback -------------------------------------------------------------
# Slurm 22.05 sends each slurmdbd message as two small writes; Nagle plus delayed ACK then
# costs ~40 ms per message (0.3-0.7 s per sacctmgr call). `quickack 1` on the loopback routes
# makes sacctmgr 8-10x faster. Needs CAP_NET_ADMIN. QUICKACK_MARK records that we set it, so
# down.sh only undoes its own change.
QUICKACK_MARK=$RUN/quickack-applied
LOOPBACK_ROUTES=("127.0.0.0/8" "127.0.0.1")

loopback_route() {
    printf 'local %s dev lo proto kernel scope host src 127.0.0.1 table local' "$1"
}

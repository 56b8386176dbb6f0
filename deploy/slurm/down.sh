#!/usr/bin/env bash
# Stop the single-host Slurm cluster started by deploy/slurm/up.sh (run as root).
#
#   deploy/slurm/down.sh           cancel all jobs, stop the daemons by PID; keep the state
#   deploy/slurm/down.sh --purge   also drop the accounting database and delete the state dir
#
# Each daemon gets SIGTERM, then SIGKILL after 10 s. Only processes whose PID is in the state
# directory's pid files are signalled. Idempotent: stopping a stopped cluster is a no-op.
set -euo pipefail
SLURM_STEP=down
# shellcheck source=deploy/slurm/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PURGE=0
for arg in "$@"; do
    case $arg in
        --purge) PURGE=1 ;;
        -h | --help)
            sed -n '2,8s/^# \{0,1\}//p' "$0"
            exit 0
            ;;
        *) die "unknown argument '$arg' (usage: down.sh [--purge])" ;;
    esac
done

[[ $(id -u) -eq 0 ]] || die "run as root"
if [[ ! -d $STATE_DIR ]]; then
    say "nothing to stop: $STATE_DIR does not exist"
    exit 0
fi
[[ -e $MARKER ]] || die "$STATE_DIR was not made by up.sh (no $(basename "$MARKER")); not touching it"
STARTED_AT=$(date +%s.%N)

# --- 1. Cancel jobs --------------------------------------------------------------------------
# A job's slurmstepd outlives slurmd, so jobs are cancelled while slurmctld still runs.
if is_running slurmctld && command -v squeue >/dev/null; then
    jobs=$(squeue -h -o %i 2>/dev/null || true)
    if [[ -n $jobs ]]; then
        say "cancelling $(wc -w <<<"$jobs") job(s)"
        # shellcheck disable=SC2086
        scancel $jobs 2>/dev/null || true
        deadline=$((SECONDS + 15))
        while [[ -n $(squeue -h -t R,CG,S -o %i 2>/dev/null) ]] && ((SECONDS < deadline)); do
            sleep 0.2
        done
    fi
fi

# --- 2. Stop daemons, newest first -----------------------------------------------------------
stop_daemon() {
    local name=$1 pid i t0
    if ! pid=$(running_pid "$name"); then
        rm -f "$(pid_file "$name")"
        return 0
    fi
    t0=$(date +%s.%N)
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do # 10 s
        alive "$pid" || break
        sleep 0.1
    done
    if alive "$pid"; then
        warn "$name (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.2
    fi
    ! alive "$pid" || die "$name (pid $pid) is still running"
    rm -f "$(pid_file "$name")"
    say "stopped $name (pid $pid) in $(elapsed "$t0") s"
}

for ((idx = ${#DAEMONS[@]} - 1; idx >= 0; idx--)); do
    stop_daemon "${DAEMONS[idx]}"
done

# --- 3. Undo the loopback quickack route change, if up.sh made it ------------------------------
if [[ -e $QUICKACK_MARK ]]; then
    restored=1
    for route in "${LOOPBACK_ROUTES[@]}"; do
        # shellcheck disable=SC2046
        ip route replace $(loopback_route "$route") 2>/dev/null || restored=0
    done
    if ((restored)); then
        rm -f "$QUICKACK_MARK"
        say "loopback quickack off"
    else
        warn "could not restore the loopback routes (ip route show table local dev lo)"
    fi
fi

# --- 4. --purge: drop the accounting database and the state directory ------------------------
if ((PURGE)); then
    # A private MariaDB lived in the state directory and goes with it; a shared one keeps
    # running and only loses what up.sh created there.
    if [[ ! -d $STATE_DIR/mysql && -e $DB_MARK ]]; then
        if db_root_connect; then
            db_root <<SQL || die "could not drop database $DB_NAME"
DROP DATABASE IF EXISTS $DB_NAME;
DROP USER IF EXISTS '$DB_USER'@'127.0.0.1';
DROP USER IF EXISTS '$DB_USER'@'localhost';
SQL
            say "dropped database $DB_NAME and user $DB_USER"
        else
            warn "MariaDB on 127.0.0.1:$DB_PORT does not answer; database $DB_NAME not dropped"
        fi
    fi
    rm -rf --one-file-system "$STATE_DIR"
    say "removed $STATE_DIR"
fi

say "done in $(elapsed "$STARTED_AT") s"

#!/usr/bin/env bash
# Start a single-host Slurm cluster for Arbiter's demo and tests (run as root).
#
#   deploy/slurm/up.sh            install what is missing, write config, start, wait until ready
#
# Cluster "arbiter": munged, slurmdbd (accounting in MariaDB), slurmctld and one slurmd node
# "gpu01" with fake GPUs (symlinks to /dev/null), partition "gpu". Everything lives in the
# state directory ($ARBITER_SLURM_DIR, default var/slurm in the repository); stop it with
# deploy/slurm/down.sh. Idempotent: daemons that already run are left alone.
#
# Environment (all optional):
#   ARBITER_SLURM_DIR        state directory (default: <repo>/var/slurm)
#   ARBITER_SLURM_GPUS       fake GPUs as type:count[,type:count] (default: a100:4,h100:4)
#   ARBITER_SLURM_QUICKACK   1 (default) sets TCP quickack on loopback for fast sacctmgr; 0 skips
#   ARBITER_SLURM_PORT_BASE  slurmctld port; slurmd and slurmdbd use the next two (default 6817)
#   ARBITER_SLURM_DB_PORT    MariaDB port on 127.0.0.1 (default 3306)
#   ARBITER_SLURM_DB_NAME    accounting database (default slurm_acct_db)
#   ARBITER_SLURM_DB_USER    its MariaDB user (default slurm; <db name>_user for another database)
#   ARBITER_SLURM_TIMEOUT    seconds to wait for each daemon (default 90)
set -euo pipefail
SLURM_STEP=up
# shellcheck source=deploy/slurm/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

GPUS=${ARBITER_SLURM_GPUS:-a100:4,h100:4}
QUICKACK=${ARBITER_SLURM_QUICKACK:-1}
PACKAGES=(munge slurmctld slurmd slurmdbd slurm-client)
STARTED_AT=$(date +%s.%N)

[[ $(id -u) -eq 0 ]] || die "run as root (installs packages and starts daemons as SlurmUser=root)"
# A unix socket path must fit in 108 bytes.
((${#MUNGE_SOCKET} < 100)) || die "state directory path too long for a unix socket: $STATE_DIR"

# --- 1. Packages -----------------------------------------------------------------------------
package_installed() {
    [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]
}

install_packages() {
    local missing=() pkg t0
    for pkg in "$@"; do package_installed "$pkg" || missing+=("$pkg"); done
    ((${#missing[@]})) || return 0
    t0=$(date +%s.%N)
    say "installing ${missing[*]}"
    local apt=(apt-get -y -q -o DPkg::Lock::Timeout=300)
    export DEBIAN_FRONTEND=noninteractive
    # Refresh package lists only when they do not know a package (or the install fails below).
    for pkg in "${missing[@]}"; do
        if [[ $(apt-cache policy "$pkg" 2>/dev/null | awk '/Candidate:/ { print $2 }') \
            =~ ^(|\(none\))$ ]]; then
            say "apt-get update (no candidate for $pkg)"
            "${apt[@]}" update >/dev/null
            break
        fi
    done
    # Keep the packages' own init scripts from starting system daemons: we run private ones.
    # (A policy-rc.d that exits 101 forbids service starts; removed again on exit.)
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    local rc=0
    "${apt[@]}" install --no-install-recommends "${missing[@]}" >"$LOG/apt.log" 2>&1 || rc=$?
    if ((rc != 0)); then
        say "install failed (rc=$rc); retrying after apt-get update"
        rc=0
        { "${apt[@]}" update && "${apt[@]}" install --no-install-recommends "${missing[@]}"; } \
            >>"$LOG/apt.log" 2>&1 || rc=$?
    fi
    if ((rc != 0)); then
        show_log "$LOG/apt.log"
        die "apt-get install ${missing[*]} failed (rc=$rc)"
    fi
    say "installed in $(elapsed "$t0") s"
}

mkdir -p "$ETC" "$RUN" "$LOG" "$STATE_DIR/state/ctld" "$STATE_DIR/state/d" "$STATE_DIR/dev" \
    "$STATE_DIR/munge"
touch "$MARKER"
chmod 755 "$STATE_DIR" "$ETC" "$RUN"
chmod 700 "$STATE_DIR/munge"

# MariaDB: reuse one on 127.0.0.1:3306, else start a private one (needs the server package).
wanted=("${PACKAGES[@]}")
command -v mariadb >/dev/null || wanted+=(mariadb-client)
if ! is_running mariadbd && ! port_in_use "$DB_PORT" && ! command -v mariadbd >/dev/null; then
    wanted+=(mariadb-server)
fi
install_packages "${wanted[@]}"

# Fail before touching the database when another cluster holds our ports (a second cluster
# on one host needs its own ARBITER_SLURM_PORT_BASE and ARBITER_SLURM_DB_NAME).
for pair in slurmdbd:$DBD_PORT slurmctld:$CTLD_PORT slurmd:$SLURMD_PORT; do
    name=${pair%%:*} port=${pair#*:}
    if ! is_running "$name" && port_in_use "$port"; then
        die "port $port (for $name) is taken by another process: $(ss -Hltnp "sport = :$port" 2>/dev/null)"
    fi
done

# --- 2. Configuration ------------------------------------------------------------------------
# Parse ARBITER_SLURM_GPUS into slurm.conf's Gres=, gres.conf lines and the tracked TRES.
GRES_NODE="" GRES_LINES="" GRES_TRES="gres/gpu" GPU_TOTAL=0
IFS=, read -r -a gpu_specs <<<"$GPUS"
for spec in "${gpu_specs[@]}"; do
    [[ $spec =~ ^([a-z][a-z0-9_]*):([1-9][0-9]*)$ ]] ||
        die "ARBITER_SLURM_GPUS: '$spec' is not type:count (e.g. a100:8)"
    type=${BASH_REMATCH[1]} count=${BASH_REMATCH[2]}
    first=$GPU_TOTAL last=$((GPU_TOTAL + count - 1))
    GRES_NODE+="${GRES_NODE:+,}gpu:$type:$count"
    files=$STATE_DIR/dev/fakegpu$first
    ((count == 1)) || files=$STATE_DIR/dev/fakegpu[$first-$last]
    GRES_LINES+="NodeName=$NODE Name=gpu Type=$type File=$files"$'\n'
    GRES_TRES+=",gres/gpu:$type"
    GPU_TOTAL=$((GPU_TOTAL + count))
done

# Fake GPU devices: symlinks to /dev/null count as character devices. (Regular files log
# errors; no File= at all makes slurmd drop the GPUs and the node drains.)
for ((i = 0; i < GPU_TOTAL; i++)); do ln -sfn /dev/null "$STATE_DIR/dev/fakegpu$i"; done

# Secrets made once and kept across restarts: the munge key and the slurm DB user's password.
if [[ ! -s $STATE_DIR/munge/munge.key ]]; then
    dd if=/dev/urandom of="$STATE_DIR/munge/munge.key" bs=1024 count=1 status=none
fi
chmod 400 "$STATE_DIR/munge/munge.key"
if [[ ! -s $ETC/db.pass ]]; then
    (umask 077 && head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$ETC/db.pass")
fi
DB_PASS=$(cat "$ETC/db.pass")

# Write a file only when its content changes; remember whether anything changed.
CONFIG_CHANGED=0
write_config() {
    local file=$1 mode=$2 tmp
    tmp=$(mktemp "$file.XXXX")
    cat >"$tmp"
    chmod "$mode" "$tmp"
    if cmp -s "$tmp" "$file"; then
        rm -f "$tmp"
    else
        mv -f "$tmp" "$file"
        CONFIG_CHANGED=1
    fi
}

write_config "$CONF" 644 <<EOF
# Generated by deploy/slurm/up.sh; edits are overwritten.
ClusterName=$CLUSTER
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
# Private munge socket. cred_expire also sets how long a requeued (preempted) job waits
# before it may start again: cred_expire + 1 s (default 120 s; minimum 5).
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET,cred_expire=10
StateSaveLocation=$STATE_DIR/state/ctld
SlurmdSpoolDir=$STATE_DIR/state/d
SlurmctldPidFile=$(pid_file slurmctld)
SlurmdPidFile=$(pid_file slurmd)
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
# No cgroups: plain process tracking, so no cgroup.conf is needed.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
# Schedule every 2 s, backfill every 1 s: pending reasons and starts show up quickly.
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# QOS weight dominates so jobs start in tier order. PriorityCalcPeriod is in minutes (1 is
# the minimum): a QOS priority change reaches already-pending jobs only on the next tick.
PriorityType=priority/multifactor
PriorityWeightQOS=100000
PriorityWeightFairshare=10000
PriorityWeightAge=1000
PriorityMaxAge=1-0
PriorityDecayHalfLife=7-0
PriorityCalcPeriod=1
PriorityFavorSmall=NO
PreemptType=preempt/qos
PreemptMode=REQUEUE
JobRequeue=1
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
# Connections to slurmdbd ignore AuthInfo and take the munge socket from here.
AccountingStoragePass=$MUNGE_SOCKET
AccountingStorageEnforce=associations,limits,qos,safe
AccountingStorageTRES=$GRES_TRES
KillWait=5
MinJobAge=300
# Arbiter's job_submit plugin (job_submit.lua beside this file; its rules table, written by
# each sync, sits there too): GPU requests are checked, rewritten or refused at submit time.
JobSubmitPlugins=lua
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
Waittime=0
# 32 CPUs and 64 GB are declared whatever the host has; config_overrides accepts that.
SlurmdParameters=config_overrides
GresTypes=gpu
NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=localhost CPUs=32 RealMemory=64000 Gres=$GRES_NODE Feature=fakegpu State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF

# Arbiter's job_submit plugin, the repository's copy. slurmctld reloads the file when it
# changes (it checks the file's time on each submission), so no restart is needed.
write_config "$ETC/job_submit.lua" 644 <"$REPO_ROOT/queues/services/slurm/job_submit.lua"

write_config "$ETC/gres.conf" 644 <<EOF
# Generated by deploy/slurm/up.sh. Fake GPUs: symlinks to /dev/null.
AutoDetect=off
$GRES_LINES
EOF

# slurmdbd refuses to start unless this file is mode 600 and owned by SlurmUser (root).
write_config "$ETC/slurmdbd.conf" 600 <<EOF
# Generated by deploy/slurm/up.sh; edits are overwritten.
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=root
DebugLevel=info
LogFile=$LOG/slurmdbd.log
PidFile=$(pid_file slurmdbd)
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=$DB_USER
StoragePass=$DB_PASS
StorageLoc=$DB_NAME
EOF
chown root:root "$ETC/slurmdbd.conf"

if ((CONFIG_CHANGED)) && is_running slurmctld; then
    warn "configuration changed while the cluster runs; apply it with down.sh then up.sh"
fi

# --- 3. Loopback quick ACK (optional, see lib.sh) ----------------------------------------------
if [[ $QUICKACK == 1 && ! -e $QUICKACK_MARK ]] && command -v ip >/dev/null; then
    if ip route show table local dev lo | grep -q quickack; then
        say "loopback quickack already set"
    else
        applied=1
        for route in "${LOOPBACK_ROUTES[@]}"; do
            # shellcheck disable=SC2046
            ip route replace $(loopback_route "$route") quickack 1 2>/dev/null || applied=0
        done
        if ((applied)); then
            touch "$QUICKACK_MARK"
            say "loopback quickack on (fast sacctmgr; down.sh restores the routes)"
        else
            warn "could not set loopback quickack (needs CAP_NET_ADMIN); sacctmgr calls stay slow"
        fi
    fi
fi

# --- 4. MariaDB ------------------------------------------------------------------------------
start_private_mariadb() {
    local data=$STATE_DIR/mysql/data
    port_in_use "$DB_PORT" && die "port $DB_PORT is in use but root cannot log in to it"
    if [[ ! -d $data/mysql ]]; then
        say "initialising a private MariaDB in $data"
        mkdir -p "$data"
        mariadb-install-db --no-defaults --user=root --datadir="$data" \
            --auth-root-authentication-method=normal --skip-test-db >"$LOG/mysqld-install.log" 2>&1 ||
            { show_log "$LOG/mysqld-install.log"; die "mariadb-install-db failed"; }
    fi
    say "starting a private mariadbd on 127.0.0.1:$DB_PORT"
    # slurmdbd wants these InnoDB sizes and timeout (else it warns).
    setsid mariadbd --no-defaults --user=root --datadir="$data" \
        --socket="$RUN/mysqld.sock" --port="$DB_PORT" --bind-address=127.0.0.1 \
        --pid-file="$(pid_file mariadbd)" --log-error="$LOG/mysqld.err" --skip-name-resolve \
        --innodb-buffer-pool-size=512M --innodb-log-file-size=64M \
        --innodb-lock-wait-timeout=900 </dev/null >"$LOG/mysqld.out" 2>&1 &
    wait_for mariadbd db_root_connect || { show_log "$LOG/mysqld.err"; die "mariadbd did not start"; }
}

if db_root_connect; then
    if is_running mariadbd; then say "private MariaDB already running"; else
        say "using the MariaDB on 127.0.0.1:$DB_PORT"
    fi
else
    start_private_mariadb
    db_root_connect || die "cannot log in to the private MariaDB as root"
fi

# The slurm user connects over TCP with a password; (re)set it so it matches db.pass.
db_root <<SQL || die "could not create database $DB_NAME and user $DB_USER"
CREATE DATABASE IF NOT EXISTS $DB_NAME;
CREATE USER IF NOT EXISTS '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
ALTER USER '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
ALTER USER '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
GRANT ALL PRIVILEGES ON $DB_NAME.* TO '$DB_USER'@'127.0.0.1';
GRANT ALL PRIVILEGES ON $DB_NAME.* TO '$DB_USER'@'localhost';
SQL
touch "$DB_MARK" # down.sh --purge drops only a database this state directory set up

# --- 5. Daemons ------------------------------------------------------------------------------
# Start one daemon unless it already runs; each daemonizes itself and writes its pid file.
start_daemon() {
    local name=$1 port=$2 pid
    shift 2
    if pid=$(running_pid "$name"); then
        say "$name already running (pid $pid)"
        return 0
    fi
    [[ -z $port ]] || ! port_in_use "$port" ||
        die "port $port (for $name) is taken by another process: $(ss -Hltnp "sport = :$port" 2>/dev/null)"
    rm -f "$(pid_file "$name")"
    "$@" >>"$LOG/$name.out" 2>&1 || { show_log "$LOG/$name.out"; die "$name failed to start"; }
    wait_for "$name pid" running_pid "$name" ||
        { show_log "$LOG/$name.log"; show_log "$LOG/$name.out"; die "$name exited at start"; }
    say "started $name (pid $(running_pid "$name"))"
}

munge_works() { munge -n -S "$MUNGE_SOCKET" | unmunge -S "$MUNGE_SOCKET"; }
slurmdbd_answers() { sacctmgr -n -P show cluster; }
slurmctld_up() { scontrol ping | grep -q 'is UP'; }
cluster_registered() { sacctmgr -n -P show cluster format=cluster | grep -qx "$CLUSTER"; }
node_state() { sinfo -h -n "$NODE" -o %t 2>/dev/null; }
# Ready: idle, or running jobs (mixed/allocated), so up.sh on a busy cluster just checks it.
node_ready() { [[ $(node_state) =~ ^(idle|mix|alloc)$ ]]; }

start_daemon munged "" munged --key-file="$STATE_DIR/munge/munge.key" \
    --socket="$MUNGE_SOCKET" --pid-file="$(pid_file munged)" --log-file="$LOG/munged.log" \
    --seed-file="$STATE_DIR/munge/munged.seed"
wait_for munge munge_works || { show_log "$LOG/munged.log"; die "munge does not work"; }

start_daemon slurmdbd "$DBD_PORT" slurmdbd
wait_for slurmdbd slurmdbd_answers || { show_log "$LOG/slurmdbd.log"; die "slurmdbd does not answer"; }

# Register the cluster before slurmctld starts (slurmctld then adds the gres/gpu TRES itself).
if ! cluster_registered; then
    sacctmgr -i add cluster "$CLUSTER" >/dev/null || die "sacctmgr add cluster $CLUSTER failed"
    say "registered cluster $CLUSTER in accounting"
fi

start_daemon slurmctld "$CTLD_PORT" slurmctld -f "$CONF"
wait_for slurmctld slurmctld_up || { show_log "$LOG/slurmctld.log"; die "slurmctld is not UP"; }

start_daemon slurmd "$SLURMD_PORT" slurmd -f "$CONF" -N "$NODE"

# Wait for the node to be ready (idle, or busy with jobs). A node drained or down from an earlier run (with state kept)
# is resumed once; if it falls back, the reason is printed.
deadline=$((SECONDS + TIMEOUT)) resumed=0
until node_ready; do
    state=$(node_state || true)
    if [[ $state =~ ^(drain|drng|down|inval|fail)$ ]] && ((!resumed)); then
        say "node $NODE is $state ($(sinfo -h -n "$NODE" -o %E)); resuming it"
        scontrol update nodename="$NODE" state=resume || true
        resumed=1
    fi
    if ((SECONDS >= deadline)); then
        show_log "$LOG/slurmd.log"
        show_log "$LOG/slurmctld.log"
        die "node $NODE is '${state:-unknown}', not ready ($(sinfo -h -n "$NODE" -o %E))"
    fi
    sleep 0.2
done
cluster_registered || die "cluster $CLUSTER is not listed by sacctmgr"

say "cluster $CLUSTER ready in $(elapsed "$STARTED_AT") s: node $NODE $(node_state) with $GRES_NODE"
say "logs: $LOG"
printf 'SLURM_CONF=%s\n' "$CONF" >"$STATE_DIR/env"
echo "export SLURM_CONF=$CONF"

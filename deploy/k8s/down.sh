#!/usr/bin/env bash
# Stop Kueue, the controller manager, the API server and etcd started by deploy/k8s/up.sh, by the PIDs it recorded.
#
#   deploy/k8s/down.sh           stop all four (SIGTERM, then SIGKILL after 10 s); keep the state
#   deploy/k8s/down.sh --purge   also delete the state directory
#
# Only the processes whose PIDs are in the state directory's pid files are signalled.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/../.." && pwd)
STATE_DIR=${ARBITER_K8S_DIR:-$REPO_ROOT/var/k8s}
case $STATE_DIR in /*) ;; *) STATE_DIR=$REPO_ROOT/$STATE_DIR ;; esac
PURGE=0
case ${1:-} in --purge) PURGE=1 ;; "") ;; *) echo "usage: down.sh [--purge]" >&2; exit 2 ;; esac

stop() {
    local pidfile=$STATE_DIR/$1.pid pid
    [[ -s $pidfile ]] || return 0
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
        echo "[k8s-down] stopped $1 (pid $pid)" >&2
    fi
    rm -f "$pidfile"
}
[[ -d $STATE_DIR ]] || exit 0
stop kueue
stop controller-manager
stop apiserver
stop etcd
if ((PURGE)); then rm -rf "$STATE_DIR"; fi

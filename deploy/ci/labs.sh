#!/usr/bin/env bash
# The labs whose first build is slow, made in the background while `make test` runs (.ci/run
# starts this script and then the tests at once; the tests that need a lab run last and wait
# for it: tests/ci_labs.py).
#
#   deploy/ci/labs.sh        (as root, like deploy/k8s/up.sh and deploy/containers/stack.sh)
#
# Two lanes at once, each build under `nice -n 19` so that the tests keep the CPU:
#   containers  the container images (deploy/containers/stack.sh build: about 5 min the first
#               time, mostly downloads and unpacking; seconds afterwards), for the tests marked
#               containers. While the file `apt-busy` exists in the status directory (.ci/run
#               keeps it until its own Debian installs are done) this lane waits, so that its
#               installs (podman, runc, debootstrap) never meet another on dpkg's lock.
#   k8s         etcd, kube-apiserver, kube-controller-manager and Kueue (deploy/k8s/build.sh:
#               about 17 min of two cores the first time; under `nice -n 19` beside other
#               work, load average 6-9, kube-apiserver alone took 781 s from empty caches
#               against 327 s unniced), then the lab started
#               (deploy/k8s/up.sh, not niced: the tests talk to it), for the tests marked k8s;
#   k8s-tools   then kubectl and Helm (deploy/k8s/build.sh kubectl helm: about 5 + 4 min of CPU
#               the first time) for the Helm chart's tests (tests/queues/test_helm_chart.py).
# Each lab's state is one line in $ARBITER_CI_LABS_DIR/<lab> (default var/ci-labs/):
# `building`, `ready`, or `failed: <why>`; its output goes to <lab>.log beside it, and the
# script's pid to `pid` (a waiting test knows a `building` left by a dead run). A failed lab
# does not stop the others; the exit code is 1 when any lab failed.
# Environment: what deploy/k8s/up.sh and deploy/containers/stack.sh read (ports, caches).
set -uo pipefail
cd "$(dirname "$0")/../.."
DIR=${ARBITER_CI_LABS_DIR:-var/ci-labs}
mkdir -p "$DIR"
echo $$ >"$DIR/pid"

status() {  # LAB LINE: written whole (a reader never sees half a line)
    printf '%s\n' "$2" >"$DIR/$1.part" && mv "$DIR/$1.part" "$DIR/$1"
}

run() {  # LAB COMMAND...: the command's output appended to the lab's log; on failure, say why
    local lab=$1 started=$SECONDS
    shift
    printf '[ci-labs] %s %s: %s\n' "$(date -u +%T)" "$lab" "$*" >>"$DIR/$lab.log"
    "$@" >>"$DIR/$lab.log" 2>&1
    local rc=$? last
    if ((rc == 0)); then
        printf '[ci-labs] %s %s: done in %d s\n' "$(date -u +%T)" "$lab" $((SECONDS - started)) \
            >>"$DIR/$lab.log"
        return 0
    fi
    last=$(grep -v '^\s*$' "$DIR/$lab.log" | tail -n 1 | cut -c1-300)
    status "$lab" "failed: \`$*\` exited $rc after $((SECONDS - started)) s (log: $DIR/$lab.log): $last"
    return 1
}

for lab in containers k8s k8s-tools; do
    : >"$DIR/$lab.log"
    status "$lab" building
done

containers_lane() {
    while [[ -e $DIR/apt-busy ]]; do sleep 2; done
    run containers nice -n 19 bash deploy/containers/stack.sh build || return 1
    status containers ready
}

k8s_lane() {
    local rc=0
    if run k8s nice -n 19 bash deploy/k8s/build.sh kube-apiserver kube-controller-manager etcd kueue &&
        run k8s bash deploy/k8s/up.sh; then
        status k8s ready
    else
        rc=1
    fi
    # Helm's tests need the lab too, but a failed lab still gets its tools built (and named).
    if run k8s-tools nice -n 19 bash deploy/k8s/build.sh kubectl helm; then
        status k8s-tools ready
    else
        rc=1
    fi
    return "$rc"
}

containers_lane &
containers=$!
k8s_lane &
k8s=$!
failed=0
wait "$containers" || failed=1
wait "$k8s" || failed=1
exit "$failed"

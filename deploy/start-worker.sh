#!/bin/sh
# The Celery worker of the container image: starts munged with the cluster's munge key (a
# mounted secret) so that sacctmgr, squeue and scontrol can authenticate, then the worker.
set -eu
KEY=${ARBITER_MUNGE_KEY:-/run/secrets/munge.key}
if [ -s "$KEY" ]; then
    # munged wants a key owned by the user it runs as, readable by nobody else.
    install -m 0400 "$KEY" /var/lib/arbiter-munge/munge.key
    munged --key-file=/var/lib/arbiter-munge/munge.key \
        --socket=/run/munge/munge.socket.2 \
        --pid-file=/var/lib/arbiter-munge/munged.pid \
        --log-file=/var/lib/arbiter-munge/munged.log \
        --seed-file=/var/lib/arbiter-munge/munged.seed
else
    echo "start-worker: no munge key at $KEY; Slurm syncs will report the cluster unreachable" >&2
fi
exec celery -A governance worker --loglevel=info

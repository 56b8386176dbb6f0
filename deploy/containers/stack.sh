#!/usr/bin/env bash
# docker-compose.yml run with podman where no container registry is reachable (CI):
#   bash deploy/containers/stack.sh build     # the images: Arbiter's, PostgreSQL, Redis, nginx
#   bash deploy/containers/stack.sh up        # start (building missing images), wait until healthy
#   bash deploy/containers/stack.sh down      # stop and remove the containers; data is kept
#   bash deploy/containers/stack.sh destroy   # the same, and remove the data volumes
#   bash deploy/containers/stack.sh compose ARGS...   # podman-compose on the stack (ps, logs)
#
# The images are built on the local Debian base of base-image.sh: deploy/Dockerfile with
# BASE_IMAGE=localhost/arbiter-base:bookworm, and PostgreSQL 15, Redis and nginx from Debian's
# packages (postgres.Containerfile, redis.Containerfile, nginx.Containerfile); docker-compose.yml
# takes them through ARBITER_IMAGE, ARBITER_POSTGRES_IMAGE and ARBITER_REDIS_IMAGE. podman keeps
# the images and their layers (outside the work tree): a second build only redoes what changed.
#
# The services, commands, environment and health checks are docker-compose.yml's, run by
# podman-compose (pip: the dev dependencies) with compose.host-network.yml on top: every
# container on the host's network (podman's bridge networks need iptables, which this machine
# lacks), on ports of their own, plus a second web server and an nginx proxy in front of both.
# podman 4.3 runs no health check by itself (no systemd timers) and podman-compose ignores
# `service_healthy` before podman 4.6, so `up` starts the services in the order of their
# dependencies and runs each health check (`podman healthcheck run`) until it passes.
#
# Settings (environment): POSTGRES_PORT (15432), REDIS_PORT (16379), ARBITER_WEB_PORT (18000),
# ARBITER_WEB2_PORT (18001), ARBITER_PROXY_PORT (18080), ARBITER_STACK_PROJECT (arbiter-stack),
# ARBITER_STACK_DIR (var/containers: the generated secrets and the stack's environment file),
# ARBITER_STACK_TIMEOUT (seconds to wait for health, 600), ARBITER_SLURM_CONF_FILE and
# ARBITER_MUNGE_KEY_FILE (a cluster's slurm.conf and munge key for the worker; default: empty
# files, the worker then reports Slurm unreachable).
set -euo pipefail
cd "$(dirname "$0")/../.."

CACHE=${ARBITER_CONTAINER_CACHE:-/var/cache/arbiter-containers}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$CACHE/containers.conf}
export ARBITER_BASE_IMAGE=${ARBITER_BASE_IMAGE:-localhost/arbiter-base:bookworm}
export ARBITER_IMAGE=${ARBITER_IMAGE:-localhost/arbiter:latest}
export ARBITER_POSTGRES_IMAGE=${ARBITER_POSTGRES_IMAGE:-localhost/arbiter-postgres:15}
export ARBITER_REDIS_IMAGE=${ARBITER_REDIS_IMAGE:-localhost/arbiter-redis:7}
export ARBITER_PROXY_IMAGE=${ARBITER_PROXY_IMAGE:-localhost/arbiter-nginx:bookworm}
export POSTGRES_PORT=${POSTGRES_PORT:-15432}
export REDIS_PORT=${REDIS_PORT:-16379}
export ARBITER_WEB_PORT=${ARBITER_WEB_PORT:-18000}
export ARBITER_WEB2_PORT=${ARBITER_WEB2_PORT:-18001}
export ARBITER_PROXY_PORT=${ARBITER_PROXY_PORT:-18080}
PROJECT=${ARBITER_STACK_PROJECT:-arbiter-stack}
STATE=$(mkdir -p "${ARBITER_STACK_DIR:-var/containers}" && cd "${ARBITER_STACK_DIR:-var/containers}" && pwd)
TIMEOUT=${ARBITER_STACK_TIMEOUT:-600}
export ARBITER_COMPOSE_ENV_FILE="$STATE/stack.env"
export ARBITER_PROXY_CONF="$STATE/nginx.conf"

if [[ -x .venv/bin/podman-compose ]]; then
    COMPOSE_BIN=.venv/bin/podman-compose
else
    COMPOSE_BIN=podman-compose
fi

log() { echo "stack: $*" >&2; }

compose() {
    "$COMPOSE_BIN" --project-name "$PROJECT" --env-file "$ARBITER_COMPOSE_ENV_FILE" \
        -f docker-compose.yml -f deploy/containers/compose.host-network.yml "$@"
}

build_one() {  # TAG FILE: one image, with its size and build time
    local tag=$1 file=$2 started=$SECONDS
    podman build --network host --build-arg "BASE_IMAGE=$ARBITER_BASE_IMAGE" -f "$file" \
        -t "$tag" . >"$STATE/build-$(basename "$file").log" 2>&1 ||
        { tail -n 30 "$STATE/build-$(basename "$file").log" >&2; return 1; }
    log "built $tag in $((SECONDS - started)) s, $(podman image inspect --format '{{.Size}}' "$tag" |
        awk '{printf "%.0f MB", $1 / 1e6}')"
}

build() {
    local started=$SECONDS missing=()
    # A fresh CI machine (as root, Debian 12): podman, runc and debootstrap from Debian.
    command -v podman >/dev/null || missing+=(podman)
    command -v runc >/dev/null || missing+=(runc)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    if ((${#missing[@]})); then
        log "installing ${missing[*]} from Debian's packages"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
    fi
    bash deploy/containers/base-image.sh
    build_one "$ARBITER_IMAGE" deploy/Dockerfile
    build_one "$ARBITER_POSTGRES_IMAGE" deploy/containers/postgres.Containerfile
    build_one "$ARBITER_REDIS_IMAGE" deploy/containers/redis.Containerfile
    build_one "$ARBITER_PROXY_IMAGE" deploy/containers/nginx.Containerfile
    log "images ready in $((SECONDS - started)) s"
}

write_environment() {
    # The secrets are made once and kept: the database keeps the password it was made with.
    if [[ ! -s "$STATE/secrets.env" ]]; then
        umask 077
        printf 'DJANGO_SECRET_KEY=%s\nPOSTGRES_PASSWORD=%s\n' \
            "$(head -c 48 /dev/urandom | base64 | tr -d '/+=\n')" \
            "$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$STATE/secrets.env"
    fi
    # shellcheck disable=SC1091
    source "$STATE/secrets.env"
    touch "$STATE/slurm.conf" "$STATE/munge.key"
    local site="http://127.0.0.1:$ARBITER_PROXY_PORT"
    cat >"$ARBITER_COMPOSE_ENV_FILE" <<ENV
# Written by deploy/containers/stack.sh: the compose stack's environment (not for a site).
DJANGO_DEBUG=0
DJANGO_SECRET_KEY=$DJANGO_SECRET_KEY
DJANGO_ALLOWED_HOSTS=127.0.0.1,localhost
DJANGO_CSRF_TRUSTED_ORIGINS=$site,http://127.0.0.1:$ARBITER_WEB_PORT,http://127.0.0.1:$ARBITER_WEB2_PORT
ARBITER_SITE_URL=$site
# Plain HTTP on 127.0.0.1 (a site terminates TLS in its proxy and keeps these on).
DJANGO_SECURE_SSL_REDIRECT=0
DJANGO_SESSION_COOKIE_SECURE=0
DJANGO_CSRF_COOKIE_SECURE=0
DJANGO_SECURE_HSTS_SECONDS=0
POSTGRES_PASSWORD=$POSTGRES_PASSWORD
DATABASE_URL=postgres://arbiter:$POSTGRES_PASSWORD@127.0.0.1:$POSTGRES_PORT/arbiter
CELERY_BROKER_URL=redis://127.0.0.1:$REDIS_PORT/0
POSTGRES_PORT=$POSTGRES_PORT
REDIS_PORT=$REDIS_PORT
ARBITER_WEB_PORT=$ARBITER_WEB_PORT
ARBITER_WEB2_PORT=$ARBITER_WEB2_PORT
ARBITER_SLURM_CONF_FILE=${ARBITER_SLURM_CONF_FILE:-$STATE/slurm.conf}
ARBITER_MUNGE_KEY_FILE=${ARBITER_MUNGE_KEY_FILE:-$STATE/munge.key}
ENV
    cat >"$ARBITER_PROXY_CONF" <<CONF
# Written by deploy/containers/stack.sh: round robin over the two web servers.
worker_processes 1;
pid /tmp/nginx.pid;
events { worker_connections 256; }
http {
    access_log /dev/stdout;
    upstream arbiter { server 127.0.0.1:$ARBITER_WEB_PORT; server 127.0.0.1:$ARBITER_WEB2_PORT; }
    server {
        listen 127.0.0.1:$ARBITER_PROXY_PORT;
        location / {
            proxy_pass http://arbiter;
            proxy_set_header Host \$http_host;
            proxy_set_header X-Forwarded-For \$remote_addr;
            add_header X-Arbiter-Upstream \$upstream_addr always;
        }
    }
}
CONF
}

container() { echo "${PROJECT}_$1_1"; }

wait_healthy() {  # SERVICE...: run each health check until it passes
    local service deadline=$((SECONDS + TIMEOUT))
    for service in "$@"; do
        until podman healthcheck run "$(container "$service")" >/dev/null 2>&1; do
            if [[ "$(podman inspect --format '{{.State.Running}}' "$(container "$service")")" != true ]] ||
                ((SECONDS > deadline)); then
                log "$service is not healthy:"
                podman logs --tail 40 "$(container "$service")" >&2 || true
                return 1
            fi
            sleep 2
        done
        log "$service healthy after $((SECONDS - STARTED)) s"
    done
}

up() {
    # Missing images are built; `build` builds again what changed (CI runs it before `up`).
    local image
    for image in "$ARBITER_IMAGE" "$ARBITER_POSTGRES_IMAGE" "$ARBITER_REDIS_IMAGE" "$ARBITER_PROXY_IMAGE"; do
        podman image exists "$image" || { build; break; }
    done
    write_environment
    STARTED=$SECONDS
    compose up -d --no-deps postgres redis >"$STATE/compose.log" 2>&1
    wait_healthy postgres redis
    compose up -d --no-deps migrate >>"$STATE/compose.log" 2>&1
    local code
    code=$(podman wait "$(container migrate)")
    if [[ "$code" != 0 ]]; then
        podman logs --tail 40 "$(container migrate)" >&2
        log "migrate exited $code"
        return 1
    fi
    log "migrate done after $((SECONDS - STARTED)) s"
    compose up -d --no-deps web web2 worker beat proxy >>"$STATE/compose.log" 2>&1
    wait_healthy web web2 worker beat
    log "stack up and healthy in $((SECONDS - STARTED)) s: http://127.0.0.1:$ARBITER_PROXY_PORT/"
    echo "$((SECONDS - STARTED))" >"$STATE/start-seconds"
}

case "${1:-}" in
    build) build ;;
    up) up ;;
    down) write_environment; compose down >"$STATE/compose.log" 2>&1 ;;
    destroy) write_environment; compose down --volumes >"$STATE/compose.log" 2>&1 ;;
    compose) shift; write_environment; compose "$@" ;;
    *) echo "usage: $0 build|up|down|destroy|compose ARGS..." >&2; exit 2 ;;
esac

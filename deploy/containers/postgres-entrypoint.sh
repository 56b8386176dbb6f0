#!/bin/sh
# The local PostgreSQL image's entrypoint (postgres.Containerfile): on an empty data
# directory, initdb with the user and password of POSTGRES_USER/POSTGRES_PASSWORD and create
# POSTGRES_DB, as the official image does; then run the server as the user postgres.
set -eu
: "${POSTGRES_USER:=postgres}" "${POSTGRES_DB:=$POSTGRES_USER}"
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
mkdir -p "$PGDATA" /run/postgresql
chown postgres:postgres "$PGDATA" /run/postgresql
chmod 0700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    chown postgres "$pwfile"
    runuser -u postgres -- initdb --username="$POSTGRES_USER" --pwfile="$pwfile" \
        --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    # A server on the socket only, to create the database.
    runuser -u postgres -- pg_ctl -w -o "-c listen_addresses=''" start >/dev/null
    if [ "$POSTGRES_DB" != postgres ]; then
        runuser -u postgres -- createdb --username="$POSTGRES_USER" "$POSTGRES_DB"
    fi
    runuser -u postgres -- pg_ctl -w -m fast stop >/dev/null
    echo "postgres-entrypoint: initialised $PGDATA with database $POSTGRES_DB"
fi
if [ "$1" = postgres ]; then
    shift
    exec runuser -u postgres -- postgres -c listen_addresses="${POSTGRES_LISTEN:-*}" "$@"
fi
exec "$@"

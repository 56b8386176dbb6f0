#!/usr/bin/env bash
# Restore a backup of deploy/backup.sh into an empty database, then migrate it to this code
# (a backup of an earlier release is upgraded on the way).
#   createdb arbiter_restored   # or: psql ... -c 'create database arbiter_restored'
#   DATABASE_URL=postgres://user:password@host:5432/arbiter_restored bash deploy/restore.sh FILE
# PYTHON: the interpreter that runs manage.py (default: python).
set -euo pipefail
cd "$(dirname "$0")/.."
in=${1:?usage: DATABASE_URL=... deploy/restore.sh FILE}
: "${DATABASE_URL:?set DATABASE_URL to the (empty) database to restore into}"
[ -r "$in" ] || { echo "restore: cannot read $in" >&2; exit 1; }
tables=$(psql "$DATABASE_URL" -Atqc \
    "select count(*) from information_schema.tables where table_schema = 'public'")
if [ "$tables" != 0 ]; then
    echo "restore: the database has $tables tables already; restore into a new, empty one" >&2
    exit 1
fi
pg_restore --no-owner --no-privileges --exit-on-error --dbname="$DATABASE_URL" "$in"
"${PYTHON:-python}" manage.py migrate --noinput
echo "restore: $in restored and migrated"

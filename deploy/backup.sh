#!/usr/bin/env bash
# Back up Arbiter's database: one pg_dump in PostgreSQL's custom format (compressed, restored
# with deploy/restore.sh). Every rule, its history, requests, workload evidence and reviews are
# in the database; nothing else needs a backup (Redis holds only queued tasks).
#   DATABASE_URL=postgres://user:password@host:5432/arbiter bash deploy/backup.sh FILE
set -euo pipefail
out=${1:?usage: DATABASE_URL=... deploy/backup.sh FILE}
: "${DATABASE_URL:?set DATABASE_URL to the database to back up}"
pg_dump --format=custom --no-owner --no-privileges --file="$out" "$DATABASE_URL"
echo "backup: wrote $out ($(du -h "$out" | cut -f1))"

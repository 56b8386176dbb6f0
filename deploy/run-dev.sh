#!/usr/bin/env bash
# The demo: migrate, load the demo data, then run the web server and a Celery worker with
# beat until Ctrl-C. Started by `make run` (which sets up .venv first).
set -euo pipefail
cd "$(dirname "$0")/.."

export DJANGO_DEBUG="${DJANGO_DEBUG:-1}"
export DJANGO_SETTINGS_MODULE=governance.settings
HOST="${HOST:-127.0.0.1}"
PORT="${PORT:-8000}"
PY=.venv/bin/python
data_dir="$($PY -c 'from django.conf import settings; print(settings.DATA_DIR)')"

$PY manage.py migrate --noinput
$PY manage.py seed_demo
# The job history before the requests: a request's evidence (usage, waits) is fixed when it
# is submitted, from the history there is then.
$PY manage.py seed_demo_workload
$PY manage.py seed_demo_approvals
$PY manage.py seed_demo_reviews

worker="" web=""
stop() {
    trap - INT TERM EXIT
    echo "Stopping the web server and the worker..."
    # The worker's main process stops its pool and beat (warm shutdown); the web server's
    # whole process group goes, so that the autoreloader's child goes too.
    if [ -n "$worker" ]; then kill -TERM "$worker" 2>/dev/null || true; fi
    if [ -n "$web" ]; then kill -TERM -- "-$web" 2>/dev/null || true; fi
    wait || true
}
trap stop INT TERM EXIT

# Each in a process group of its own: Ctrl-C reaches this script only, which stops them.
set -m
$PY -m celery -A governance worker --beat --loglevel=info \
    --schedule "$data_dir/celerybeat-schedule" &
worker=$!
$PY manage.py runserver "$HOST:$PORT" &
web=$!
set +m

# Beat sends the review reminders every six hours; send them once now through the broker.
$PY -c 'import django; django.setup(); from governance import tasks
tasks.review_reminders_send.delay()'

cat <<BANNER

  Arbiter is starting at http://$HOST:$PORT/
  Demo logins (password: arbiter-demo):
    ops       edits the rules
    ops2      a second ops login: approves and applies what ops proposes
    approver  approves requests, owns the "Key project" tier
    lead      leads the Vision project
    member    member of the Vision project
  API docs: http://$HOST:$PORT/api/docs/ (a token for scripts: "API tokens" at the top right)
  Walk-through: README.md, "A first walk-through".
  Mails (review reminders) are printed in the worker's log. Ctrl-C stops everything.

BANNER

# Stop everything when either process ends (or at Ctrl-C).
wait -n

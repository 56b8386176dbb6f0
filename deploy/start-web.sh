#!/bin/sh
# The web container's command: collect static files (served by WhiteNoise), then gunicorn.
set -eu
python manage.py collectstatic --noinput
exec gunicorn governance.wsgi:application --bind "0.0.0.0:${PORT:-8000}" --access-logfile -

#!/usr/bin/env bash
# Regenerate the screenshots of this folder (the replay page of the demo's proposed change and
# the month-to-date review, English and Chinese, 1,280 px wide) in the headless Chromium the
# end-to-end tests drive (deploy/install-chromium.sh installs it). Run from the repository root:
#     bash docs/screenshots/regenerate.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ARBITER_SCREENSHOTS_DIR="$here" .venv/bin/pytest tests/reports/test_screenshots.py -q -m e2e "$@"

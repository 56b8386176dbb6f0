#!/usr/bin/env bash
# Install Debian's Chromium for the end-to-end tests, unless a Chromium is already there.
# (Playwright drives this browser; it never downloads one of its own.)
set -euo pipefail

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    echo "Chromium is installed: $(command -v chromium || command -v chromium-browser)"
    exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update
$sudo apt-get install -y --no-install-recommends chromium
command -v chromium

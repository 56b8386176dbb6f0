#!/usr/bin/env bash
# Install Debian's Chromium for the end-to-end tests, and a CJK font so that the Simplified
# Chinese pages render as characters rather than boxes. Skips what is already there.
# (Playwright drives this browser; it never downloads one of its own.)
set -euo pipefail

packages=()
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    echo "Chromium is installed: $(command -v chromium || command -v chromium-browser)"
else
    packages+=(chromium)
fi
if command -v fc-list >/dev/null 2>&1 && [ -n "$(fc-list :lang=zh family)" ]; then
    echo "A CJK font is installed: $(fc-list :lang=zh family | head -n 1)"
else
    # WenQuanYi Zen Hei: one 10 MB package that covers Simplified Chinese.
    packages+=(fonts-wqy-zenhei fontconfig)
fi
[ ${#packages[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
# Other installers on the same machine wait for each other on one lock.
lock=()
if command -v flock >/dev/null 2>&1; then
    lock=(flock "${APT_LOCK:-/tmp/apt.lock}")
fi
$sudo "${lock[@]}" apt-get update
$sudo "${lock[@]}" apt-get install -y --no-install-recommends "${packages[@]}"
command -v chromium || command -v chromium-browser
fc-list :lang=zh family | head -n 1

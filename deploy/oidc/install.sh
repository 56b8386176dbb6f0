#!/usr/bin/env bash
# Install the test OpenID Connect provider's one dependency (oidc-provider, pinned by
# package-lock.json) with npm into a cache outside the work tree, once per lock file.
# ARBITER_OIDC_CACHE names the cache (default /var/cache/arbiter-oidc); the tests and
# run.sh find the modules in "$ARBITER_OIDC_CACHE/node_modules".
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${ARBITER_OIDC_CACHE:-/var/cache/arbiter-oidc}"
command -v node >/dev/null || { echo "Node.js is needed for the test OpenID provider." >&2; exit 1; }
mkdir -p "$cache"
if [ -f "$cache/package-lock.json" ] && cmp -s "$here/package-lock.json" "$cache/package-lock.json" \
    && [ -f "$cache/node_modules/oidc-provider/package.json" ]; then
    echo "oidc-provider is installed in $cache"
    exit 0
fi
cp "$here/package.json" "$here/package-lock.json" "$cache/"
(cd "$cache" && npm ci --no-audit --no-fund --omit=dev)
echo "Installed oidc-provider $(node -p "require('$cache/node_modules/oidc-provider/package.json').version") in $cache"

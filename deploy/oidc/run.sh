#!/usr/bin/env bash
# Start the test OpenID provider by hand on 127.0.0.1:${ARBITER_OIDC_PROVIDER_PORT:-9400} for
# the demo (`make run` on 127.0.0.1:8000), with the people of people.example.json and a new
# signing key kept in var/oidc. Prints the settings for .env; Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash deploy/oidc/install.sh >/dev/null
port="${ARBITER_OIDC_PROVIDER_PORT:-9400}"
site="${ARBITER_SITE_URL:-http://127.0.0.1:8000}"
mkdir -p var/oidc
[ -f var/oidc/people.json ] || cp deploy/oidc/people.example.json var/oidc/people.json
[ -f var/oidc/keys.json ] || .venv/bin/python - <<'PY'
import json

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

key = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa.generate_private_key(65537, 2048)))
key.pop("key_ops", None)
key.update({"kid": "arbiter-demo-key", "use": "sig", "alg": "RS256"})
open("var/oidc/keys.json", "w").write(json.dumps({"keys": [key]}))
PY
secret="${ARBITER_OIDC_CLIENT_SECRET:-arbiter-demo-secret}"
cat <<ENV
Put these in .env, then restart make run:
ARBITER_OIDC_ISSUER=http://127.0.0.1:$port
ARBITER_OIDC_CLIENT_ID=arbiter
ARBITER_OIDC_CLIENT_SECRET=$secret
ARBITER_OIDC_PROJECT_GROUPS=team-vision=vision,team-speech=speech
ARBITER_OIDC_ROLE_GROUPS=arbiter-ops=ops
ENV
export ARBITER_OIDC_PROVIDER_PORT="$port"
export ARBITER_OIDC_PROVIDER_CLIENT="{\"client_id\":\"arbiter\",\"client_secret\":\"$secret\",\"redirect_uris\":[\"$site/accounts/oidc/callback/\"],\"post_logout_redirect_uris\":[\"$site/accounts/login/\"]}"
export ARBITER_OIDC_PROVIDER_PEOPLE="$PWD/var/oidc/people.json"
export ARBITER_OIDC_PROVIDER_KEYS="$PWD/var/oidc/keys.json"
export ARBITER_OIDC_PROVIDER_MODULES="${ARBITER_OIDC_CACHE:-/var/cache/arbiter-oidc}/node_modules"
exec node deploy/oidc/provider.mjs

#!/usr/bin/env bash
# Start a real Kubernetes API server (v1.20.2) with Debian's etcd on 127.0.0.1 (run as root).
#
#   deploy/k8s/up.sh        build the API server if no cached binary exists, start, wait
#
# For Arbiter's Kueue sync tests and benchmark: only etcd and kube-apiserver run (no
# controller manager, scheduler or Kueue controller), with a fresh etcd each start, a CA
# and serving certificate made with openssl, and a static bearer token in group
# system:masters. It writes into the state directory: ca.crt, token, kubeconfig, and `env`
# (KUBE_API_SERVER, KUBE_CA_FILE, KUBE_TOKEN_FILE, KUBECONFIG), and prints the same lines.
# Stop it with deploy/k8s/down.sh. Idempotent: a server that already answers is reused.
#
# Environment (all optional):
#   ARBITER_K8S_DIR        state directory (default: <repo>/var/k8s)
#   ARBITER_K8S_CACHE      where the built binary is kept between runs, outside the work tree
#                          (default: /var/cache/arbiter-k8s)
#   ARBITER_K8S_PORT       the API server's HTTPS port (default 16443)
#   ARBITER_K8S_ETCD_PORT  etcd's client port; the peer port is the next one (default 23790)
#   ARBITER_K8S_TIMEOUT    seconds to wait for each daemon (default 90)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/../.." && pwd)
STATE_DIR=${ARBITER_K8S_DIR:-$REPO_ROOT/var/k8s}
case $STATE_DIR in /*) ;; *) STATE_DIR=$REPO_ROOT/$STATE_DIR ;; esac
CACHE=${ARBITER_K8S_CACHE:-/var/cache/arbiter-k8s}
PORT=${ARBITER_K8S_PORT:-16443}
ETCD_PORT=${ARBITER_K8S_ETCD_PORT:-23790}
TIMEOUT=${ARBITER_K8S_TIMEOUT:-90}
BIN=$CACHE/kube-apiserver-v1.20.2
say() { printf '[k8s-up] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[[ $(id -u) -eq 0 ]] || die "run as root (may install packages)"
mkdir -p "$STATE_DIR" "$CACHE"
chmod 700 "$STATE_DIR"
T0=$(date +%s)

alive() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }
ready() {
    [[ -s $STATE_DIR/token ]] || return 1
    curl -fsS --max-time 3 --cacert "$STATE_DIR/ca.crt" \
        -H "Authorization: Bearer $(cat "$STATE_DIR/token")" \
        "https://127.0.0.1:$PORT/readyz" >/dev/null 2>&1
}
print_env() {
    cat "$STATE_DIR/env"
}

if alive "$STATE_DIR/apiserver.pid" && ready; then
    say "already running (pid $(cat "$STATE_DIR/apiserver.pid"))"
    print_env
    exit 0
fi

# --- 1. The binary: cached, or built from Debian's source package (~11 min) ----------------
if [[ ! -x $BIN ]]; then
    say "no cached kube-apiserver in $CACHE: building it (about 11 minutes on two cores)"
    bash "$HERE/build-kube-apiserver.sh" "$BIN" >"$CACHE/build.log" 2>&1 ||
        { tail -n 40 "$CACHE/build.log" >&2; die "the kube-apiserver build failed (log: $CACHE/build.log)"; }
fi
if ! command -v etcd >/dev/null || ! command -v openssl >/dev/null; then
    say "installing etcd-server and openssl"
    DEBIAN_FRONTEND=noninteractive apt-get -y -q -o DPkg::Lock::Timeout=600 install \
        --no-install-recommends etcd-server openssl curl >&2
fi
"$BIN" --version >&2

# --- 2. Stop leftovers, then fresh certificates, token and etcd data -----------------------
bash "$HERE/down.sh" >/dev/null 2>&1 || true
rm -rf "$STATE_DIR/etcd" "$STATE_DIR/pki"
mkdir -p "$STATE_DIR/pki" "$STATE_DIR/log"
PKI=$STATE_DIR/pki
openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=arbiter-test-ca" \
    -keyout "$PKI/ca.key" -out "$PKI/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
    -keyout "$PKI/apiserver.key" -out "$PKI/apiserver.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$PKI/ext.cnf"
openssl x509 -req -in "$PKI/apiserver.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
    -CAcreateserial -days 30 -extfile "$PKI/ext.cnf" -out "$PKI/apiserver.crt" 2>/dev/null
openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
cp "$PKI/ca.crt" "$STATE_DIR/ca.crt"
openssl rand -hex 24 >"$STATE_DIR/token"
chmod 600 "$STATE_DIR/token"
printf '%s,arbiter-admin,arbiter-admin,system:masters\n' "$(cat "$STATE_DIR/token")" >"$PKI/tokens.csv"

# --- 3. etcd, then the API server, each detached and recorded by PID -----------------------
setsid etcd --name arbiter --data-dir "$STATE_DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
    --initial-cluster "arbiter=http://127.0.0.1:$((ETCD_PORT + 1))" \
    >"$STATE_DIR/log/etcd.log" 2>&1 </dev/null &
echo $! >"$STATE_DIR/etcd.pid"
for ((i = 0; i < TIMEOUT; i++)); do
    curl -fsS --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" >/dev/null 2>&1 && break
    alive "$STATE_DIR/etcd.pid" || { tail -n 20 "$STATE_DIR/log/etcd.log" >&2; die "etcd exited"; }
    sleep 1
done

setsid "$BIN" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$PORT" \
    --insecure-port 0 \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --token-auth-file "$PKI/tokens.csv" --authorization-mode RBAC \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range 10.96.0.0/24 \
    >"$STATE_DIR/log/apiserver.log" 2>&1 </dev/null &
echo $! >"$STATE_DIR/apiserver.pid"
for ((i = 0; i < TIMEOUT; i++)); do
    ready && break
    alive "$STATE_DIR/apiserver.pid" ||
        { tail -n 30 "$STATE_DIR/log/apiserver.log" >&2; die "kube-apiserver exited"; }
    sleep 1
done
ready || { tail -n 30 "$STATE_DIR/log/apiserver.log" >&2; die "kube-apiserver not ready after $TIMEOUT s"; }

cat >"$STATE_DIR/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: arbiter-test
  cluster:
    server: https://127.0.0.1:$PORT
    certificate-authority: $STATE_DIR/ca.crt
users:
- name: arbiter-admin
  user:
    token: $(cat "$STATE_DIR/token")
contexts:
- name: arbiter-test
  context: {cluster: arbiter-test, user: arbiter-admin}
current-context: arbiter-test
KUBECONFIG
chmod 600 "$STATE_DIR/kubeconfig"
cat >"$STATE_DIR/env" <<ENV
KUBE_API_SERVER=https://127.0.0.1:$PORT
KUBE_CA_FILE=$STATE_DIR/ca.crt
KUBE_TOKEN_FILE=$STATE_DIR/token
KUBECONFIG=$STATE_DIR/kubeconfig
ENV
say "kube-apiserver v1.20.2 ready on https://127.0.0.1:$PORT in $(($(date +%s) - T0)) s"
print_env

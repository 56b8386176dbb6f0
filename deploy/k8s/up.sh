#!/usr/bin/env bash
# Start a real Kubernetes API server (v1.35) with etcd, a kube-controller-manager and the Kueue
# controller manager on 127.0.0.1 (run as root).
#
#   deploy/k8s/up.sh        build the binaries if not cached (deploy/k8s/build.sh), start, wait
#
# For Arbiter's Kueue sync and truth tests and benchmark: etcd, kube-apiserver (with
# ValidatingAdmissionPolicy, GA since 1.30, and MutatingAdmissionPolicy, admissionregistration
# .k8s.io/v1beta1 in 1.34 and 1.35, off by default: feature gate MutatingAdmissionPolicy,
# runtime-config admissionregistration.k8s.io/v1beta1, admission plugin of the same name) and
# Kueue, which runs outside the cluster with a kubeconfig and the configuration in
# deploy/k8s/kueue-config.yaml. A kube-controller-manager (the deployment, replicaset,
# statefulset, job, garbage-collector and service-account controllers; the port PORT+3) makes the Pods of
# Deployments, StatefulSets and admitted Jobs; no scheduler or kubelet: Pods stay Pending, and
# Kueue admits, borrows, reclaims and preempts on their Workload objects. A fresh
# etcd each start; a CA and certificates made with openssl (the API server's, and the one of
# Kueue's webhook server, which the API server calls at https://127.0.0.1:<webhook port>
# through webhook configurations generated from the Kueue module's own); a static bearer token
# in group system:masters. Kueue's CRDs (all of them, from the module) are installed before
# Kueue starts. It writes into the state directory: ca.crt, token, kubeconfig, and `env`
# (KUBE_API_SERVER, KUBE_CA_FILE, KUBE_TOKEN_FILE, KUBECONFIG, KUEUE_VERSION), and prints the
# same lines. Stop it with deploy/k8s/down.sh.
# Idempotent: a lab that already answers (API server and Kueue) is reused.
#
# Environment (all optional):
#   ARBITER_K8S_DIR        state directory (default: <repo>/var/k8s)
#   ARBITER_K8S_CACHE      where the binaries and Go caches are kept, outside the work tree
#                          (default: /var/cache/arbiter-k8s)
#   ARBITER_K8S_PORT       the API server's HTTPS port (default 16443); Kueue's webhook
#                          server uses PORT+1, its health probe PORT+2
#   ARBITER_K8S_ETCD_PORT  etcd's client port; the peer port is the next one (default 23790)
#   ARBITER_K8S_TIMEOUT    seconds to wait for each daemon (default 120)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/../.." && pwd)
STATE_DIR=${ARBITER_K8S_DIR:-$REPO_ROOT/var/k8s}
case $STATE_DIR in /*) ;; *) STATE_DIR=$REPO_ROOT/$STATE_DIR ;; esac
CACHE=${ARBITER_K8S_CACHE:-/var/cache/arbiter-k8s}
PORT=${ARBITER_K8S_PORT:-16443}
ETCD_PORT=${ARBITER_K8S_ETCD_PORT:-23790}
TIMEOUT=${ARBITER_K8S_TIMEOUT:-120}
WEBHOOK_PORT=$((PORT + 1))
HEALTH_PORT=$((PORT + 2))
K8S_VERSION=${ARBITER_K8S_VERSION:-v1.35.4}
ETCD_VERSION=${ARBITER_ETCD_VERSION:-v3.6.5}
KUEUE_VERSION=${ARBITER_KUEUE_VERSION:-v0.17.0}
BIN=$CACHE/bin/kube-apiserver-$K8S_VERSION
KCM=$CACHE/bin/kube-controller-manager-$K8S_VERSION
KCM_PORT=$((PORT + 3))
ETCD=$CACHE/bin/etcd-$ETCD_VERSION
KUEUE=$CACHE/bin/kueue-$KUEUE_VERSION
KUEUE_MODULE=$CACHE/gomod/sigs.k8s.io/kueue@$KUEUE_VERSION
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

kueue_ready() { curl -fsS --max-time 3 "http://127.0.0.1:$HEALTH_PORT/readyz" >/dev/null 2>&1; }

kcm_ready() { curl -fsSk --max-time 3 "https://127.0.0.1:$KCM_PORT/healthz" >/dev/null 2>&1; }

if alive "$STATE_DIR/apiserver.pid" && ready && alive "$STATE_DIR/kueue.pid" && kueue_ready &&
    alive "$STATE_DIR/controller-manager.pid" && kcm_ready; then
    say "already running (pid $(cat "$STATE_DIR/apiserver.pid"))"
    print_env
    exit 0
fi

# --- 1. The binaries: cached, or built from their Go modules (deploy/k8s/build.sh) ----------
if [[ ! -x $BIN || ! -x $KCM || ! -x $ETCD || ! -x $KUEUE || ! -d $KUEUE_MODULE ]]; then
    say "building what is missing in $CACHE/bin (about 17 minutes on two shared cores)"
    mkdir -p "$CACHE/logs"
    ARBITER_K8S_VERSION=$K8S_VERSION ARBITER_ETCD_VERSION=$ETCD_VERSION \
        ARBITER_KUEUE_VERSION=$KUEUE_VERSION bash "$HERE/build.sh" kube-apiserver kube-controller-manager \
        etcd kueue >"$CACHE/logs/build.log" 2>&1 ||
        { tail -n 40 "$CACHE/logs/build.log" >&2; die "the build failed (log: $CACHE/logs/build.log)"; }
fi
if ! command -v openssl >/dev/null || ! command -v curl >/dev/null || ! python3 -c "import yaml" 2>/dev/null; then
    say "installing openssl, curl and python3-yaml"
    DEBIAN_FRONTEND=noninteractive apt-get -y -q -o DPkg::Lock::Timeout=600 install \
        --no-install-recommends openssl curl python3-yaml >&2
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
# Kueue's webhook server: a certificate for 127.0.0.1 signed by the same CA.
mkdir -p "$PKI/webhook"
openssl req -newkey rsa:2048 -nodes -subj "/CN=kueue-webhook" \
    -keyout "$PKI/webhook/tls.key" -out "$PKI/webhook.csr" 2>/dev/null
openssl x509 -req -in "$PKI/webhook.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
    -CAcreateserial -days 30 -extfile "$PKI/ext.cnf" -out "$PKI/webhook/tls.crt" 2>/dev/null
cp "$PKI/ca.crt" "$STATE_DIR/ca.crt"
openssl rand -hex 24 >"$STATE_DIR/token"
chmod 600 "$STATE_DIR/token"
printf '%s,arbiter-admin,arbiter-admin,system:masters\n' "$(cat "$STATE_DIR/token")" >"$PKI/tokens.csv"

# --- 3. etcd, then the API server, each detached and recorded by PID -----------------------
setsid "$ETCD" --name arbiter --data-dir "$STATE_DIR/etcd" \
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
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --token-auth-file "$PKI/tokens.csv" --authorization-mode RBAC \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range 10.96.0.0/24 \
    --feature-gates MutatingAdmissionPolicy=true \
    --runtime-config admissionregistration.k8s.io/v1beta1=true \
    --enable-admission-plugins NamespaceLifecycle,ServiceAccount,DefaultStorageClass,MutatingAdmissionPolicy,MutatingAdmissionWebhook,ValidatingAdmissionPolicy,ValidatingAdmissionWebhook,ResourceQuota \
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
# --- 4. Kueue: its CRDs and namespace, its webhook configurations, then the manager ----------
PY=(python3 "$HERE/kueue-lab.py")
API=(https://127.0.0.1:$PORT "$STATE_DIR/ca.crt" "$STATE_DIR/token")
"${PY[@]}" apply "${API[@]}" "$KUEUE_MODULE"/config/components/crd/bases/*.yaml
printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: kueue-system}\n' >"$STATE_DIR/kueue-ns.yaml"
"${PY[@]}" apply "${API[@]}" "$STATE_DIR/kueue-ns.yaml"
"${PY[@]}" webhooks "$KUEUE_MODULE/config/components/webhook/manifests.yaml" "$PKI/ca.crt" \
    "https://127.0.0.1:$WEBHOOK_PORT" >"$STATE_DIR/kueue-webhooks.yaml"
sed -e "s|@HEALTH_PORT@|$HEALTH_PORT|" -e "s|@WEBHOOK_PORT@|$WEBHOOK_PORT|" \
    -e "s|@CERT_DIR@|$PKI/webhook|" "$HERE/kueue-config.yaml" >"$STATE_DIR/kueue-config.yaml"
# Without internal certificate management Kueue 0.17 serves its metrics with the certificate
# in /etc/kueue/metrics/certs (a fixed path; metrics are off here, but the files must exist).
if [[ ! -s /etc/kueue/metrics/certs/tls.crt ]]; then
    mkdir -p /etc/kueue/metrics/certs
    cp "$PKI/webhook/tls.crt" "$PKI/webhook/tls.key" /etc/kueue/metrics/certs/
fi
# VisibilityOnDemand off: its API server extension wants certificates in a fixed path and an
# APIService; Arbiter reads pending reasons from the Workloads' own conditions.
KUBECONFIG=$STATE_DIR/kubeconfig setsid "$KUEUE" --config "$STATE_DIR/kueue-config.yaml" \
    --feature-gates VisibilityOnDemand=false \
    >"$STATE_DIR/log/kueue.log" 2>&1 </dev/null &
echo $! >"$STATE_DIR/kueue.pid"
for ((i = 0; i < TIMEOUT; i++)); do
    kueue_ready && break
    alive "$STATE_DIR/kueue.pid" || { tail -n 30 "$STATE_DIR/log/kueue.log" >&2; die "kueue exited"; }
    sleep 1
done
kueue_ready || { tail -n 30 "$STATE_DIR/log/kueue.log" >&2; die "kueue not ready after $TIMEOUT s"; }
# The webhooks go in only once their server answers (else every Job and Kueue object would be
# refused while Kueue starts).
"${PY[@]}" apply "${API[@]}" "$STATE_DIR/kueue-webhooks.yaml"

# --- 5. kube-controller-manager: the controllers that make Pods (Deployments' ReplicaSets,
# StatefulSets, Jobs once Kueue admits them), the garbage collector and the service-account
# controller (a namespace's "default" account, which Pods need); each controller with
# its own service account (--use-service-account-credentials), as on a real cluster, so that
# Arbiter's GPU policy tells the job controller's Pods apart. No namespace controller: the
# tests' namespaces stay Terminating once deleted, as before. No scheduler or kubelet: Pods
# stay Pending (Kueue's gate removed once admitted).
setsid "$KCM" --kubeconfig "$STATE_DIR/kubeconfig" \
    --authentication-kubeconfig "$STATE_DIR/kubeconfig" --authorization-kubeconfig "$STATE_DIR/kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$KCM_PORT" --leader-elect=false \
    --use-service-account-credentials=true \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --controllers deployment,replicaset,statefulset,job,garbagecollector,serviceaccount \
    >"$STATE_DIR/log/controller-manager.log" 2>&1 </dev/null &
echo $! >"$STATE_DIR/controller-manager.pid"
for ((i = 0; i < TIMEOUT; i++)); do
    kcm_ready && break
    alive "$STATE_DIR/controller-manager.pid" ||
        { tail -n 30 "$STATE_DIR/log/controller-manager.log" >&2; die "kube-controller-manager exited"; }
    sleep 1
done
kcm_ready || { tail -n 30 "$STATE_DIR/log/controller-manager.log" >&2; die "kube-controller-manager not ready after $TIMEOUT s"; }

cat >"$STATE_DIR/env" <<ENV
KUBE_API_SERVER=https://127.0.0.1:$PORT
KUBE_CA_FILE=$STATE_DIR/ca.crt
KUBE_TOKEN_FILE=$STATE_DIR/token
KUBECONFIG=$STATE_DIR/kubeconfig
KUEUE_VERSION=$KUEUE_VERSION
ENV
say "kube-apiserver $K8S_VERSION, kube-controller-manager, etcd $ETCD_VERSION and Kueue $KUEUE_VERSION ready on https://127.0.0.1:$PORT in $(($(date +%s) - T0)) s"
print_env

#!/usr/bin/env bash
# Build kube-apiserver v1.20.2 from Debian bookworm's `kubernetes` source package (run as root).
#
#   deploy/k8s/build-kube-apiserver.sh OUT_BINARY
#
# No package registry ships a kube-apiserver binary, but the bookworm source package
# `kubernetes` (1.20.5+really1.20.2) holds the whole upstream tree with vendor/. Debian builds
# only kubectl from it; this script builds cmd/kube-apiserver the way Debian's rules build Go
# (GOPATH mode) with Debian's Go, after:
#   - generating pkg/generated/openapi (`make gen_openapi`: not shipped in the tarball), and
#   - replacing the vendored github.com/modern-go/reflect2 v1.0.1 (crashes under Go >= 1.18 on
#     the first CRD request) with Debian's golang-github-modern-go-reflect2-dev 1.0.2.
# About 11 minutes on two cores. The scratch directory (sources, Go build cache: ~1.5 GB) is
# removed afterwards; only OUT_BINARY is kept. deploy/k8s/up.sh calls this when its cached
# binary is missing.
#
# Environment (optional):
#   ARBITER_K8S_BUILD_DIR   scratch directory (default: a new directory from mktemp -d)
set -euo pipefail

OUT=${1:?usage: build-kube-apiserver.sh OUT_BINARY}
VERSION=v1.20.2
say() { printf '[k8s-build] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[[ $(id -u) -eq 0 ]] || die "run as root (installs Debian packages)"
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac
mkdir -p "$(dirname "$OUT")"

# --- 1. Debian packages: Go, etcd, reflect2 1.0.2 -------------------------------------------
PACKAGES=(golang-go etcd-server golang-github-modern-go-reflect2-dev make openssl curl)
missing=()
for p in "${PACKAGES[@]}"; do
    [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]})); then
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -y -q -o DPkg::Lock::Timeout=600 install --no-install-recommends "${missing[@]}" >&2 \
        || { apt-get -q -o DPkg::Lock::Timeout=600 update >&2 &&
            apt-get -y -q -o DPkg::Lock::Timeout=600 install --no-install-recommends "${missing[@]}" >&2; }
fi
REFLECT2=/usr/share/gocode/src/github.com/modern-go/reflect2
[[ -f $REFLECT2/reflect2.go ]] || die "Debian's reflect2 sources not found in $REFLECT2"

W=${ARBITER_K8S_BUILD_DIR:-$(mktemp -d)}
mkdir -p "$W"
cleanup() { [[ -n ${ARBITER_K8S_KEEP_BUILD:-} ]] || rm -rf "$W"; }
trap cleanup EXIT
T0=$(date +%s)

# --- 2. The source package, through private apt lists with deb-src entries ------------------
# The deb-src entries are derived from the machine's own deb822 list (no mirror named here).
mkdir -p "$W/apt/parts" "$W/apt/lists/partial" "$W/apt/cache/archives/partial" "$W/src"
shopt -s nullglob
srcs=(/etc/apt/sources.list.d/*.sources)
((${#srcs[@]})) || die "no deb822 apt sources in /etc/apt/sources.list.d to derive deb-src from"
sed 's/^Types: deb$/Types: deb-src/' "${srcs[@]}" >"$W/apt/parts/src.sources"
APT=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$W/apt/parts"
    -o "Dir::State::Lists=$W/apt/lists" -o "Dir::Cache=$W/apt/cache" -o "APT::Sandbox::User=root")
say "apt-get source --download-only kubernetes"
apt-get -q "${APT[@]}" update >&2
(cd "$W/src" && apt-get -q "${APT[@]}" source --download-only kubernetes >&2)
orig=("$W"/src/kubernetes_*.orig.tar.gz)
((${#orig[@]} == 1)) || die "expected one kubernetes_*.orig.tar.gz, found ${#orig[@]}"
tar -C "$W/src" -xzf "${orig[0]}"
TREE="$W/src/kubernetes-${VERSION#v}"
[[ -d $TREE/cmd/kube-apiserver ]] || die "no cmd/kube-apiserver in $TREE"

# --- 3. Patch the vendored reflect2, generate openapi, build in GOPATH mode -----------------
rm -rf "$TREE/vendor/github.com/modern-go/reflect2"
cp -r "$REFLECT2" "$TREE/vendor/github.com/modern-go/reflect2"
rm -f "$TREE/vendor/github.com/modern-go/reflect2/go.mod"

export GOCACHE="$W/gocache" GOFLAGS= GO111MODULE=off GOPATH="$W/gopath"
mkdir -p "$GOPATH/src/k8s.io"
ln -sfn "$TREE" "$GOPATH/src/k8s.io/kubernetes"
cd "$GOPATH/src/k8s.io/kubernetes"
say "make gen_openapi"
make gen_openapi >&2
[[ -f pkg/generated/openapi/zz_generated.openapi.go ]] || die "openapi generation produced nothing"

say "go build ./cmd/kube-apiserver (the long part)"
V=k8s.io/kubernetes/vendor/k8s.io
LDFLAGS=""
for pkg in "$V/component-base/version" "$V/client-go/pkg/version"; do
    LDFLAGS+=" -X $pkg.gitVersion=$VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=20"
    LDFLAGS+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
go build -p 2 -ldflags "-s -w $LDFLAGS" -o "$OUT.part" ./cmd/kube-apiserver
mv "$OUT.part" "$OUT"
"$OUT" --version >&2
say "built $OUT in $(($(date +%s) - T0)) s"

#!/usr/bin/env bash
# Build the Kubernetes lab's binaries (and kubectl and helm, for the Helm chart's tests) from
# their Go modules with the ordinary `go` client.
#
#   deploy/k8s/build.sh [kube-apiserver|kube-controller-manager|kubectl|etcd|kueue|helm ...]  (default: all)
#
# Each binary lands in $ARBITER_K8S_CACHE/bin/ (default /var/cache/arbiter-k8s/bin), named
# with its version, and is skipped when already there. Everything the build fetches or
# produces (GOPATH, GOMODCACHE, GOCACHE, the throwaway build modules) also lives under
# $ARBITER_K8S_CACHE, outside the work tree; nothing of it is committed.
#
#   kube-apiserver  k8s.io/kubernetes $K8S_VERSION. Its go.mod replaces every k8s.io staging
#                   module by a local directory, so `go install pkg@version` refuses it; a
#                   throwaway module requires k8s.io/kubernetes and pins every staging module
#                   to the matching v0.Y.Z by replace directives, then builds
#                   k8s.io/kubernetes/cmd/kube-apiserver.
#   etcd            go.etcd.io/etcd/server/v3 $ETCD_VERSION (the version Kubernetes' go.mod
#                   names; Debian's etcd 3.4 is older than what kube-apiserver 1.35 supports),
#                   built the same way because its go.mod has replace directives too.
#   kueue           sigs.k8s.io/kueue/cmd/kueue $KUEUE_VERSION (go install: no replaces).
#   kubectl         k8s.io/kubernetes/cmd/kubectl $K8S_VERSION, as kube-apiserver (the README's
#                   Helm install steps run with it in tests/queues/test_helm_chart.py).
#   helm            helm.sh/helm/v4/cmd/helm $HELM_VERSION (go install: no replaces; v4.3.2 is
#                   the newest Helm 4 the module proxy serves; its k8s.io/* modules are v0.37,
#                   built anew). Renders and installs deploy/helm/arbiter.
#
# Versions: Kueue v0.17.0 is the newest the module proxy serves (`go list -m -versions
# sigs.k8s.io/kueue`); its go.mod builds on k8s.io/* v0.35, so the API server is a 1.35
# release. Needs Go >= 1.25 (the modules' `go` lines) and the Go module proxy.
# First builds on two cores shared with other work (Go 1.26, empty caches, downloads
# included): kube-apiserver 327 s, etcd 57 s, Kueue 645 s (the whole script 17 min 9 s);
# README.md ("Kubernetes with Kueue") repeats them. Later, with the Go caches of those builds
# warm but eight other jobs on the same two cores (load average about 18): kubectl 308 s, helm
# 1370 s of wall time (about 4 min of CPU). Cached binaries make it a no-op.
set -euo pipefail

K8S_VERSION=${ARBITER_K8S_VERSION:-v1.35.4}
ETCD_VERSION=${ARBITER_ETCD_VERSION:-v3.6.5}
KUEUE_VERSION=${ARBITER_KUEUE_VERSION:-v0.17.0}
HELM_VERSION=${ARBITER_HELM_VERSION:-v4.3.2}
CACHE=${ARBITER_K8S_CACHE:-/var/cache/arbiter-k8s}
BIN_DIR=$CACHE/bin
say() { printf '[k8s-build] %s\n' "$*" >&2; }
die() {
    say "error: $*"
    exit 1
}

command -v go >/dev/null || die "no go client on PATH (Go >= 1.25 is needed)"
mkdir -p "$BIN_DIR" "$CACHE/mod"
export GOPATH=$CACHE/gopath GOMODCACHE=$CACHE/gomod GOCACHE=$CACHE/gocache
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
PAR=${ARBITER_K8S_BUILD_JOBS:-2}

# A throwaway module in $CACHE/mod/NAME that requires MODULE@VERSION (plus REPLACES lines).
throwaway() {
    local name=$1 module=$2 version=$3 replaces=$4 dir=$CACHE/mod/$1
    rm -rf "$dir"
    mkdir -p "$dir"
    printf 'module arbiter.invalid/build/%s\n\ngo 1.25.0\n\nrequire %s %s\n%s\n' \
        "$name" "$module" "$version" "$replaces" >"$dir/go.mod"
    echo "$dir"
}

# One command of k8s.io/kubernetes $K8S_VERSION (kube-apiserver, kube-controller-manager,
# kubectl): its go.mod replaces every k8s.io staging module by a local directory, so a
# throwaway module pins each to the matching v0.Y.Z. The second and later commands mostly
# come out of the warm Go build cache. The lab runs kube-controller-manager so Deployments and
# StatefulSets create their Pods (Kueue's pod integration then gates them); kubectl runs the
# README's Helm install steps in tests/queues/test_helm_chart.py.
build_k8s_command() {
    local name=$1 out=$BIN_DIR/$1-$K8S_VERSION t0 dir minor staging replaces="" m
    [[ -x $out ]] && { say "$name $K8S_VERSION cached"; return 0; }
    t0=$(date +%s)
    minor=${K8S_VERSION#v1.}
    minor=${minor%%.*}
    staging=v0.${K8S_VERSION#v1.}
    say "$name $K8S_VERSION (staging modules at $staging)"
    go mod download "k8s.io/kubernetes@$K8S_VERSION"
    # Every module Kubernetes' own go.mod replaces by a staging directory.
    for m in $(awk '/=> \.\/staging\// {print $1}' "$GOMODCACHE/k8s.io/kubernetes@$K8S_VERSION/go.mod"); do
        replaces+="replace $m => $m $staging"$'\n'
    done
    [[ -n $replaces ]] || die "found no staging replaces in k8s.io/kubernetes@$K8S_VERSION's go.mod"
    dir=$(throwaway "$name" k8s.io/kubernetes "$K8S_VERSION" "$replaces")
    local ld="" p
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
        ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
    done
    (cd "$dir" && go get "k8s.io/kubernetes/cmd/$name@$K8S_VERSION" >&2 &&
        go build -p "$PAR" -trimpath -ldflags "-s -w$ld" -o "$out.part" "k8s.io/kubernetes/cmd/$name")
    mv "$out.part" "$out"
    "$out" version --client >&2 2>/dev/null || "$out" --version >&2
    say "$name built in $(($(date +%s) - t0)) s"
}

build_etcd() {
    local out=$BIN_DIR/etcd-$ETCD_VERSION t0 dir
    [[ -x $out ]] && { say "etcd $ETCD_VERSION cached"; return 0; }
    t0=$(date +%s)
    say "etcd $ETCD_VERSION"
    dir=$(throwaway etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION" "")
    (cd "$dir" && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2 &&
        go build -p "$PAR" -trimpath -ldflags "-s -w" -o "$out.part" go.etcd.io/etcd/server/v3)
    mv "$out.part" "$out"
    "$out" --version >&2
    say "etcd built in $(($(date +%s) - t0)) s"
}

build_kueue() {
    local out=$BIN_DIR/kueue-$KUEUE_VERSION t0 dir
    [[ -x $out ]] && { say "kueue $KUEUE_VERSION cached"; return 0; }
    t0=$(date +%s)
    say "kueue $KUEUE_VERSION"
    dir=$(throwaway kueue sigs.k8s.io/kueue "$KUEUE_VERSION" "")
    (cd "$dir" && go get "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION" >&2 &&
        go build -p "$PAR" -trimpath \
            -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" \
            -o "$out.part" sigs.k8s.io/kueue/cmd/kueue)
    mv "$out.part" "$out"
    say "kueue built in $(($(date +%s) - t0)) s"
}

# helm renders and installs the chart in deploy/helm/arbiter (its tests render it with
# `helm template`); helm.sh/helm/v4 has no replace directives, so `go install` builds it.
build_helm() {
    local out=$BIN_DIR/helm-$HELM_VERSION t0
    [[ -x $out ]] && { say "helm $HELM_VERSION cached"; return 0; }
    t0=$(date +%s)
    say "helm $HELM_VERSION"
    GOBIN=$CACHE/mod/helm-bin go install -p "$PAR" -trimpath \
        -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
        "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
    mv "$CACHE/mod/helm-bin/helm" "$out"
    "$out" version >&2
    say "helm built in $(($(date +%s) - t0)) s"
}

targets=("$@")
((${#targets[@]})) || targets=(kube-apiserver kube-controller-manager etcd kueue kubectl helm)
for t in "${targets[@]}"; do
    case $t in
        kube-apiserver | kube-controller-manager | kubectl) build_k8s_command "$t" ;;
        etcd) build_etcd ;;
        kueue) build_kueue ;;
        helm) build_helm ;;
        *) die "unknown target $t (kube-apiserver, kube-controller-manager, kubectl, etcd, kueue, helm)" ;;
    esac
done

#!/usr/bin/env bash
# A Debian 12 base image made locally, for machines that reach Debian's and PyPI's mirrors
# but no container registry (CI): `debootstrap --variant=minbase bookworm` imported with
# `podman import` as localhost/arbiter-base:bookworm. The root file system is cached outside
# the work tree (ARBITER_CONTAINER_CACHE, default /var/cache/arbiter-containers); a second run
# only imports it again if the image is gone. CA certificates the host added locally
# (/usr/local/share/ca-certificates, e.g. an egress proxy's) go into the image too, so that
# apt and pip inside a build trust what the host trusts. A site pulls the official Python
# image instead (deploy/Dockerfile's default BASE_IMAGE).
#
# podman on this kernel needs the runc runtime and explicit limits: this script writes a
# containers.conf saying so into the cache and exports CONTAINERS_CONF (source it, or set
# CONTAINERS_CONF yourself, for the podman commands that follow).
set -euo pipefail

CACHE=${ARBITER_CONTAINER_CACHE:-/var/cache/arbiter-containers}
IMAGE=${ARBITER_BASE_IMAGE:-localhost/arbiter-base:bookworm}
MIRROR=${ARBITER_DEBIAN_MIRROR:-http://deb.debian.org/debian}
ROOTFS="$CACHE/rootfs-bookworm"

mkdir -p "$CACHE"
if [[ ! -f "$CACHE/containers.conf" ]]; then
    cat >"$CACHE/containers.conf" <<'CONF'
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
runtime = "runc"
CONF
fi
export CONTAINERS_CONF="$CACHE/containers.conf"

if podman image exists "$IMAGE"; then
    echo "base-image: $IMAGE is there"
    exit 0
fi
if [[ ! -f "$ROOTFS/.complete" ]]; then
    rm -rf "$ROOTFS"
    echo "base-image: debootstrap --variant=minbase bookworm into $ROOTFS"
    debootstrap --variant=minbase bookworm "$ROOTFS" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
        { tail -n 20 "$CACHE/debootstrap.log" >&2; exit 1; }
    rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
    touch "$ROOTFS/.complete"
fi
mkdir -p "$ROOTFS/usr/local/share/ca-certificates"
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$ROOTFS/usr/local/share/ca-certificates/"
fi
tar -C "$ROOTFS" --exclude=./.complete -c . | podman import \
    --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' - "$IMAGE" >/dev/null
echo "base-image: imported $IMAGE"

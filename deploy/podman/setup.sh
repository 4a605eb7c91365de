#!/usr/bin/env bash
# A Docker-compatible engine on a Debian machine like CI's (root, no registry images, a sandbox): Podman with runc,
# its Docker API served on a socket, and a base image with Python 3.11 built by debootstrap from the machine's apt
# sources (for deploy/build-image.sh: BASE=localhost/grasp-base:bookworm). Idempotent; prints the variables to
# export:   eval "$(deploy/podman/setup.sh)"      stop the service:   deploy/podman/setup.sh stop
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export CONTAINERS_CONF=$here/containers.conf
state=${GRASP_PODMAN_STATE:-/var/tmp/grasp-podman}
sock=$state/podman.sock
base=localhost/grasp-base:bookworm
mkdir -p "$state"

if [ "${1:-}" = stop ]; then
  if [ -f "$state/service.pid" ]; then kill "$(cat "$state/service.pid")" 2>/dev/null || true; rm -f "$state/service.pid"; fi
  exit 0
fi

log() { echo "[podman] $*" >&2; }
if ! command -v podman >/dev/null || ! command -v runc >/dev/null || ! command -v debootstrap >/dev/null; then
  log "installing podman, runc and debootstrap"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap >/dev/null
fi
if ! podman image exists "$base"; then
  log "building the base image $base with debootstrap (about 2 minutes)"
  rm -rf "$state/rootfs"
  debootstrap --variant=minbase --include=python3,python3-venv bookworm "$state/rootfs" >"$state/debootstrap.log" 2>&1 \
    || { tail -5 "$state/debootstrap.log" >&2; exit 1; }
  tar -C "$state/rootfs" -c . | podman import - "$base" >/dev/null
  rm -rf "$state/rootfs"
fi
if ! curl -sf --unix-socket "$sock" http://d/_ping >/dev/null 2>&1; then
  log "starting the Docker API at unix://$sock"
  rm -f "$sock"
  nohup podman system service --time=0 "unix://$sock" >"$state/service.log" 2>&1 &
  echo $! >"$state/service.pid"
  for _ in $(seq 60); do curl -sf --unix-socket "$sock" http://d/_ping >/dev/null 2>&1 && break; sleep 0.5; done
  curl -sf --unix-socket "$sock" http://d/_ping >/dev/null || { log "the service did not answer: $state/service.log"; exit 1; }
fi
echo "export CONTAINERS_CONF=$CONTAINERS_CONF DOCKER_HOST=unix://$sock"

#!/usr/bin/env bash
# Build the GRASP image (deploy/docker/Dockerfile) with whichever container engine answers: Docker with BuildKit,
# else Podman (GRASP_ENGINE=docker|podman forces one).
#
#   deploy/build-image.sh [TAG]                              # TAG: grasp:cpu; BASE: python:3.11-slim
#   BASE=localhost/grasp-base:bookworm deploy/build-image.sh  # a base made by deploy/podman/setup.sh
#
# Dependencies are resolved as scripts/setup.sh installs them, with the pins of pyproject.toml (torch 2.13.0, the
# CPU build) plus its `deploy` extra, by pip in a container of the base image (its Python decides which wheels fit)
# under this machine's pip configuration: the settings `pip config list` prints, and every local file or folder they
# name (wheel folders, file:// indexes with the folder around them, the CA bundle, constraints) mounted read-only at its own path. The wheels go
# into a wheelhouse kept per pyproject.toml and base ($GRASP_WHEELS, default ~/.cache/grasp/wheelhouse-<hash>) that
# the build mounts as its `wheels` context: the build reaches no index, and a rebuild after a code edit reuses the
# dependency layer. PYTHON (default .venv/bin/python, else python3) reads the configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-grasp:cpu}
base=${BASE:-python:3.11-slim}
py=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}

engine=${GRASP_ENGINE:-}
if [ -z "$engine" ]; then
  if docker info >/dev/null 2>&1 && docker buildx version >/dev/null 2>&1; then
    engine=docker
  elif podman info >/dev/null 2>&1; then
    engine=podman
  else
    echo "[image] no container engine answers: start Docker (with buildx) or install Podman" \
      "(on a machine like CI's: deploy/podman/setup.sh)" >&2
    exit 1
  fi
fi

want=$( (cat pyproject.toml; echo "$base") | sha256sum | cut -c1-16)
wheels=${GRASP_WHEELS:-${XDG_CACHE_HOME:-$HOME/.cache}/grasp/wheelhouse-$want}
if [ ! -f "$wheels/.complete" ]; then
  echo "[image] resolving the dependencies in $base into $wheels (first time: several minutes)"
  work="$wheels.partial"
  rm -rf "$work" && mkdir -p "$work/wheels"
  mounts=$("$py" - "$work" <<'PY'
import os, subprocess, sys
work = sys.argv[1]
listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True)
sections, paths = {}, set()
for line in sorted(listing.stdout.splitlines(), key=lambda l: l.startswith(":env:")):  # the environment wins
    key, _, value = line.partition("=")
    section, _, name = key.partition(".")
    value = value.strip().strip("'\"")
    sections.setdefault("global" if section == ":env:" else section, {})[name] = value
    for item in value.split():
        path = item.removeprefix("file://")
        if item.startswith("file://"):  # a local index: its pages link into the folders beside it
            path = os.path.dirname(path.rstrip("/"))
        if os.path.isabs(path) and os.path.exists(path):
            paths.add(os.path.realpath(path))
with open(os.path.join(work, "pip.conf"), "w") as conf:
    for section, values in sections.items():
        conf.write(f"[{section}]\n" + "".join(f"{k} = {v}\n" for k, v in values.items()))
print(" ".join(f"-v {p}:{p}:ro" for p in sorted(paths)))
PY
)
  "$py" -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]
print("\n".join(p["dependencies"] + p["optional-dependencies"]["deploy"]))' >"$work/requirements.txt"
  # shellcheck disable=SC2086  # one word per mount option
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/grasp/pip-cache  # pip's download cache, kept between resolutions
  mkdir -p "$cache"
  "$engine" run --rm --network=host $mounts -v "$work:/work" -v "$cache:/root/.cache/pip" \
    -e PIP_CONFIG_FILE=/work/pip.conf "$base" sh -c 'python3 -m venv /tmp/venv && /tmp/venv/bin/pip install -q --upgrade "pip<26.2" \
      && /tmp/venv/bin/pip wheel -q --wheel-dir /work/wheels -r /work/requirements.txt'
  rm -rf "$wheels" && mv "$work/wheels" "$wheels" && rm -rf "$work"
  touch "$wheels/.complete"
fi

echo "[image] building $tag from $base with $engine"
"$engine" build -f deploy/docker/Dockerfile --build-arg BASE="$base" --build-arg WHEELHOUSE="$(basename "$wheels")" \
  --build-context wheels="$wheels" -t "$tag" .
echo "[image] built $tag"

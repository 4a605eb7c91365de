#!/usr/bin/env bash
# Create or reuse the virtual environment at .venv/ and install GRASP into it (idempotent).
# torch is installed first, by pip under this machine's pip configuration, and pinned: the CPU wheel of 2.13.0 (an
# unpinned torch would pull a CUDA build); uv then installs the rest (about 1 min where pip took 5).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.grasp-installed
want=$(cat pyproject.toml | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "[setup] .venv is up to date"
  exit 0
fi
echo "[setup] installing dependencies (first time: several minutes)"
.venv/bin/python -m pip install -q --upgrade "pip<26.2"
.venv/bin/python -m pip install -q uv==0.13.9 torch==2.13.0
.venv/bin/uv pip install -q --python .venv/bin/python -e ".[test]"
echo "$want" > "$stamp"
echo "[setup] done"

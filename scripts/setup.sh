#!/usr/bin/env bash
# Create or reuse the virtual environment at .venv/ and install GRASP into it (idempotent).
# Python: 3.11 or 3.12 (pyproject.toml's requires-python); $PYTHON picks the interpreter (default python3), and any
# other version is refused in one line before anything is created.
# torch is installed first, by pip, pinned to the CPU build torch==2.13.0+cpu (PyPI's Linux torch is a CUDA build, with
# gigabytes of NVIDIA libraries): from pip's own configuration (an index, a mirror or find-links that hold it, which
# works offline), else from PyTorch's CPU index ($GRASP_TORCH_INDEX, default https://download.pytorch.org/whl/cpu).
# uv then installs the rest (several times faster than pip); torch==2.13.0 in pyproject.toml is satisfied by +cpu.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TORCH=2.13.0+cpu
TORCH_INDEX=${GRASP_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
python_ok() { # $1 is Python 3.11 or 3.12, else one line on stderr (what $1 is, and $2: what to do) and exit 1
  local version
  version=$("$1" -c 'import sys; print("Python %d.%d" % sys.version_info[:2])' 2>/dev/null) || version="not a Python that runs"
  case "$version" in
    "Python 3.11" | "Python 3.12") ;;
    *)
      echo "[setup] error: GRASP needs Python 3.11 or 3.12, and $1 is $version; $2" >&2
      exit 1
      ;;
  esac
}
if [ -x .venv/bin/python ]; then
  python_ok .venv/bin/python "remove .venv and run PYTHON=python3.12 bash scripts/setup.sh"
else
  python_ok "$PY" "install one and run PYTHON=python3.12 bash scripts/setup.sh (or python3.11)"
fi
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.grasp-installed
want=$(cat pyproject.toml | sha256sum | cut -c1-16)
# the project's own modules' bytecode too (the editable install leaves them to the first import, which cannot write
# it where PYTHONDONTWRITEBYTECODE is set: then every `grasp query` compiled them again); quick when up to date
own_bytecode() { .venv/bin/python -m compileall -q -j 0 grasp_core grasp_assets > /dev/null; }
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  own_bytecode
  echo "[setup] .venv is up to date"
  exit 0
fi
echo "[setup] installing dependencies (first time: several minutes)"
.venv/bin/python -m pip install -q --upgrade "pip<26.2"
.venv/bin/python -m pip install -q uv==0.13.9
echo "[setup] torch $TORCH (the CPU build): from pip's configured sources, else from $TORCH_INDEX"
.venv/bin/python -m pip install -q "torch==$TORCH" 2>/dev/null \
  || .venv/bin/python -m pip install -q "torch==$TORCH" --extra-index-url "$TORCH_INDEX"
.venv/bin/uv pip install -q --compile-bytecode --python .venv/bin/python -e ".[test]"  # bytecode now: a first grasp query does not compile every module it imports
own_bytecode
echo "$want" > "$stamp"
echo "[setup] done"

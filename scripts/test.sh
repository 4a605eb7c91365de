#!/usr/bin/env bash
# Set up, lint (ruff), type-check (mypy grasp_core), then run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# lint, format and types first: a failure here stops the run before the (long) test suite
.venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/mypy grasp_core
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_WAIT_POLICY=PASSIVE
exec .venv/bin/python -m pytest -q "$@"

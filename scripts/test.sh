#!/usr/bin/env bash
# Set up, lint (ruff), type-check (mypy grasp_core), then run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# lint, format and types first: a failure here stops the run before the (long) test suite
.venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/mypy grasp_core
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_WAIT_POLICY=PASSIVE
# a worker per core, one math thread per worker; a test file is one unit of work (its module fixtures stay whole),
# the planner tests sharing one world are one unit (tests/conftest.py)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
exec .venv/bin/python -m pytest -q -n "${GRASP_TEST_WORKERS:-$(nproc)}" --dist loadgroup --no-loadscope-reorder "$@"

#!/usr/bin/env bash
# Set up, lint (ruff), type-check (mypy grasp_core), then run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# lint, format and types first: a failure here stops the run before the (long) test suite (one command per line:
# `set -e` ignores a failure inside an `a && b && c` list unless it is the last one, so a chain let pytest run on)
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy grasp_core
# a worker per core, counted before OMP_NUM_THREADS is set below: nproc reports OMP_NUM_THREADS when it is set, so
# `-n $(nproc)` after the export ran the whole suite on one worker
workers=${GRASP_TEST_WORKERS:-$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)}
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_WAIT_POLICY=PASSIVE
# a worker per core, one math thread per worker; a test file is one unit of work (its module fixtures stay whole),
# handed out in the order tests/conftest.py sorts them (longest first), not xdist's (most tests first)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
exec .venv/bin/python -m pytest -q -n "$workers" --dist loadfile --no-loadscope-reorder "$@"

#!/usr/bin/env bash
# Set up, then materialize the whole GRASP DAG for a dataset (default: hpo) with the cpu profile.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export DAGSTER_HOME="$PWD/dagster_home" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_WAIT_POLICY=PASSIVE
exec .venv/bin/grasp pipeline "${1:-hpo}" "${@:2}"

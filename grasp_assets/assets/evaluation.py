"""Evaluation assets: every test query scored per setting (per-query rows, McNemar-ready), per-stage latency."""

import dagster as dg

from grasp_assets.assets.reranker import ALL_ROUNDS
from grasp_assets.partitions import dataset_partitions
from grasp_assets.resources import GraspSettings, MLflowTracking
from grasp_assets.stages import PLANNER, RERANKER
from grasp_assets.steps import RETRY, run_step
from grasp_core.pipeline import evaluation as steps

COMMON = dict(partitions_def=dataset_partitions, group_name="evaluation", retry_policy=RETRY)


@dg.asset(deps=[RERANKER, dg.AssetDep(PLANNER, partition_mapping=ALL_ROUNDS)], **COMMON)
def eval_metrics(context: dg.AssetExecutionContext, settings: GraspSettings, mlflow: MLflowTracking):
    """Every test query (and the human-written set): the served system with and without the reranker, its graph
    branch alone and each text retriever, per query."""
    return run_step(context, settings, mlflow, steps.eval_metrics_step)


@dg.asset(deps=[eval_metrics], **COMMON)
def ablations(context: dg.AssetExecutionContext, settings: GraspSettings, mlflow: MLflowTracking):
    """The planners of the progression (SFT, RL rounds), the oracle-guided teacher and every ablation, per query."""
    return run_step(context, settings, mlflow, steps.ablations_step)


# `latency` waits for `ablations` although it reads nothing of it: Dagster's executor runs independent steps at
# once, and a latency measured while the ablations compute on the same cores measures the machine's contention.
@dg.asset(deps=[eval_metrics, ablations], **COMMON)
def latency(context: dg.AssetExecutionContext, settings: GraspSettings, mlflow: MLflowTracking):
    """Per-stage mean/p50/p95 latency of single queries (paper Table A3), measured after every other step of the
    `finish` stage so that no other step shares the machine."""
    return run_step(context, settings, mlflow, steps.latency_step)

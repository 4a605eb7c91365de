"""Evaluation assets: every test query scored per setting (per-query rows, McNemar-ready), per-stage latency, and
the release: the build served only when it is not worse than the served release (the promotion guard)."""

import dagster as dg

from grasp_assets.assets.reranker import ALL_ROUNDS
from grasp_assets.partitions import dataset_partitions
from grasp_assets.resources import MLflowTracking, SettingsResource
from grasp_assets.stages import PLANNER, PROMOTION_CHECK, RELEASE, RERANKER
from grasp_assets.steps import RETRY, run_step
from grasp_core.pipeline import evaluation as steps
from grasp_core.pipeline.release import release_step

COMMON = dict(partitions_def=dataset_partitions, group_name="evaluation", retry_policy=RETRY)


@dg.asset(deps=[RERANKER, dg.AssetDep(PLANNER, partition_mapping=ALL_ROUNDS)], **COMMON)
def eval_metrics(context: dg.AssetExecutionContext, settings: SettingsResource, mlflow: MLflowTracking):
    """Every test query (and the human-written set): the served system with and without the reranker, its graph
    branch alone and each text retriever, per query."""
    return run_step(context, settings, mlflow, steps.eval_metrics_step)


@dg.asset(deps=[eval_metrics], **COMMON)
def ablations(context: dg.AssetExecutionContext, settings: SettingsResource, mlflow: MLflowTracking):
    """The planners of the progression (SFT, RL rounds), the oracle-guided teacher and every ablation, per query."""
    return run_step(context, settings, mlflow, steps.ablations_step)


# `latency` waits for `ablations` although it reads nothing of it: Dagster's executor runs independent steps at
# once, and a latency measured while the ablations compute on the same cores measures the machine's contention.
@dg.asset(deps=[eval_metrics, ablations], **COMMON)
def latency(context: dg.AssetExecutionContext, settings: SettingsResource, mlflow: MLflowTracking):
    """Per-stage mean/p50/p95 latency of single queries (paper Table A3), measured after every other step of the
    `finish` stage so that no other step shares the machine."""
    return run_step(context, settings, mlflow, steps.latency_step)


@dg.asset(
    deps=[eval_metrics, latency],
    check_specs=[
        dg.AssetCheckSpec(
            PROMOTION_CHECK,
            asset=RELEASE,
            blocking=True,
            description="the build answers the guard's val questions and the held-out feedback questions at least as "
            "well as the served release (within the tolerance); else the served release stays",
        )
    ],
    **COMMON,
)
def release(context: dg.AssetExecutionContext, settings: SettingsResource, mlflow: MLflowTracking):
    """The promotion guard: the build and the served release answer the same held-out questions; the build becomes
    the served release (what `grasp query/serve` answer with) only when it is not worse."""

    def guard(result: dict) -> list[dg.AssetCheckResult]:
        metadata = {k: v for k, v in result.items() if k not in ("promoted", "path")}
        return [dg.AssetCheckResult(check_name=PROMOTION_CHECK, passed=bool(result["promoted"]), metadata=metadata)]

    return run_step(context, settings, mlflow, release_step, check_results=guard, reusable=False)

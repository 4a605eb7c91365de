"""Text-branch assets: BM25 + mFAR field indexes, the trained mFAR, rankings of every query."""

import dagster as dg

from grasp_assets.partitions import dataset_of, dataset_partitions
from grasp_assets.resources import MLflowTracking, SettingsResource
from grasp_assets.stages import QUERIES, VECTOR_INDEXES
from grasp_assets.steps import HEAVY, RETRY, profile_override, run_step
from grasp_core.pipeline import text as steps

COMMON = dict(partitions_def=dataset_partitions, group_name="text_branch", retry_policy=RETRY)


class MFARRunConfig(dg.Config):
    epochs: int | None = None
    lr: float | None = None


@dg.asset(deps=[VECTOR_INDEXES], **COMMON)
def text_index(context: dg.AssetExecutionContext, settings: SettingsResource, mlflow: MLflowTracking):
    """BM25 over node documents and mFAR's per-field lexical and dense indexes."""
    return run_step(context, settings, mlflow, steps.text_index_step)


@dg.asset(deps=[text_index, QUERIES], pool="heavy", op_tags=HEAVY, **COMMON)
def mfar_model(
    context: dg.AssetExecutionContext, config: MFARRunConfig, settings: SettingsResource, mlflow: MLflowTracking
):
    """mFAR's query-conditioned field weights, trained contrastively on train, selected on val."""
    return run_step(
        context,
        settings,
        mlflow,
        steps.mfar_model_step,
        wants_log=True,
        profile_changes=profile_override(settings, "mfar", config, dataset_of(context)),
    )


@dg.asset(deps=[mfar_model, text_index, QUERIES], **COMMON)
def text_rankings(context: dg.AssetExecutionContext, settings: SettingsResource, mlflow: MLflowTracking):
    """Top 100 of every query (BM25, dense, mFAR) with val/test metrics."""
    return run_step(context, settings, mlflow, steps.text_rankings_step)

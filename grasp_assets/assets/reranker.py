"""Reranker assets: hard negatives from the trained planner's fused rankings, then listwise training."""

import dagster as dg

from grasp_assets.partitions import DATASET, dataset_partitions
from grasp_assets.resources import MLflowTracking, SettingsResource
from grasp_assets.stages import PLANNER, TEXT_RANKINGS
from grasp_assets.steps import HEAVY, RETRY, run_step
from grasp_core.pipeline import reranker as steps

COMMON = dict(partitions_def=dataset_partitions, group_name="reranker", retry_policy=RETRY)
ALL_ROUNDS = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name=DATASET)


@dg.asset(deps=[dg.AssetDep(PLANNER, partition_mapping=ALL_ROUNDS), TEXT_RANKINGS], **COMMON)
def reranker_hard_negatives(context: dg.AssetExecutionContext, settings: SettingsResource, mlflow: MLflowTracking):
    """Positives and the 30 highest-ranked wrong candidates of the served planner's fused top 100 (train)."""
    return run_step(context, settings, mlflow, steps.hard_negatives_step)


@dg.asset(deps=[reranker_hard_negatives], pool="heavy", op_tags=HEAVY, **COMMON)
def reranker(context: dg.AssetExecutionContext, settings: SettingsResource, mlflow: MLflowTracking):
    """The fine-tuned reranker (checkpoint picked on validation) and its (w, k) grid."""
    return run_step(context, settings, mlflow, steps.reranker_step, wants_log=True)

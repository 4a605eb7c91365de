"""Planner assets: teacher plans, the base model, the SFT warm start, the reward table, and RL rounds.

`rft_samples` and `planner` are partitioned by dataset × round. Dagster only allows an asset to depend on
earlier partitions of itself through time windows, so the cross-round link (round r starts from round r−1's
kept planner) is enforced by the library (`round_start` reads the previous round and refuses to start when it
is missing or failed its gate) rather than drawn as an edge; the blocking check `val_hit1_improved` on
`planner` records that gate in Dagster and stops downstream assets of the same run.
"""

import dagster as dg

from grasp_assets.partitions import dataset_of, dataset_partitions, dataset_round_partitions, round_of
from grasp_assets.resources import MLflowTracking, SettingsResource
from grasp_assets.stages import (
    ENTITY_TABLES,
    GATE_CHECK,
    GRAPH_STORE,
    PLANNER,
    QUERIES,
    TEXT_RANKINGS,
    VECTOR_INDEXES,
)
from grasp_assets.steps import HEAVY, RETRY, profile_override, run_step
from grasp_core.pipeline import planner as steps
from grasp_core.planner.rounds import Gate

DATASET = dict(partitions_def=dataset_partitions, group_name="planner", retry_policy=RETRY)
ROUND = dict(partitions_def=dataset_round_partitions, group_name="planner", retry_policy=RETRY)


class SFTRunConfig(dg.Config):
    """Overrides of the profile's SFT settings for this run (unset = profile value)."""

    n_examples: int | None = None
    epochs: float | None = None
    learning_rate: float | None = None


class GRPORunConfig(dg.Config):
    """Overrides of the profile's GRPO settings for this run (unset = profile value)."""

    max_steps: int | None = None
    learning_rate: float | None = None
    beta: float | None = None
    prompts_per_step: int | None = None
    save_every: int | None = None


@dg.asset(deps=[ENTITY_TABLES, GRAPH_STORE, VECTOR_INDEXES, QUERIES], **DATASET)
def teacher_plans(context: dg.AssetExecutionContext, settings: SettingsResource, mlflow: MLflowTracking):
    """The offline programmatic teacher's best executed metapath plan per query (share valid / gold first)."""
    return run_step(context, settings, mlflow, steps.teacher_plans_step)


@dg.asset(deps=[teacher_plans, ENTITY_TABLES], **DATASET)
def planner_base(context: dg.AssetExecutionContext, settings: SettingsResource, mlflow: MLflowTracking):
    """The planner's base: a pointer to a local pretrained LLM, the tiny Qwen3 + tokenizer built offline, or (the
    plan-selection policy) the frozen encoder it scores with."""
    return run_step(context, settings, mlflow, steps.planner_base_step)


@dg.asset(
    deps=[planner_base, teacher_plans, TEXT_RANKINGS, GRAPH_STORE],
    pool="heavy",
    op_tags=HEAVY,
    **DATASET,
)
def sft_adapter(
    context: dg.AssetExecutionContext, config: SFTRunConfig, settings: SettingsResource, mlflow: MLflowTracking
):
    """The SFT warm start on teacher plans (LoRA on a pretrained base; all weights for the tiny base; the
    plan-selection policy's head on the teacher's choices and the executed candidates' rewards)."""
    return run_step(
        context,
        settings,
        mlflow,
        steps.sft_step,
        wants_log=True,
        profile_changes=profile_override(settings, "sft", config, dataset_of(context)),
    )


@dg.asset(deps=[sft_adapter, TEXT_RANKINGS, GRAPH_STORE], **DATASET)
def reward_table(context: dg.AssetExecutionContext, settings: SettingsResource, mlflow: MLflowTracking):
    """U(gold-rank bucket, candidate-count bucket) from validation queries, with shrinkage."""
    return run_step(context, settings, mlflow, steps.reward_table_step)


@dg.asset(deps=[reward_table, sft_adapter], pool="heavy", op_tags=HEAVY, **ROUND)
def rft_samples(context: dg.AssetExecutionContext, settings: SettingsResource, mlflow: MLflowTracking):
    """8 plans per training query sampled at T=1.0 from the round's starting planner, with their rewards."""
    r = round_of(context)
    return run_step(context, settings, mlflow, steps.rft_samples_step, r, round_key=r)


@dg.asset(
    deps=[rft_samples],
    pool="heavy",
    op_tags=HEAVY,
    check_specs=[
        dg.AssetCheckSpec(
            GATE_CHECK,
            asset=PLANNER,
            blocking=True,
            description="validation fused Hit@1 rose above the round's starting planner on the held-out validation queries (a tie fails) and did not fall on the selecting ones",
        )
    ],
    **ROUND,
)
def planner(
    context: dg.AssetExecutionContext, config: GRPORunConfig, settings: SettingsResource, mlflow: MLflowTracking
):
    """RFT from the base + GRPO; the checkpoint with the best validation fused Hit@1 (gated)."""
    r = round_of(context)

    def gate(result: dict) -> list[dg.AssetCheckResult]:
        gate = Gate(
            result["val_fused_hit1"],
            result["previous_val_fused_hit1"],
            result.get("heldout_fused_hit1"),
            result.get("previous_heldout_fused_hit1"),
        )
        metadata = {k: v for k, v in gate.to_json().items() if k != "passed" and v is not None}
        return [dg.AssetCheckResult(check_name=GATE_CHECK, passed=gate.passed, metadata=metadata)]

    return run_step(
        context,
        settings,
        mlflow,
        steps.planner_round_step,
        r,
        round_key=r,
        wants_log=True,
        profile_changes=profile_override(settings, "grpo", config, dataset_of(context)),
        check_results=gate,
    )

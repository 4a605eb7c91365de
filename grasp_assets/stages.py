"""The training stages in order and the names of the assets: the one statement the jobs, the stage-chaining
sensor and `grasp pipeline` all read.

Retraining runs in three stages because its assets have two partitionings (dataset; dataset × round):
`prepare` (data → SFT → reward table, per dataset), `rl_round` (sampling → RFT → GRPO, per dataset × round,
once per round of :data:`grasp_core.planner.rounds.ROUNDS`) and `finish` (reranker → evaluation → release, per
dataset). A round runs only after the previous one passed its validation gate
(:class:`grasp_core.planner.rounds.Gate`); a run whose gate fails stops at the `planner` asset's blocking check.
"""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from grasp_core.planner.rounds import ROUNDS

# Asset names (also the artifact directory names under <root>/<dataset>/).
SKB = "skb"
QUERIES = "queries"
NODE_EMBEDDINGS = "node_embeddings"
VECTOR_INDEXES = "vector_indexes"
GRAPH_STORE = "graph_store"
ENTITY_TABLES = "entity_tables"
TEXT_INDEX = "text_index"
MFAR_MODEL = "mfar_model"
TEXT_RANKINGS = "text_rankings"
TEACHER_PLANS = "teacher_plans"
PLANNER_BASE = "planner_base"
SFT_ADAPTER = "sft_adapter"
REWARD_TABLE = "reward_table"
RFT_SAMPLES = "rft_samples"
PLANNER = "planner"
GATE_CHECK = "val_hit1_improved"  # the `planner` asset's blocking check: the round's validation gate
RERANKER_HARD_NEGATIVES = "reranker_hard_negatives"
RERANKER = "reranker"
EVAL_METRICS = "eval_metrics"
ABLATIONS = "ablations"
LATENCY = "latency"
RELEASE = "release"
PROMOTION_CHECK = "not_worse_than_served"  # the `release` asset's blocking check: the promotion guard

# Stages (job names), in the order they run, with their assets.
PREPARE, RL_ROUND, FINISH = "prepare", "rl_round", "finish"
STAGE_ASSETS: dict[str, tuple[str, ...]] = {
    PREPARE: (
        SKB,
        QUERIES,
        NODE_EMBEDDINGS,
        VECTOR_INDEXES,
        GRAPH_STORE,
        ENTITY_TABLES,
        TEXT_INDEX,
        MFAR_MODEL,
        TEXT_RANKINGS,
        TEACHER_PLANS,
        PLANNER_BASE,
        SFT_ADAPTER,
        REWARD_TABLE,
    ),
    RL_ROUND: (RFT_SAMPLES, PLANNER),
    FINISH: (RERANKER_HARD_NEGATIVES, RERANKER, EVAL_METRICS, ABLATIONS, LATENCY, RELEASE),
}
ROUND_ASSETS = frozenset(STAGE_ASSETS[RL_ROUND])  # partitioned by dataset × round (one artifact per round)
# A round starts from the previous round's kept planner. Dagster draws no edge for it (it would be a cycle between
# the two assets), so it is stated here: the one read beyond an asset's upstream.
PREVIOUS_ROUND_READS = {RFT_SAMPLES: (PLANNER,)}


@dataclass(frozen=True)
class Step:
    """One run of a stage for a dataset: `prepare`, `rl_round` of one round, or `finish`."""

    stage: str
    round_key: str | None = None

    @property
    def label(self) -> str:
        return f"RL round {self.round_key}" if self.round_key else self.stage

    @property
    def selection(self) -> dg.AssetSelection:
        return dg.AssetSelection.assets(*STAGE_ASSETS[self.stage])


ORDER = (Step(PREPARE), *(Step(RL_ROUND, r) for r in ROUNDS), Step(FINISH))

"""What the planner steps of both kinds (``lm``, ``policy``) read: the scoring environment, the teacher plans, the
reward table, the planner a round starts from, validation queries and a planner's fused metrics on them.

A kept planner (the SFT planner, each round's) carries :data:`VAL_FILE`: its validation fused Hit@1, the next
round's gate reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from grasp_core.answer import AnswerOptions, AnswerPath
from grasp_core.components import Components
from grasp_core.errors import GraspError
from grasp_core.io import read_json
from grasp_core.metrics import evaluate
from grasp_core.planner.interface import Planner
from grasp_core.planner.reward import RewardTable
from grasp_core.planner.rounds import Gate, previous_round
from grasp_core.planner.scoring import PlannerEnv

VAL_FILE = "val.json"  # validation fused Hit@1 of a kept planner (the next round's gate reference)


def planner_env(components: Components, reward_table: RewardTable | None = None) -> PlannerEnv:
    q = components.skb.queries
    return PlannerEnv(
        schema=components.skb.schema,
        executor=components.executor,
        queries=dict(zip(q["qid"].astype(int), q["query"])),
        tables=components.entity_tables,
        text=components.text_rankings,
        gold={int(k): list(map(int, v)) for k, v in zip(q["qid"], q["answer_ids"])},
        num_nodes=components.skb.num_nodes,
        reward_table=reward_table if reward_table is not None else RewardTable.prior(),
        reward_cfg=components.profile.reward,
    )


def load_reward_table(components: Components) -> RewardTable:
    return RewardTable.from_json(read_json(components.art.require("reward_table") / "reward_table.json"))


def load_teacher_plans(components: Components) -> pd.DataFrame:
    return pd.read_parquet(components.art.require("teacher_plans") / "plans.parquet")


def val_qids(components: Components, cap: int | None = None) -> list[int]:
    return components.split("val")["qid"].astype(int).head(cap).tolist()


def round_start(components: Components, round_key: str) -> Path:
    """The planner a round starts from: the SFT planner in round 1, the previous round's kept planner after.

    The previous round must have passed its gate (validation fused Hit@1 rose)."""
    prev = previous_round(round_key)
    if prev is None:
        return components.art.require("sft_adapter")
    path = components.art.require("planner", prev)
    gate = Gate.read(path)
    if not gate.passed:
        raise GraspError(
            f"round {prev} of {components.dataset!r} did not raise validation fused Hit@1 ({gate.previous:.1f} -> {gate.val_fused_hit1:.1f}); "
            f"round {round_key} does not start from it. Inspect the run in MLflow, change the RL settings and rematerialize round {prev}."
        )
    return path


def previous_val_hit1(components: Components, round_key: str) -> float:
    """Validation fused Hit@1 of the planner this round started from (the gate's reference)."""
    prev = previous_round(round_key)
    if prev is None:
        return read_json(components.art.require("sft_adapter") / VAL_FILE)["val_fused_hit1"]
    return Gate.read(components.art.require("planner", prev)).val_fused_hit1


def evaluate_planner(components: Components, planner: Planner, qids: Sequence[int]) -> dict:
    """Fused and graph-only metrics of ``planner`` on ``qids`` through the answer path (no reranker), on the stored
    text rankings and entity tables, plus plan statistics and the answers themselves."""
    qids = list(qids)
    queries = dict(zip(components.skb.queries["qid"].astype(int), components.skb.queries["query"]))
    out = AnswerPath(components, AnswerOptions(rerank=False), planner=planner).answer(
        [queries[q] for q in qids],
        text=[components.text_rankings[q] for q in qids],
        tables=[components.entity_tables[q] for q in qids],
    )
    assert out.planning is not None and out.execution is not None
    attempts, traces = out.planning.attempts, out.execution.traces
    answers = components.answers(qids)
    return {
        "fused": evaluate(out.fusion.rankings, answers, components.skb.num_nodes),
        "graph": evaluate(out.graph, answers, components.skb.num_nodes),
        "valid_plan_rate": float(np.mean([a.valid for a in attempts])) if attempts else 0.0,
        "candidates": [t.candidates for t in traces],
        "answers": out,
    }

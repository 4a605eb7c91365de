"""Pipeline steps of the planner: teacher plans, the base model, SFT, the reward table, and RL rounds.

The planner kind (``Profile.planner``) is chosen here, once (:func:`planner_kind`): each kind implements
:class:`PlannerKind` (``lm``: :mod:`grasp_core.pipeline.planner_lm`, ``policy``: :mod:`grasp_core.pipeline.planner_policy`),
and the steps of the ``planner_base``, ``sft_adapter``, ``rft_samples`` and ``planner`` assets call it. What both
kinds read is in :mod:`grasp_core.pipeline.planner_inputs`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Protocol

import pandas as pd
from tqdm.auto import tqdm

from grasp_core.components import EXECUTOR, EXTRACTOR, FUSED_TEXT, PLANNER, RERANKER, Components
from grasp_core.errors import GraspError
from grasp_core.io import atomic_dir, write_json
from grasp_core.pipeline.planner_inputs import evaluate_planner, planner_env, val_qids
from grasp_core.pipeline.planner_lm import LMKind
from grasp_core.pipeline.planner_policy import PolicyKind, executed_frame
from grasp_core.pipeline.step import step
from grasp_core.planner.candidates import json_text
from grasp_core.planner.interface import Planner, check_kind
from grasp_core.planner.lm.sft import shuffled_train_order
from grasp_core.planner.reward import RewardTable
from grasp_core.planner.teachers.programmatic import ProgrammaticTeacher, TeacherPlan


class PlannerKind(Protocol):
    """How one planner kind is trained and loaded (each method is one asset's step)."""

    learns_from_executed: bool  # the teacher executes every candidate of every training query, kept for training

    def load(self, components: Components, checkpoint: Path) -> Planner: ...

    def build_base(self, components: Components) -> dict: ...

    def sft(self, components: Components, log_fn=None) -> dict: ...

    def samples(self, components: Components, round_key: str) -> dict: ...

    def round(self, components: Components, round_key: str, log_fn=None) -> dict: ...


KINDS: dict[str, type[PlannerKind]] = {"lm": LMKind, "policy": PolicyKind}


def planner_kind(components: Components) -> PlannerKind:
    """The profile's planner kind (the one place the training side chooses it)."""
    return KINDS[check_kind(components.profile.planner)]()


def make_teacher(components: Components):
    """The LLM teacher when ``teacher_endpoint.base_url`` is set, else the programmatic teacher."""
    endpoint = components.profile.teacher_endpoint
    if endpoint.base_url:
        from grasp_core.llm.backends import OpenAICompatibleLLM
        from grasp_core.planner.teachers.llm import LLMTeacher

        llm = OpenAICompatibleLLM.from_config(endpoint, "teacher_endpoint")
        return LLMTeacher(
            components.skb.schema, components.dataset, llm, components.executor, components.profile.inference
        )
    return ProgrammaticTeacher(
        components.skb.schema, components.skb.nodes["type"].tolist(), components.executor, components.profile.teacher
    )


# What every planner-training step reads: the answer path (fused with the text branch and, for validation, the
# reranker) and every planner setting, since the planner kind is chosen from the profile in one place.
TRAINING_READS = (  # every training step runs through its planner kind, whose rounds train the chooser
    *EXECUTOR,
    "asked_type",
    "chooser",
    *EXTRACTOR,
    *PLANNER,
    *FUSED_TEXT,
    *RERANKER,
    "grpo",
    "planner_model",
    "policy",
    "policy_train",
    "rerank",
    "reranker_candidates",
    "reward",
    "rl",
    "sft",
    "teacher",
)


@step(
    "teacher_plans",
    reads=(*TRAINING_READS, "teacher_endpoint"),
)
def teacher_plans_step(components: Components) -> dict:
    """Programmatic teacher plans: training queries in the SFT order until enough usable plans, plus every test
    query, whose plans are the evaluation's oracle-guided upper bound (never trained on). The human-written
    ``test-human`` queries are never taught: no step before the evaluation touches them.

    The ``policy`` planner learns from every taught training query and from all of its executed candidates: then
    ``policy_train.train_queries`` training queries are taught (all when None), every candidate executed, and the
    executed plans' rankings kept in ``executed.parquet``."""
    policy = planner_kind(components).learns_from_executed
    profile = components.profile
    teacher = make_teacher(components)
    if policy and not isinstance(teacher, ProgrammaticTeacher):
        raise GraspError(
            "planner=policy learns from the programmatic teacher's executed candidates: unset teacher_endpoint.base_url"
            " ($GRASP_TEACHER_URL) or use planner=lm"
        )
    queries = components.skb.queries.set_index("qid")
    tables = components.entity_tables
    train_order = [int(q) for q in shuffled_train_order(components.split("train")["qid"].to_numpy(), profile.sft.seed)]
    eval_qids = [int(q) for q in components.split("test")["qid"]]
    rows, usable = [], 0
    # usable SFT plans wanted; more training queries are taught until reached (the policy: all of them)
    budget = (profile.policy_train.train_queries or len(train_order)) if policy else profile.sft.n_examples
    bar = tqdm(total=budget + len(eval_qids), desc="teacher plans", unit="query")
    taught: list[tuple[int, TeacherPlan]] = []

    def teach(qids: list[int], train: bool = False) -> list[dict]:
        part = queries.loc[qids]
        golds = [list(map(int, a)) for a in part["answer_ids"]]
        args = (part["query"].tolist(), [tables[q] for q in qids], golds)
        # the policy learns from every executed candidate of a training query
        plans = teacher.teach(*args, execute_all=True) if policy and train else teacher.teach(*args)
        if policy and train:
            taught.extend(zip(qids, plans))
        bar.update(len(qids))
        return [
            {
                "qid": qid,
                "split": split,
                "plan": json_text(out.plan) if out.plan else None,
                "gold_rank": out.gold_rank,
                "n_candidates": out.n_candidates,
                "n_answers": len(gold),
                "n_tried": out.n_tried,
            }
            for qid, split, gold, out in zip(qids, part["split"], golds, plans)
        ]

    start = time.perf_counter()
    todo = list(train_order)
    while todo and usable < budget:
        # at most as many queries as usable plans are still wanted: never more taught than one at a time would
        chunk, todo = todo[: min(32, budget - usable)], todo[min(32, budget - usable) :]
        for r in teach(chunk, train=True):
            rows.append(r)
            usable += int(
                policy or (r["plan"] is not None and r["gold_rank"] == 1 and r["n_answers"] <= profile.sft.max_answers)
            )
    for i in range(0, len(eval_qids), 32):
        rows += teach(eval_qids[i : i + 32])
    bar.close()
    df = pd.DataFrame(rows)
    with atomic_dir(components.art.path("teacher_plans")) as tmp:
        df.to_parquet(tmp / "plans.parquet")
        if policy:
            executed_frame([q for q, _ in taught], [t for _, t in taught]).to_parquet(tmp / "executed.parquet")
    stats = {}
    for split, part in df.groupby("split"):
        stats[str(split)] = {
            "queries": len(part),
            "valid_share": round(float(part["plan"].notna().mean()), 4),
            "gold_first_share": round(float((part["gold_rank"] == 1).mean()), 4),
        }
    counts = {} if isinstance(teacher, ProgrammaticTeacher) else {"invalid_plans": teacher.invalid}
    if counts:
        counts["retried_queries"] = teacher.retried
    return {
        "teacher": "programmatic" if isinstance(teacher, ProgrammaticTeacher) else "llm",
        **counts,
        "usable_for_sft": usable,
        "per_split": stats,
        "seconds": round(time.perf_counter() - start, 1),
        "path": str(components.art.path("teacher_plans")),
    }


@step(
    "planner_base",
    reads=TRAINING_READS,
)
def planner_base_step(components: Components) -> dict:
    return planner_kind(components).build_base(components)


@step(
    "sft_adapter",
    reads=TRAINING_READS,
)
def sft_step(components: Components, log_fn=None) -> dict:
    return planner_kind(components).sft(components, log_fn)


@step(
    "reward_table",
    reads=TRAINING_READS,
)
def reward_table_step(components: Components) -> dict:
    """Observations on validation queries: the text list alone and the SFT planner's fused list.

    The downstream outcome is fused Hit@1 (no reranker exists before the first training cycle ends)."""
    env = planner_env(components)
    qids = val_qids(components)
    result = evaluate_planner(
        components, planner_kind(components).load(components, components.art.require("sft_adapter")), qids
    )
    observations = []
    for q, fused, cand in zip(qids, result["answers"].fusion.rankings, result["candidates"]):
        gold = env.gold[q]
        text_rank = env.text[q].rank_of(gold)
        observations.append((text_rank, 0, text_rank == 1))
        fused_rank = fused.rank_of(gold)
        observations.append((fused_rank, int(cand), fused_rank == 1))
    table = RewardTable.build(observations, components.profile.reward.shrink_n)
    with atomic_dir(components.art.path("reward_table")) as tmp:
        write_json(tmp / "reward_table.json", table.to_json())
    return {
        "observations": len(observations),
        "downstream": "fused hit@1",
        "table_md": table.to_markdown(),
        "path": str(components.art.path("reward_table")),
    }


@step(
    "rft_samples",
    reads=TRAINING_READS,
)
def rft_samples_step(components: Components, round_key: str) -> dict:
    return planner_kind(components).samples(components, round_key)


@step(
    "planner",
    reads=TRAINING_READS,
)
def planner_round_step(components: Components, round_key: str, log_fn=None) -> dict:
    return planner_kind(components).round(components, round_key, log_fn)

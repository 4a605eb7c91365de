"""Executing and scoring planner outputs: the reward of sampled plans and the fused metrics of a planner.

:class:`PlannerEnv` gathers, per query id, what scoring needs (query text, entity table, text ranking,
gold answers) plus the schema, the plan executor and the reward table. :class:`PlanRewarder` turns plan
texts into rewards (``U(RRF(T, G)) − U(T)``, or the fixed penalty for an invalid plan); it is also the
reward function handed to TRL's GRPOTrainer. :func:`evaluate_planner` runs a planner on a split and
reports fused metrics, the valid-plan rate and the per-query hits (for McNemar tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from grasp_core.entities.table import EntityTable
from grasp_core.metrics import evaluate, per_query
from grasp_core.plan.execute import PlanExecutor
from grasp_core.planner.inference import InferenceSettings, check_plan, plan_queries
from grasp_core.planner.reward import RewardConfig, RewardTable, plan_reward
from grasp_core.ranking import Ranking, fuse
from grasp_core.skb.schema import Schema


@dataclass
class PlannerEnv:
    schema: Schema
    executor: PlanExecutor
    queries: dict[int, str]
    tables: dict[int, EntityTable]
    text: dict[int, Ranking]
    gold: dict[int, list[int]]
    num_nodes: int
    reward_table: RewardTable
    reward_cfg: RewardConfig = RewardConfig()


@dataclass(frozen=True)
class SampleScore:
    reward: float
    valid: bool
    n_anchors: int
    n_candidates: int
    gold_rank: int | None  # in the fused ranking


class PlanRewarder:
    def __init__(self, env: PlannerEnv):
        self.env = env

    def score(self, qids: Sequence[int], plans: Sequence[str]) -> list[SampleScore]:
        env = self.env
        errors = [check_plan(p, env.schema, env.tables[q]) for q, p in zip(qids, plans)]
        ok = [i for i, e in enumerate(errors) if e is None]
        results = env.executor.execute_batch(
            [plans[i] for i in ok], [env.queries[qids[i]] for i in ok], [env.tables[qids[i]] for i in ok]
        )
        executed = dict(zip(ok, results))
        out = []
        for i, q in enumerate(qids):
            if i not in executed:
                out.append(SampleScore(env.reward_cfg.invalid_penalty, False, 0, 0, None))
                continue
            ranking, trace = executed[i]
            if trace.plan is None:  # failed validation inside the executor
                out.append(SampleScore(env.reward_cfg.invalid_penalty, False, 0, 0, None))
                continue
            reward = plan_reward(env.text[q], ranking, trace.candidates, env.gold[q], env.reward_table, env.reward_cfg)
            fused = fuse(env.text[q], ranking, env.reward_cfg)
            out.append(SampleScore(reward, True, len(trace.plan.anchors), trace.candidates, fused.rank_of(env.gold[q])))
        return out

    def reward_function(self):
        """A TRL reward function: ``f(completions, qid, **columns) -> list[float]``."""

        def fused_gain_reward(completions, qid, **_):
            texts = [c if isinstance(c, str) else c[0]["content"] for c in completions]
            return [s.reward for s in self.score([int(q) for q in qid], texts)]

        return fused_gain_reward


def evaluate_planner(llm, env: PlannerEnv, qids: Sequence[int], cfg: InferenceSettings = InferenceSettings()) -> dict:
    """Fused and graph-only metrics of ``llm`` as the planner on ``qids``, plus plan statistics."""
    qids = list(qids)
    tables = [env.tables[q] for q in qids]
    queries = [env.queries[q] for q in qids]
    attempts = plan_queries(llm, env.schema, queries, tables, cfg)
    results = env.executor.execute_batch([a.text for a in attempts], queries, tables)
    graph = [r for r, _ in results]
    fused = [fuse(env.text[q], g, env.reward_cfg) for q, g in zip(qids, graph)]
    answers = [env.gold[q] for q in qids]
    hops = [len(t.plan.hops) if t.plan is not None else -1 for _, t in results]
    return {
        "fused": evaluate(fused, answers, env.num_nodes),
        "graph": evaluate(graph, answers, env.num_nodes),
        "valid_plan_rate": float(np.mean([a.valid for a in attempts])) if attempts else 0.0,
        "first_try_valid_rate": float(np.mean([a.valid and a.attempts == 1 for a in attempts])) if attempts else 0.0,
        "multi_hop_share": float(np.mean([h >= 2 for h in hops])) if hops else 0.0,
        "per_query": per_query(fused, answers, env.num_nodes).assign(qid=qids),
        "plans": pd.DataFrame(
            {
                "qid": qids,
                "plan": [a.text for a in attempts],
                "valid": [a.valid for a in attempts],
                "error": [a.error for a in attempts],
                "candidates": [t.candidates for _, t in results],
            }
        ),
        "graph_rankings": graph,
        "fused_rankings": fused,
        "traces": [t for _, t in results],
    }

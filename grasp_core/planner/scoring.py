"""Executing and scoring sampled plans: the reward of the RL rounds.

:class:`PlannerEnv` gathers, per query id, what scoring needs (query text, entity table, text ranking,
gold answers) plus the schema, the plan executor and the reward table. :class:`PlanRewarder` turns plan
texts into rewards (``U(RRF(T, G)) − U(T)``, or the fixed penalty for an invalid plan), fusing as the answer path's
fusion stage does (:func:`~grasp_core.ranking.fusion`); it is also the reward function handed to TRL's GRPOTrainer.
A planner's fused metrics on a split come from the answer path itself
(:func:`grasp_core.pipeline.planner_inputs.evaluate_planner`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grasp_core.entities.table import EntityTable
from grasp_core.plan.execute import PlanExecutor
from grasp_core.planner.attempt import check_plan
from grasp_core.planner.config import RewardConfig
from grasp_core.planner.reward import RewardTable, plan_reward
from grasp_core.ranking import Ranking, fusion
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
            (fused,) = fusion([env.text[q]], [ranking], env.reward_cfg)
            out.append(SampleScore(reward, True, len(trace.plan.anchors), trace.candidates, fused.rank_of(env.gold[q])))
        return out

    def reward_function(self):
        """A TRL reward function: ``f(completions, qid, **columns) -> list[float]``."""

        def fused_gain_reward(completions, qid, **_):
            texts = [c if isinstance(c, str) else c[0]["content"] for c in completions]
            return [s.reward for s in self.score([int(q) for q in qid], texts)]

        return fused_gain_reward

"""Teachers that write plans for training queries (paper §3.2, ``docs/design.md`` "Teacher").

:class:`ProgrammaticTeacher` is the offline teacher: it executes the candidate plans of
:func:`grasp_core.planner.candidates.candidate_plans` for the query's gold target type (metapath plans of 1–3
hops from the entity-table rows in name/doc mode, their pairwise intersections, the zero-hop plan) and keeps the
one whose graph ranking places a gold answer highest (ties: fewer anchors, then fewer hops, then fewer
candidates). It reads the gold answers, so on evaluation splits it is an oracle-guided upper bound, not a fair
baseline. Every executed candidate's graph ranking is returned too, so RL re-executes only plans never run.
The LLM teacher is :class:`grasp_core.planner.teachers.llm.LLMTeacher`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grasp_core.entities.table import EntityTable
from grasp_core.planner.candidates import candidate_plans, json_text
from grasp_core.planner.config import CandidateConfig
from grasp_core.ranking import Ranking
from grasp_core.skb.schema import Schema


@dataclass(frozen=True)
class Executed:
    """One executed candidate plan: its JSON text, graph ranking and candidate count (kept for RL)."""

    plan: str
    ranking: Ranking
    n_candidates: int


@dataclass(frozen=True)
class TeacherPlan:
    plan: dict | None  # plan JSON, None when no candidate reached anything
    gold_rank: int | None  # 1-based rank of the best gold answer in the plan's graph ranking
    n_candidates: int
    n_tried: int
    executed: tuple[Executed, ...] = ()


def _key(plan: dict, ranking, trace, gold: Sequence[int]) -> tuple:
    rank = ranking.rank_of(gold)
    return (rank if rank is not None else 10**9, len(plan["anchors"]), len(plan["hops"]), trace.candidates)


def _cheap(plan: dict) -> bool:
    """Zero- and one-hop single-anchor plans: one of them ranking a gold answer first cannot be beaten."""
    return len(plan["anchors"]) <= 1 and len(plan["hops"]) <= 1


class ProgrammaticTeacher:
    """Execute the candidate plans of each query and keep the best one (uses the gold answers)."""

    def __init__(self, schema: Schema, node_types: Sequence[str], executor, cfg: CandidateConfig = CandidateConfig()):
        self.schema, self.node_types, self.executor, self.cfg = schema, list(node_types), executor, cfg

    def target_type(self, gold: Sequence[int]) -> str:
        types = [self.node_types[g] for g in gold]
        return max(sorted(set(types)), key=types.count)

    def candidates(self, query: str, table: EntityTable, gold: Sequence[int]) -> list[dict]:
        return candidate_plans(self.schema, table, query, [self.target_type(gold)], self.cfg)

    def _run(self, plans: list[dict], query: str, table: EntityTable, gold: Sequence[int]):
        texts = [json_text(p) for p in plans]
        results = self.executor.execute_batch(texts, [query] * len(plans), [table] * len(plans))
        return [(p, t, r, tr, _key(p, r, tr, gold)) for p, t, (r, tr) in zip(plans, texts, results)]

    def teach_one(self, query: str, table: EntityTable, gold: Sequence[int], execute_all: bool = False) -> TeacherPlan:
        """The best candidate; ``execute_all`` runs every candidate (their rankings train the policy) instead of
        stopping once a zero- or one-hop plan ranks a gold answer first."""
        plans = self.candidates(query, table, gold)
        if execute_all:
            runs = self._run(plans, query, table, gold)
        else:
            # Cheapest plans first. A zero- or one-hop plan that ranks a gold answer first cannot be beaten (every
            # other plan has more hops or anchors, which the key ranks after it), so the rest is then not executed:
            # the chosen plan is the same as when every candidate runs.
            runs = self._run([p for p in plans if _cheap(p)], query, table, gold)
            if not runs or min(r[4] for r in runs)[0] != 1:
                runs += self._run([p for p in plans if not _cheap(p)], query, table, gold)
        executed = tuple(Executed(t, r, tr.candidates) for _, t, r, tr, _ in runs if tr.plan is not None)
        if not runs:
            return TeacherPlan(None, None, 0, 0, executed)
        plan, _, ranking, trace, key = min(runs, key=lambda x: x[4])
        if key[0] == 10**9 and not len(ranking):
            return TeacherPlan(None, None, 0, len(runs), executed)
        return TeacherPlan(plan, ranking.rank_of(gold), trace.candidates, len(runs), executed)

    def teach(
        self,
        queries: Sequence[str],
        tables: Sequence[EntityTable],
        golds: Sequence[Sequence[int]],
        progress=None,
        execute_all: bool = False,
    ) -> list[TeacherPlan]:
        out = []
        for q, t, g in zip(queries, tables, golds):
            out.append(self.teach_one(q, t, g, execute_all))
            if progress is not None:
                progress.update(1)
        return out

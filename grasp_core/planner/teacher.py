"""Teachers that write plans for training queries (paper §3.2, ``docs/design.md`` "Teacher").

:class:`ProgrammaticTeacher` is the offline teacher: it enumerates metapath plans from the query's entity
table and the schema (1–3 hops, one or two anchors, name or doc match mode; relevance text = the query minus
the anchor mentions), executes them all, and keeps the one whose graph ranking places a gold answer highest
(ties: fewer anchors, then fewer hops, then fewer candidates). It reads the gold answers, so on evaluation
splits it is an oracle-guided upper bound, not a fair baseline. The LLM teacher is
:class:`grasp_core.planner.llm_teacher.LLMTeacher`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grasp_core.entities.table import EntityTable
from grasp_core.plan.relevance import relevance_text
from grasp_core.planner.metapaths import Metapath, metapaths
from grasp_core.planner.train_settings import TeacherConfig
from grasp_core.skb.schema import Schema


@dataclass(frozen=True)
class TeacherPlan:
    plan: dict | None  # plan JSON, None when no candidate reached anything
    gold_rank: int | None  # 1-based rank of the best gold answer in the plan's graph ranking
    n_candidates: int
    n_tried: int


def _chain(var: str, path: Metapath, next_index: int) -> tuple[list[dict], int]:
    """Hops along ``path`` from ``var`` to ``target``, naming intermediates x<next_index>, …"""
    hops, current = [], var
    for i, (rel, node_type) in enumerate(path):
        last = i == len(path) - 1
        to = "target" if last else f"x{next_index}"
        hop = {"from": current, "rel": rel, "to": to}
        if not last:
            hop["to_type"] = node_type
            next_index += 1
        hops.append(hop)
        current = to
    return hops, next_index


def single_anchor_plans(
    schema: Schema, table: EntityTable, query: str, target_type: str, cfg: TeacherConfig = TeacherConfig()
) -> list[dict]:
    """One plan per (entity row, linked type, metapath to the target type), name and doc modes."""
    plans = []
    for row in table.rows:
        if row.role == "attribute":
            continue
        rel_text = relevance_text(query, [row.mention])
        for node_type, links in row.links.items():
            if not links or links[0].score < cfg.min_link_score:
                continue
            for path in metapaths(schema, node_type, target_type, cfg.max_hops, cfg.paths_per_anchor):
                hops, _ = _chain("a1", path, 1)
                for mode in ("name", "doc") if len(path) == 1 else ("name",):
                    plans.append(
                        {
                            "target": {"type": target_type},
                            "anchors": [{"var": "a1", "ref": row.ref, "type": node_type, "match_mode": mode}],
                            "hops": hops,
                            "relevance_text": rel_text,
                        }
                    )
    return plans


def intersect(plan_a: dict, plan_b: dict, query: str, table: EntityTable) -> dict | None:
    """Two single-anchor plans on different rows meeting at ``target`` (None when they share the row)."""
    ra, rb = plan_a["anchors"][0]["ref"], plan_b["anchors"][0]["ref"]
    if ra == rb:
        return None
    hops_a = plan_a["hops"]
    n_inter = sum(1 for h in hops_a if h["to"] != "target")
    hops_b = []
    rename = {"a1": "a2", **{f"x{i}": f"x{i + n_inter}" for i in range(1, 4)}}
    for h in plan_b["hops"]:
        hops_b.append({**h, "from": rename.get(h["from"], h["from"]), "to": rename.get(h["to"], h["to"])})
    mentions = [table.require_row(ra).mention, table.require_row(rb).mention]
    return {
        "target": plan_a["target"],
        "anchors": [plan_a["anchors"][0], {**plan_b["anchors"][0], "var": "a2"}],
        "hops": hops_a + hops_b,
        "relevance_text": relevance_text(query, mentions),
    }


def zero_hop_plan(query: str, target_type: str) -> dict:
    return {"target": {"type": target_type}, "anchors": [], "hops": [], "relevance_text": query}


def _key(plan: dict, ranking, trace, gold: Sequence[int]) -> tuple:
    rank = ranking.rank_of(gold)
    return (rank if rank is not None else 10**9, len(plan["anchors"]), len(plan["hops"]), trace.candidates)


class ProgrammaticTeacher:
    """Enumerate, execute and keep the best metapath plan for each query (uses the gold answers)."""

    def __init__(self, schema: Schema, node_types: Sequence[str], executor, cfg: TeacherConfig = TeacherConfig()):
        self.schema, self.node_types, self.executor, self.cfg = schema, list(node_types), executor, cfg

    def target_type(self, gold: Sequence[int]) -> str:
        types = [self.node_types[g] for g in gold]
        return max(sorted(set(types)), key=types.count)

    def _best(self, plans: list[dict], query: str, table: EntityTable, gold: Sequence[int]):
        results = self.executor.execute_batch([json_text(p) for p in plans], [query] * len(plans), [table] * len(plans))
        scored = sorted(
            ((_key(p, r, t, gold), i) for i, (p, (r, t)) in enumerate(zip(plans, results))), key=lambda x: x[0]
        )
        return [(plans[i], results[i], key) for key, i in scored]

    @staticmethod
    def _solved(ranked) -> bool:
        return ranked[0][2][0] == 1

    def teach_one(self, query: str, table: EntityTable, gold: Sequence[int]) -> TeacherPlan:
        target = self.target_type(gold)
        singles = single_anchor_plans(self.schema, table, query, target, self.cfg)[: self.cfg.max_candidates]
        # Cheapest plans first. A zero- or one-hop plan that ranks a gold answer first cannot be beaten (every
        # other plan has more hops or anchors, which the key ranks after it), so the rest is then not executed:
        # the chosen plan is the same as when every candidate runs.
        ranked = self._best(
            [p for p in singles if len(p["hops"]) == 1] + [zero_hop_plan(query, target)], query, table, gold
        )
        longer = [p for p in singles if len(p["hops"]) > 1]
        if longer and not self._solved(ranked):
            ranked = sorted(ranked + self._best(longer, query, table, gold), key=lambda x: x[2])
        tried = len(ranked)
        # intersections of the best single-anchor plans that reached a gold answer or anything at all
        top = [p for p, (r, _), _ in ranked if p["anchors"] and len(r)][: self.cfg.pair_anchors]
        pairs = [
            x for a in range(len(top)) for b in range(a + 1, len(top)) if (x := intersect(top[a], top[b], query, table))
        ]
        if pairs and not self._solved(ranked):
            ranked = sorted(ranked + self._best(pairs, query, table, gold), key=lambda x: x[2])
            tried += len(pairs)
        plan, (ranking, trace), key = ranked[0]
        if key[0] == 10**9 and not len(ranking):
            return TeacherPlan(None, None, 0, tried)
        return TeacherPlan(plan, ranking.rank_of(gold), trace.candidates, tried)

    def teach(
        self, queries: Sequence[str], tables: Sequence[EntityTable], golds: Sequence[Sequence[int]], progress=None
    ) -> list[TeacherPlan]:
        out = []
        for q, t, g in zip(queries, tables, golds):
            out.append(self.teach_one(q, t, g))
            if progress is not None:
                progress.update(1)
        return out


def json_text(plan: dict) -> str:
    import json

    return json.dumps(plan, separators=(",", ":"), ensure_ascii=False)

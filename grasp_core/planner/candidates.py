"""The finite set of plans a query can get: what the programmatic teacher executes and the ``cpu`` policy chooses from.

For each target type asked for (``docs/design.md``, "The cpu planner"):
- **term look-ups**: one per entity-table row linked to the target type (no hops: the answers are the row's own
  name-mode bindings, for "what is the term for …" questions);
- **single-anchor metapath plans**: one per (entity-table row, linked type, metapath to the target type), in name
  mode, and in doc mode too for one-hop paths (at most ``max_candidates`` per target type, term look-ups included);
- **pairwise intersections**: for the first ``pair_anchors`` rows that have a one-hop name-mode plan, every two
  of those plans meeting at ``target`` ("both X and Y" questions);
- the **zero-hop plan** (dense search of the target type by the query).

Plans reference entity-table rows (``ref``), so they are the ordinary plan JSON. The policy adds one more choice,
:data:`ABSTAIN` (no graph ranking: the fused ranking is the text ranking).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from grasp_core.entities.table import EntityTable
from grasp_core.plan.model import ABSTAIN
from grasp_core.plan.relevance import relevance_text
from grasp_core.planner.metapaths import Metapath, metapaths
from grasp_core.skb.schema import Schema

__all__ = [
    "ABSTAIN",
    "CandidateConfig",
    "candidate_plans",
    "intersect",
    "single_anchor_plans",
    "term_lookup_plan",
    "zero_hop_plan",
    "json_text",
]


@dataclass(frozen=True)
class CandidateConfig:
    max_hops: int = field(default=3, metadata={"help": "longest metapath enumerated"})
    paths_per_anchor: int = field(default=6, metadata={"help": "metapaths tried per (entity row, node type)"})
    max_candidates: int = field(default=40, metadata={"help": "single-anchor plans kept per target type"})
    pair_anchors: int = field(
        default=4, metadata={"help": "rows whose one-hop plans are combined pairwise into intersections"}
    )
    min_link_score: float = field(
        default=0.5, metadata={"help": "entity-table links below this cosine are not used as anchors"}
    )


def _chain(var: str, path: Metapath, next_index: int) -> list[dict]:
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
    return hops


def single_anchor_plans(
    schema: Schema, table: EntityTable, query: str, target_type: str, cfg: CandidateConfig = CandidateConfig()
) -> list[dict]:
    """Per entity row: its term look-up (a row linked to the target type), then one plan per (linked type, metapath
    to the target type), name and doc modes."""
    plans = []
    for row in table.rows:
        if row.role == "attribute":
            continue
        rel_text = relevance_text(query, [row.mention])
        for node_type, links in row.links.items():
            if not links or links[0].score < cfg.min_link_score:
                continue
            if node_type == target_type:
                plans.append(term_lookup_plan(row.ref, target_type, rel_text))
            for path in metapaths(schema, node_type, target_type, cfg.max_hops, cfg.paths_per_anchor):
                hops = _chain("a1", path, 1)
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
    n_inter = sum(1 for h in plan_a["hops"] if h["to"] != "target")
    rename = {"a1": "a2", **{f"x{i}": f"x{i + n_inter}" for i in range(1, 4)}}
    hops_b = [
        {**h, "from": rename.get(h["from"], h["from"]), "to": rename.get(h["to"], h["to"])} for h in plan_b["hops"]
    ]
    return {
        "target": plan_a["target"],
        "anchors": [plan_a["anchors"][0], {**plan_b["anchors"][0], "var": "a2"}],
        "hops": plan_a["hops"] + hops_b,
        "relevance_text": relevance_text(query, [table.require_row(ra).mention, table.require_row(rb).mention]),
    }


def term_lookup_plan(ref: str, target_type: str, rel_text: str) -> dict:
    """The row's own nodes as the answers: no hops, one name-mode anchor of the target's type."""
    anchor = {"var": "a1", "ref": ref, "type": target_type, "match_mode": "name"}
    return {"target": {"type": target_type}, "anchors": [anchor], "hops": [], "relevance_text": rel_text}


def zero_hop_plan(query: str, target_type: str) -> dict:
    return {"target": {"type": target_type}, "anchors": [], "hops": [], "relevance_text": query}


def candidate_plans(
    schema: Schema,
    table: EntityTable,
    query: str,
    target_types: Sequence[str],
    cfg: CandidateConfig = CandidateConfig(),
) -> list[dict]:
    """Every candidate plan for ``query`` with each of ``target_types`` as target: singles, intersections, zero-hop."""
    out = []
    for target in target_types:
        singles = single_anchor_plans(schema, table, query, target, cfg)[: cfg.max_candidates]
        firsts: dict[str, dict] = {}  # row -> its first one-hop name-mode plan
        for p in singles:
            ref = p["anchors"][0]["ref"]
            if len(p["hops"]) == 1 and p["anchors"][0]["match_mode"] == "name" and ref not in firsts:  # not a look-up
                firsts[ref] = p
        sources = list(firsts.values())[: cfg.pair_anchors]
        pairs = [
            x
            for i in range(len(sources))
            for j in range(i + 1, len(sources))
            if (x := intersect(sources[i], sources[j], query, table))
        ]
        out += singles + pairs + [zero_hop_plan(query, target)]
    return out


def json_text(plan: dict) -> str:
    """A candidate's plan JSON text, compact (the form plans are stored, executed and compared in)."""
    return json.dumps(plan, separators=(",", ":"), ensure_ascii=False)

"""The finite set of plans a query can get: what the programmatic teacher executes and the ``cpu`` policy chooses from.

For each target type asked for (``docs/design.md``, "The cpu planner"):
- **term look-ups**: one per entity-table row linked to the target type (no hops: the answers are the row's own
  name-mode bindings, for "what is the term for …" questions);
- **single-anchor metapath plans**: one per (entity-table row, linked type, metapath to the target type), in name
  mode, and in doc mode too for one-hop paths (at most ``max_candidates`` per target type, term look-ups included);
  a metapath with one hop within a type (HPO's ``parent-child``) also comes with that hop directed each way, in
  name mode ("the parents of X", "the kinds of X", "diseases with any kind of X"), after every row's undirected
  plans and capped apart from them (``max_directed``), so a question keeps every candidate it had without them;
- **intersections**: every two, three … (up to ``max_intersection``) one-hop name-mode plans of different rows
  meeting at ``target``, among the first ``pair_anchors`` rows' first such plans ("both X and Y") and among the
  first ``pair_anchors`` rows over each one relation ("X, Y and Z: which disease?"); a row nested in a longer
  mention ("hypoglycemia" in "fasting hypoglycemia") comes after every row that is not;
- **partial matches**: per relation with two or more such rows, the first ``max_intersection`` of them with
  ``"match": "most"`` (a node on more of the findings ranks higher, one on some of them is still an answer);
- the **zero-hop plan** (dense search of the target type by the query).

Plans reference entity-table rows (``ref``), so they are the ordinary plan JSON. The policy adds one more choice,
:data:`ABSTAIN` (no graph ranking: the fused ranking is the text ranking).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence

from grasp_core.entities.table import EntityTable
from grasp_core.plan.model import ABSTAIN
from grasp_core.plan.relevance import relevance_text
from grasp_core.planner.config import CandidateConfig
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


def _chain(var: str, path: Metapath, next_index: int, dirs: Sequence[str | None] = ()) -> list[dict]:
    """Hops along ``path`` from ``var`` to ``target``, naming intermediates x<next_index>, …; ``dirs`` the hops'
    directions (none given: all undirected)."""
    hops, current = [], var
    for i, (rel, node_type) in enumerate(path):
        last = i == len(path) - 1
        to = "target" if last else f"x{next_index}"
        hop = {"from": current, "rel": rel, "to": to}
        if not last:
            hop["to_type"] = node_type
            next_index += 1
        if i < len(dirs) and (direction := dirs[i]) is not None:
            hop["dir"] = direction
        hops.append(hop)
        current = to
    return hops


def directed_variants(start: str, path: Metapath) -> list[tuple[str | None, ...]]:
    """The hop directions of ``path``'s directed variants: when exactly one hop stays within a type (``start`` is
    the anchor's type), that hop ``"out"`` and ``"in"``; none otherwise (two such hops would be four variants of
    paths nobody asks for)."""
    types = [start, *(t for _, t in path)]
    within = [i for i in range(len(path)) if types[i] == types[i + 1]]
    if len(within) != 1:
        return []
    return [tuple(d if i == within[0] else None for i in range(len(path))) for d in ("out", "in")]


def single_anchor_plans(
    schema: Schema, table: EntityTable, query: str, target_type: str, cfg: CandidateConfig = CandidateConfig()
) -> list[dict]:
    """Per entity row: its term look-up (a row linked to the target type), then one plan per (linked type, metapath
    to the target type), name and doc modes (the first ``max_candidates``); then the directed variants of every
    row's paths (the first ``max_directed``)."""
    plans: list[dict] = []
    directed: list[dict] = []  # after every row's undirected plans, capped apart from them
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
                variants = [(_chain("a1", path, 1), ("name", "doc") if len(path) == 1 else ("name",), plans)]
                variants += [
                    (_chain("a1", path, 1, dirs), ("name",), directed) for dirs in directed_variants(node_type, path)
                ]
                for hops, modes, out in variants:
                    for mode in modes:
                        anchor = {"var": "a1", "ref": row.ref, "type": node_type, "match_mode": mode}
                        out.append(
                            {
                                "target": {"type": target_type},
                                "anchors": [anchor],
                                "hops": hops,
                                "relevance_text": rel_text,
                            }
                        )
    return plans[: cfg.max_candidates] + directed[: cfg.max_directed]


def intersect(plans: Sequence[dict], query: str, table: EntityTable) -> dict | None:
    """Single-anchor plans on different rows meeting at ``target`` ("X, Y and Z: which …?"), anchors ``a1 … an``
    in order (None when two share a row)."""
    refs = [p["anchors"][0]["ref"] for p in plans]
    if len(set(refs)) < len(refs):
        return None
    anchors, hops, inter = [], [], 0  # inter: intermediate variables named so far
    for i, plan in enumerate(plans, 1):
        rename = {"a1": f"a{i}", **{f"x{j}": f"x{j + inter}" for j in range(1, 4)}}
        hops += [
            {**h, "from": rename.get(h["from"], h["from"]), "to": rename.get(h["to"], h["to"])} for h in plan["hops"]
        ]
        anchors.append({**plan["anchors"][0], "var": f"a{i}"})
        inter += sum(1 for h in plan["hops"] if h["to"] != "target")
    mentions = [table.require_row(r).mention for r in refs]
    return {
        "target": plans[0]["target"],
        "anchors": anchors,
        "hops": hops,
        "relevance_text": relevance_text(query, mentions),
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
    nested = {r.ref for r in table.rows if r.parent is not None}
    for target in target_types:
        singles = single_anchor_plans(schema, table, query, target, cfg)
        firsts: dict[str, dict] = {}  # row -> its first one-hop name-mode plan
        by_edge: dict[tuple[str, str], dict[str, dict]] = {}  # (anchor type, relation) -> row -> its plan
        # rows a longer mention holds ("hypoglycemia" in "fasting hypoglycemia") join intersections after the others
        for p in sorted(singles, key=lambda p: p["anchors"][0]["ref"] in nested):
            anchor = p["anchors"][0]
            if len(p["hops"]) == 1 and anchor["match_mode"] == "name" and "dir" not in p["hops"][0]:
                firsts.setdefault(anchor["ref"], p)
                by_edge.setdefault((anchor["type"], p["hops"][0]["rel"]), {}).setdefault(anchor["ref"], p)
        groups: dict[str, dict] = {}
        # each row's first plan with the others' ("X and Y": mixed relations), then rows over one relation
        # ("findings X, Y and Z: which disease?")
        for sources in [list(firsts.values()), *(list(ps.values()) for ps in by_edge.values())]:
            sources = sources[: cfg.pair_anchors]
            for size in range(2, min(cfg.max_intersection, len(sources)) + 1):
                for combo in itertools.combinations(sources, size):
                    if (x := intersect(combo, query, table)) is not None:
                        groups.setdefault(json_text(x), x)
        for ps in by_edge.values() if cfg.partial else ():
            most = intersect(list(ps.values())[: cfg.max_intersection], query, table) if len(ps) > 1 else None
            if most is not None:
                most["match"] = "most"
                groups.setdefault(json_text(most), most)
        out += singles + list(groups.values()) + [zero_hop_plan(query, target)]
    return out


def json_text(plan: dict) -> str:
    """A candidate's plan JSON text, compact (the form plans are stored, executed and compared in)."""
    return json.dumps(plan, separators=(",", ":"), ensure_ascii=False)

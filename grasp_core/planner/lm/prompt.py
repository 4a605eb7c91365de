"""The planner's prompt (paper §3.1 "Plan generation") and the canonical plan serialization.

One unified system prompt (``grasp_core/prompts/planner_system.txt``) in which only the schema is filled per
SKB, then one user message with the entity table and the query. ``compact=True`` (the ``cpu`` profile, whose
model has a short context) lists each relation once with all its type pairs, leaves out the example and
renders the entity table one line per row (mention, role, each linked type's best cosine).

:func:`canonical_plan_json` is the one serialization of a plan used as the SFT target and accepted by the
decoding grammar (:mod:`grasp_core.planner.lm.grammar`): compact JSON with the plan model's key order, anchors
renamed ``a1, a2, …`` and the intermediate variable ``d`` hops down anchor ``aj``'s path ``xj_d``, hops listed
path by path from the last anchor's path to the first's (each path from its anchor to ``target``; the grammar
nests anchors and paths), ``to_type`` only on intermediate variables, and ``type`` always present on ref
anchors (taken from the entity row's first type when the plan leaves it out, as the executor does).
Free texts are made grammar-safe: double quotes become single quotes, backslashes and control characters
become spaces.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from importlib.resources import files
from string import Template
from typing import Any

from grasp_core.entities.table import EntityTable
from grasp_core.llm.chat import Message
from grasp_core.plan.model import TARGET, Anchor, Hop, Match, Plan
from grasp_core.skb.schema import Schema

_FORMAT_HEADER = "Plan format:\n"


def _system_template() -> Template:
    return Template(files("grasp_core").joinpath("prompts/planner_system.txt").read_text())


def _relation_lines(schema: Schema, compact: bool) -> str:
    if compact:  # one line per relation: "rel: a-b, c-d"
        lines = []
        for name in schema.relation_names:
            pairs = ", ".join(f"{r.src}-{r.dst}" for r in schema.relations if r.name == name)
            lines.append(f"{name}: {pairs}")
        return "\n".join(lines)
    return "\n".join(f"- ({r.src}) -[{r.name}]- ({r.dst})" for r in schema.relations)


def _example(schema: Schema) -> str:
    """A one-hop example plan built from the schema's first relation (so it is valid on this SKB)."""
    if not schema.relations:
        return ""
    rel = schema.relations[0]
    plan = {
        "target": {"type": rel.dst},
        "anchors": [{"var": "a1", "ref": "E1", "type": rel.src, "match_mode": "name"}],
        "hops": [{"from": "a1", "rel": rel.name, "to": TARGET}],
        "relevance_text": "the property the query asks for",
    }
    return f"\nExample (the entity table's row E1 is a {rel.src}):\n{canonical_plan_json(plan)}"


def planner_system_prompt(schema: Schema, compact: bool = False) -> str:
    """The unified system prompt with this schema filled in.

    ``compact`` keeps the role, the schema (relations listed tersely) and the plan skeleton, and leaves out
    the rule lines and the example: the small ``cpu`` planner learns the format from its training plans and
    decoding is constrained to the grammar anyway, while its context is only 1,024 tokens.
    """
    text = _system_template().substitute(
        skb_name=schema.name,
        node_types=", ".join(schema.node_types),
        relation_format="relation: type pairs" if compact else "(type) -[relation]- (type)",
        relations=_relation_lines(schema, compact),
        example="" if compact else _example(schema),
    )
    if compact:
        head, rules = text.split(_FORMAT_HEADER, 1)
        text = head + _FORMAT_HEADER + rules.lstrip("\n").split("\n", 1)[0]
    return text.strip()


def build_planner_messages(schema: Schema, table: EntityTable, query: str, compact: bool = False) -> list[Message]:
    """System prompt (schema filled in) + user message (entity table, then the query)."""
    user = f"Entity table:\n{table.render(compact)}\n\nQuery: {query.strip()}"
    return [{"role": "system", "content": planner_system_prompt(schema, compact)}, {"role": "user", "content": user}]


_UNSAFE = re.compile(r"[\\\x00-\x1f\x7f]")


def grammar_safe_text(text: str) -> str:
    """Free text as the grammar allows it: no double quote, backslash or control character."""
    return _UNSAFE.sub(" ", text.replace('"', "'"))


def _as_dict(plan: Any) -> dict:
    if isinstance(plan, Mapping):
        return dict(plan)
    if hasattr(plan, "model_dump"):
        return plan.model_dump(by_alias=True, exclude_none=True)
    raise TypeError(f"expected a Plan or a plan dict, got {type(plan).__name__}")


def anchor_var(j: int) -> str:
    """The canonical name of the ``j``-th anchor (1-based)."""
    return f"a{j}"


def path_var(j: int, depth: int) -> str:
    """The canonical name of the intermediate variable ``depth`` hops down anchor ``a{j}``'s path."""
    return f"x{j}_{depth}"


def canonical_plan_json(plan: Any, table: EntityTable | None = None, with_relevance: bool = True) -> str:
    """The canonical compact JSON of a plan (a ``Plan`` or its JSON dict); see the module docstring.

    ``table`` supplies the type of a ref anchor that has none. Hops that no anchor's path reaches are dropped
    (a valid plan has none). ``with_relevance=False`` empties the relevance text (the training target of a
    planner whose grammar allows none; the executor then derives it from the query).
    """
    p = _as_dict(plan)
    anchors, hops = [dict(a) for a in p.get("anchors") or []], [dict(h) for h in p.get("hops") or []]
    rename = {TARGET: TARGET} | {a["var"]: anchor_var(j) for j, a in enumerate(anchors, 1)}
    out_anchors = []
    for a in anchors:
        row = table.row(a["ref"]) if a.get("ref") is not None and table is not None else None
        atype = a.get("type") or (row.types[0] if row is not None else None)
        text = grammar_safe_text(a["text"]) if a.get("text") is not None else None
        out_anchors.append(
            Anchor(
                var=rename[a["var"]], type=atype, text=text, ref=a.get("ref"), match_mode=a.get("match_mode", "name")
            )
        )
    out_hops, done = [], set()
    for j in range(
        len(anchors), 0, -1
    ):  # each anchor's path to the target, the last anchor's first (the grammar nests them)
        var, depth = anchors[j - 1]["var"], 0
        while (i := next((i for i, h in enumerate(hops) if i not in done and h.get("from") == var), None)) is not None:
            done.add(i)
            h = hops[i]
            if h["to"] not in rename:
                rename[h["to"]] = path_var(j, depth + 1)
            to_type = h.get("to_type") if h["to"] != TARGET else None
            out_hops.append(
                Hop.model_validate(
                    {
                        "from": rename[var],
                        "rel": h["rel"],
                        "to": rename[h["to"]],
                        "to_type": to_type,
                        "dir": h.get("dir"),
                    }
                )
            )
            var, depth = h["to"], depth + 1
    relevance = grammar_safe_text(p.get("relevance_text") or "") if with_relevance else ""
    match: Match | None = "most" if p.get("match") == "most" else None  # "all", the default, is left out
    canonical = Plan(
        target=p["target"], anchors=tuple(out_anchors), hops=tuple(out_hops), relevance_text=relevance, match=match
    )
    return json.dumps(canonical.to_json(), separators=(",", ":"), ensure_ascii=False)

"""The planner's prompt (paper §3.1 "Plan generation") and the canonical plan serialization.

One unified system prompt (``grasp_core/prompts/planner_system.txt``) in which only the schema is filled per
SKB, then one user message with the entity table and the query. ``compact=True`` (the ``cpu`` profile, whose
model has a short context) lists each relation once with all its type pairs, leaves out the example and
renders the entity table one line per row (mention, role, each linked type's best cosine).

:func:`canonical_plan_json` is the one serialization of a plan used as the SFT target and accepted by the
decoding grammar (:mod:`grasp_core.planner.grammar`): compact JSON, fixed key order, anchors renamed
``a1, a2, …`` and intermediate variables ``x1, x2, …``, hops listed path by path (each anchor's path from
the anchor to ``target``), ``to_type`` only on intermediate variables, and ``type`` always present on ref
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
from grasp_core.skb.schema import Schema

TARGET = "target"
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
    return f"\nExample (the entity table's row E1 is a {rel.src}):\n{json.dumps(plan, separators=(',', ':'))}"


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


def canonical_plan_json(plan: Any, table: EntityTable | None = None, with_relevance: bool = True) -> str:
    """The canonical compact JSON of a plan (a ``Plan`` or its JSON dict); see the module docstring.

    ``table`` supplies the type of a ref anchor that has none. Hops that no anchor's path reaches are dropped
    (a valid plan has none). ``with_relevance=False`` empties the relevance text (the training target of a
    planner whose grammar allows none; the executor then derives it from the query).
    """
    p = _as_dict(plan)
    anchors, hops = [dict(a) for a in p.get("anchors") or []], [dict(h) for h in p.get("hops") or []]
    rename = {TARGET: TARGET}
    for i, a in enumerate(anchors, 1):
        rename[a["var"]] = f"a{i}"
    out_anchors = []
    for a in anchors:
        atype = a.get("type")
        row = table.row(a["ref"]) if a.get("ref") is not None and table is not None else None
        if atype is None and row is not None:
            atype = row.types[0]
        out: dict[str, Any] = {"var": rename[a["var"]]}
        if a.get("ref") is not None:
            out["ref"] = a["ref"]
            if atype is not None:
                out["type"] = atype
        else:
            out["type"] = atype
            out["text"] = grammar_safe_text(a.get("text") or "")
        out["match_mode"] = a.get("match_mode", "name")
        out_anchors.append(out)

    out_hops, done, n_x = [], set(), 0
    for a in anchors:  # follow each anchor's path to the target, in plan order
        frontier = [a["var"]]
        while frontier:
            var = frontier.pop(0)
            for i, h in enumerate(hops):
                if i in done or h.get("from") != var:
                    continue
                done.add(i)
                if h["to"] not in rename:
                    n_x += 1
                    rename[h["to"]] = f"x{n_x}"
                hop = {"from": rename[var], "rel": h["rel"], "to": rename[h["to"]]}
                if h["to"] != TARGET and h.get("to_type") is not None:
                    hop["to_type"] = h["to_type"]
                out_hops.append(hop)
                frontier.append(h["to"])
    canonical = {
        "target": {"type": p["target"]["type"]},
        "anchors": out_anchors,
        "hops": out_hops,
        "relevance_text": grammar_safe_text(p.get("relevance_text") or "") if with_relevance else "",
    }
    return json.dumps(canonical, separators=(",", ":"), ensure_ascii=False)

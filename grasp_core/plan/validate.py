"""Check a plan against the SKB schema and the entity table (paper §3.1 step 1, ``docs/design.md``).

:func:`validate_plan` raises :class:`PlanError` with one of these reasons, checked in this order:

- ``unknown_ref``       an anchor references a row the entity table does not have, or a ref anchor without
  ``type`` comes with no table (a typed ref anchor is only checked against a table when one is given, so
  a resolved plan re-validates without its table);
- ``unknown_type``      the target, an anchor or a hop's ``to_type`` names a type the schema lacks;
- ``unknown_relation``  a hop's relation is not in the schema;
- ``duplicate_variable`` two anchors share a ``var``, or a hop ends at an anchor variable;
- ``dangling_variable`` a hop starts at a variable nothing defines, or ends at a variable (other than
  ``target``) that no further hop leaves;
- ``cycle``             the hops loop, leave ``target``, or leave one variable twice (paths must converge on
  ``target``: the plan is a tree whose root is ``target`` and whose leaves are the anchors);
- ``anchor_unreachable`` an anchor no hop leaves (this includes any anchor of a zero-hop plan, except the one
  anchor of a **term look-up**: no hops and one anchor of the target's type, whose bindings are the answers);
- ``bad_hop_types``     no assignment of node types lets every hop's relation connect its two ends
  (edges are undirected, so either direction of a schema relation counts);
- ``ambiguous_type``    an intermediate variable could have several types and none was given;
- ``bad_direction``     a hop with ``dir`` joins two different types (only a same-type hop takes a direction);
- ``bad_match``         a ``"most"`` plan whose paths meet before ``target`` (partial matching adds whole paths).

Intermediate variable types come from ``to_type`` when given; otherwise they are inferred by constraint
propagation over the hops (each variable starts with every type, or its declared one, and each hop keeps
only the types its relation connects to the other end's remaining types, to a fixpoint). A variable left
with exactly one type gets it; several is ``ambiguous_type``, none is ``bad_hop_types``.

On success it returns the *resolved* plan: every anchor carries its type (a ref anchor's comes from its own
``type`` or else its entity row's first type) and every hop carries ``to_type``. The compiler and the
executor only ever see resolved plans.
"""

from __future__ import annotations

from collections import Counter

from grasp_core.entities.table import EntityTable
from grasp_core.errors import PlanError
from grasp_core.plan.model import TARGET, Plan
from grasp_core.skb.schema import Schema


def validate_plan(plan: Plan, schema: Schema, entity_table: EntityTable | None = None) -> Plan:
    """Return ``plan`` with every type resolved, or raise :class:`PlanError`."""
    anchor_types = _anchor_types(plan, entity_table)
    _check_names(plan, schema, anchor_types)
    _check_structure(plan)
    if is_term_lookup(plan) and anchor_types[plan.anchors[0].var] != plan.target.type:
        a = plan.anchors[0]
        raise PlanError(
            "anchor_unreachable",
            f"anchor {a.var!r} ({anchor_types[a.var]}) has no hop to the {plan.target.type} target; a plan without "
            "hops looks up its one anchor, which must then have the target's type",
        )
    types = _infer_types(plan, schema, anchor_types)
    if plan.match == "most":
        entered = Counter(h.to for h in plan.hops if h.to != TARGET)
        if joined := [v for v, n in entered.items() if n > 1]:
            raise PlanError(
                "bad_match", f"paths meet at {joined[0]!r}; a plan with match 'most' joins its paths at {TARGET!r} only"
            )
    anchors = tuple(a.model_copy(update={"type": types[a.var]}) for a in plan.anchors)
    hops = tuple(h.model_copy(update={"to_type": types[h.to]}) for h in plan.hops)
    return plan.model_copy(update={"anchors": anchors, "hops": hops})


def _anchor_types(plan: Plan, table: EntityTable | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for a in plan.anchors:
        if a.type is not None and (a.ref is None or table is None):  # a text anchor always has a type
            out[a.var] = a.type
            continue
        row = table.row(a.ref) if table is not None and a.ref is not None else None
        if row is None:
            have = table.refs if table is not None else "no entity table was given"
            raise PlanError("unknown_ref", f"anchor {a.var!r} references {a.ref!r}, which is not in the table ({have})")
        if a.type is None and not row.types:
            raise PlanError("unknown_ref", f"entity row {a.ref!r} has no type, so anchor {a.var!r} needs a 'type'")
        out[a.var] = a.type or row.types[0]
    return out


def _check_names(plan: Plan, schema: Schema, anchor_types: dict[str, str]) -> None:
    named = [("target", plan.target.type)] + [(f"anchor {v!r}", t) for v, t in anchor_types.items()]
    named += [(f"hop {i} to_type", h.to_type) for i, h in enumerate(plan.hops) if h.to_type is not None]
    for what, node_type in named:
        if node_type not in schema.node_types:
            raise PlanError(
                "unknown_type", f"{what}: unknown node type {node_type!r} (schema: {sorted(schema.node_types)})"
            )
    relations = set(schema.relation_names)
    for i, h in enumerate(plan.hops):
        if h.rel not in relations:
            raise PlanError("unknown_relation", f"hop {i}: unknown relation {h.rel!r} (schema: {sorted(relations)})")


def is_term_lookup(plan: Plan) -> bool:
    """No hops and one anchor: the answers are the anchor's own bindings ("what is the term for …")."""
    return not plan.hops and len(plan.anchors) == 1


def _check_structure(plan: Plan) -> None:
    if is_term_lookup(plan):
        return
    anchors = [a.var for a in plan.anchors]
    if len(set(anchors)) != len(anchors):
        raise PlanError("duplicate_variable", f"anchor variables repeat: {anchors}")
    next_of: dict[str, str] = {}
    defined = set(anchors) | {h.to for h in plan.hops}
    for i, h in enumerate(plan.hops):
        if h.to in anchors:
            raise PlanError("duplicate_variable", f"hop {i} ends at anchor variable {h.to!r}")
        if h.from_ not in defined:
            raise PlanError("dangling_variable", f"hop {i} starts at {h.from_!r}, which no anchor or hop defines")
        if h.from_ == h.to:
            raise PlanError("cycle", f"hop {i} goes from {h.from_!r} to itself")
        if h.from_ in next_of:
            raise PlanError("cycle", f"variable {h.from_!r} is left by two hops; paths must converge on {TARGET!r}")
        next_of[h.from_] = h.to
    if TARGET in next_of:
        raise PlanError("cycle", f"a hop leaves {TARGET!r}; {TARGET!r} must end every path")
    for var in sorted(defined - {TARGET}, key=lambda v: (v in anchors, v)):
        seen, cur = {var}, var
        while cur in next_of:
            cur = next_of[cur]
            if cur in seen:
                raise PlanError("cycle", f"the hops loop through {cur!r}")
            seen.add(cur)
        if cur != TARGET:
            if cur == var and var in anchors:
                raise PlanError("anchor_unreachable", f"anchor {var!r} is not connected to {TARGET!r} by any hop")
            raise PlanError(
                "dangling_variable", f"variable {cur!r} leads nowhere (no hop leaves it towards {TARGET!r})"
            )


def _infer_types(plan: Plan, schema: Schema, anchor_types: dict[str, str]) -> dict[str, str]:
    all_types = set(schema.node_types)
    domain: dict[str, set[str]] = {TARGET: {plan.target.type}}
    for var, t in anchor_types.items():
        domain[var] = {t}
    for h in plan.hops:
        domain.setdefault(h.from_, set(all_types))
        domain.setdefault(h.to, set(all_types))
    for h in plan.hops:
        if h.to_type is not None:
            if h.to_type not in domain[h.to]:
                raise PlanError("bad_hop_types", f"{h.to!r} is declared both {h.to_type!r} and {sorted(domain[h.to])}")
            domain[h.to] = {h.to_type}
    changed = True
    while changed:
        changed = False
        for i, h in enumerate(plan.hops):
            for a, b in ((h.from_, h.to), (h.to, h.from_)):
                reachable = {n for t in domain[a] for n in schema.neighbour_types(h.rel, t)}
                kept = domain[b] & reachable
                if not kept:
                    raise PlanError(
                        "bad_hop_types",
                        f"hop {i} ({h.from_} -[{h.rel}]- {h.to}): {h.rel!r} does not connect "
                        f"{sorted(domain[h.from_])} with {sorted(domain[h.to])}",
                    )
                if kept != domain[b]:
                    domain[b], changed = kept, True
    for var, types in domain.items():
        if len(types) > 1:
            raise PlanError("ambiguous_type", f"variable {var!r} could be any of {sorted(types)}; give its 'to_type'")
    resolved = {var: next(iter(types)) for var, types in domain.items()}
    for i, h in enumerate(plan.hops):
        if h.dir is not None and resolved[h.from_] != resolved[h.to]:
            raise PlanError(
                "bad_direction",
                f"hop {i} ({h.from_} -[{h.rel}]- {h.to}) has 'dir' but joins {resolved[h.from_]!r} to "
                f"{resolved[h.to]!r}; only a hop between two nodes of one type takes a direction",
            )
    return resolved

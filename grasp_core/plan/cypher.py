"""Compile a validated plan into one Cypher query (paper §3.1 step 3, ``docs/design.md``).

A plan is a tree rooted at ``target`` whose leaves are anchors (see :mod:`grasp_core.plan.validate`).
Semantics: a target node's anchor score is the sum of the binding scores of the anchors on a matching
path (one binding per anchor), maximised over paths; edges are undirected (unless a hop has ``dir``) and may be
walked more than once
(every hop is its own ``MATCH`` clause, so neither engine applies relationship uniqueness across hops).

Query shape, chosen for the embedded engine's planner (an ``UNWIND $b MATCH ({id: b.id})`` form is a cross
product there, far slower):

1. The first anchor of the plan starts the *main chain* (its path to ``target``): its bindings are matched
   with ``WHERE a.id IN $ids`` and joined to their scores, one row per binding.
2. Each hop of the main chain is one undirected ``MATCH`` followed by ``WITH next, max(s) AS s``: a
   (max,+) propagation that keeps one row per reached node, so long paths never multiply rows.
3. Any other subtree that joins the main chain at a variable ``v`` (a second anchor: intersection) is
   matched backwards from ``v`` with its anchors filtered by ``IN $ids``, joined to its bindings, and its
   best binding-score sum is added to ``v``'s score.
4. The frontier cap (``max_frontier``, :class:`~grasp_core.plan.execute.ExecutionConfig`): after its side
   branches, every main-chain variable keeps only its ``max_frontier`` best nodes,
   ``WITH v, s ORDER BY s DESC, v.id LIMIT n`` (ties broken by node id, so results are deterministic). The
   aggregation already makes each hop exact per node; the cap bounds the next hop's work, which is the sum
   of the kept nodes' degrees (Prime's hubs have 31k neighbours and ``synergistic interaction`` reaches every
   drug in two hops). Results are exact whenever no main-chain frontier exceeds the cap; beyond it the
   lowest-scored nodes are dropped, i.e. only candidates whose anchor score is below the ``n``-th best at
   that hop. The cap is applied after the side branches, so it ranks complete scores. (Before them, LadybugDB
   0.22 pushed the side branch's semi-join mask below the ``LIMIT``, which then kept other nodes than the
   Cypher semantics say; the oracle test of the cap caught it.) ``tests/plan/oracle.py`` applies the same cap.

Every label and relationship type is an identifier from :func:`grasp_core.graph.store.table_names` (the
schema's names, never the plan's text); plan variables become generated names (``v0``, ``v1``, …, ``t``,
relationships ``e<hop index>``); binding ids and scores travel only as parameters. Nothing the query or
the LLM wrote reaches the text.

The dialects differ in two places. (a) :func:`_anchor_start`: Neo4j seeks the main anchor's bindings
through its ``id`` uniqueness constraint (``UNWIND $b AS w MATCH (a:L {id: w.id})``, the idiomatic form
there); LadybugDB cannot evaluate a variable inside a node property map ("Cannot evaluate expression with
type VARIABLE") and uses the ``IN`` + join form. (b) Each main-chain hop carries a join hint in the ladybug
dialect, ``HINT (v JOIN e) JOIN w``: without it the engine's planner (which cannot estimate a frontier's
size) often scanned the whole relationship table and hash-joined it with the frontier, several times slower on
synth-prime ``full`` than expanding from the frontier. Neo4j expands from bound nodes by itself. Everything else
is the same text.

The ``neo4j`` dialect is the text for any Bolt server. ArcadeDB's OpenCypher engine (the server the tests start,
:mod:`grasp_core.graph.bolt_server`) runs it unchanged, so there is no third dialect: 30 random plans x 2 caps equal
the oracle on it (``tests/graph/test_neo4j_store.py``), and so do all served plans of the hpo and tiny synth-prime
test queries (``benchmarks/bolt_pipeline.py``, ``docs/bolt.md``). Should a Bolt server need other text, the
difference belongs here, as a dialect, with the same text kept valid Neo4j Cypher.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from grasp_core.errors import PlanError
from grasp_core.graph.store import Dialect, quote, table_names
from grasp_core.plan.model import TARGET, Hop, Plan
from grasp_core.plan.validate import validate_plan
from grasp_core.skb.schema import Schema

Bindings = Mapping[str, Sequence[tuple[int, float]]]  # anchor var -> [(node id, score)]


@dataclass(frozen=True)
class CompiledPlan:
    text: str
    params: dict[str, Any] = field(default_factory=dict)


def compile_plan(
    plan: Plan,
    schema: Schema,
    bindings: Bindings | None = None,
    dialect: Dialect = "neo4j",
    max_frontier: int | None = None,
) -> CompiledPlan:
    """One Cypher query returning rows ``(node_id, score)``, one per reached target node.

    ``plan`` must be resolved (the output of :func:`validate_plan`, or a plan whose ref anchors carry a
    ``type``); ``bindings`` maps each anchor var to its linked ``(node id, cosine)`` pairs (empty lists when
    omitted, which is useful to inspect the text). ``max_frontier`` caps every main-chain hop (see the module
    doc); None = no cap.
    """
    plan = validate_plan(plan, schema)
    if not plan.hops:
        raise PlanError("zero_hops", "a plan without hops is answered by dense search, not by the graph store")
    if max_frontier is not None and max_frontier < 1:
        raise ValueError(f"max_frontier must be >= 1 or None, not {max_frontier}")
    return _Compiler(plan, schema, bindings or {}, dialect, max_frontier).compile()


def compile_paths(
    plan: Plan, schema: Schema, anchor_var: str, bindings: Bindings, node_id: int, limit: int = 1000
) -> CompiledPlan:
    """A query returning up to ``limit`` node-id paths ``(binding, …, node_id)`` along ``anchor_var``'s chain."""
    plan = validate_plan(plan, schema)
    c = _Compiler(plan, schema, bindings, "neo4j")
    chain = c.chain(anchor_var)
    lines = [
        f"MATCH ({c.name[anchor_var]}:{c.label(anchor_var)}) WHERE {c.name[anchor_var]}.id IN ${c.ids_param(anchor_var)}"
    ]
    for hop in chain[:-1]:
        lines.append(c.hop_match(hop.from_, hop))
    lines.append(c.hop_match(chain[-1].from_, chain[-1], f"{c.name[TARGET]}.id = $node_id"))
    cols = [anchor_var] + [h.to for h in chain]
    lines.append(f"RETURN {', '.join(c.name[v] + '.id' for v in cols)} LIMIT {int(limit)}")
    c.params["node_id"] = int(node_id)
    return c.finish(lines)


class _Compiler:
    def __init__(
        self, plan: Plan, schema: Schema, bindings: Bindings, dialect: Dialect, max_frontier: int | None = None
    ):
        self.plan, self.bindings, self.dialect, self.max_frontier = plan, bindings, dialect, max_frontier
        self.tables = table_names(schema)
        self.types = {a.var: a.type for a in plan.anchors} | {h.to: h.to_type for h in plan.hops}
        self.types[TARGET] = plan.target.type
        order = [a.var for a in plan.anchors] + [h.to for h in plan.hops if h.to != TARGET]
        self.name = {v: f"v{i}" for i, v in enumerate(dict.fromkeys(order))} | {TARGET: "t"}
        self.anchor_index = {a.var: i for i, a in enumerate(plan.anchors)}
        self.next_hop = {h.from_: h for h in plan.hops}
        self.params: dict[str, Any] = {}

    def label(self, var: str) -> str:
        node_type = self.types[var]
        if node_type is None:
            raise PlanError("schema", f"variable {var!r} has no type: compile only validated plans")
        return quote(self.tables.node[node_type])

    def ids_param(self, anchor: str) -> str:
        key = f"ids{self.anchor_index[anchor]}"
        self.params[key] = [int(i) for i, _ in self.bindings.get(anchor, ())]
        return key

    def scores_param(self, anchor: str) -> str:
        key = f"b{self.anchor_index[anchor]}"
        self.params[key] = [{"id": int(i), "score": float(s)} for i, s in self.bindings.get(anchor, ())]
        return key

    def chain(self, var: str) -> list[Hop]:
        hops = []
        while var != TARGET:
            hops.append(self.next_hop[var])
            var = hops[-1].to
        return hops

    def hop_match(self, known: str, hop: Hop, where: str = "", extend: bool = False) -> str:
        """A MATCH from the already bound ``known`` end of ``hop`` to its other end (undirected unless the hop has
        ``dir``).

        ``extend``: in the ladybug dialect, add the join hint that makes the engine extend from ``known``
        (main-chain hops; see the module doc). Side-branch hops are left to its planner, which starts them
        from their selective anchor filters.
        """
        other = hop.to if known == hop.from_ else hop.from_
        rel, a, b = quote(self.tables.rel[hop.rel]), self.name[known], self.name[other]
        edge = f"e{self.plan.hops.index(hop)}"
        # a directed hop's edge leaves its source: ``from`` for "out", ``to`` for "in"
        left, right = (
            ("-", "-")
            if hop.dir is None
            else ("-", "->")
            if (hop.dir == "out") == (known == hop.from_)
            else ("<-", "-")
        )
        text = f"MATCH ({a}){left}[{edge}:{rel}]{right}({b}:{self.label(other)})" + (f" WHERE {where}" if where else "")
        if extend and self.dialect == "ladybug":
            text += f" HINT ({a} JOIN {edge}) JOIN {b}"
        return text

    def compile(self) -> CompiledPlan:
        first = self.plan.anchors[0].var
        main = self.chain(first)
        on_main = {first} | {h.to for h in main}
        lines = [
            _anchor_start(
                self.dialect, self.name[first], self.label(first), self.ids_param(first), self.scores_param(first)
            )
        ]
        for hop in main:
            v = self.name[hop.to]
            lines += [self.hop_match(hop.from_, hop, extend=True), f"WITH {v}, max(s) AS s"]
            for side in (h for h in self.plan.hops if h.to == hop.to and h.from_ not in on_main):
                lines += self.side_branch(hop.to, side)
            if self.max_frontier is not None:
                lines.append(f"WITH {v}, s ORDER BY s DESC, {v}.id LIMIT {int(self.max_frontier)}")
        lines.append(f"RETURN {self.name[TARGET]}.id AS node_id, s AS score")
        return self.finish(lines)

    def finish(self, lines: list[str]) -> CompiledPlan:
        """The query text and only the parameters it uses (engines may reject unused ones)."""
        text = "\n".join(lines)
        return CompiledPlan(text, {k: v for k, v in self.params.items() if re.search(rf"\${k}\b", text)})

    def side_branch(self, at: str, hop: Hop) -> list[str]:
        """Clauses adding the best binding-score sum of the subtree entering ``at`` through ``hop``."""
        lines, anchors, stack = [], [], [hop]
        while stack:
            h = stack.pop(0)
            if h.from_ in self.anchor_index:
                anchors.append(h.from_)
                lines.append(self.hop_match(h.to, h, f"{self.name[h.from_]}.id IN ${self.ids_param(h.from_)}"))
            else:
                lines.append(self.hop_match(h.to, h))
            stack += [c for c in self.plan.hops if c.to == h.from_]
        v = self.name[at]
        kept = [self.name[a] for a in anchors]
        lines.append(f"WITH DISTINCT {v}, s, {', '.join(kept)}")
        joined = []
        for a in anchors:
            w, x = f"w{self.anchor_index[a]}", self.name[a]
            joined.append(w)
            carry = ", ".join([v, "s", *kept, *joined])
            lines += [f"UNWIND ${self.scores_param(a)} AS {w}", f"WITH {carry} WHERE {w}.id = {x}.id"]
            kept.remove(x)
        total = " + ".join(f"{w}.score" for w in joined)
        lines += [f"WITH {v}, s, max({total}) AS side", f"WITH {v}, s + side AS s"]
        return lines


def _anchor_start(dialect: Dialect, var: str, label: str, ids: str, scores: str) -> str:
    """The one dialect difference: how the main anchor's bindings become rows ``(var, s)``."""
    if dialect == "neo4j":
        return f"UNWIND ${scores} AS w\nMATCH ({var}:{label} {{id: w.id}})\nWITH {var}, w.score AS s"
    if dialect == "ladybug":
        return (
            f"MATCH ({var}:{label}) WHERE {var}.id IN ${ids}\nUNWIND ${scores} AS w\n"
            f"WITH {var}, w WHERE w.id = {var}.id\nWITH {var}, w.score AS s"
        )
    raise ValueError(f"unknown Cypher dialect {dialect!r}")

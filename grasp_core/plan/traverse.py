"""Execute a plan's traversal in process, over the graph's CSR arrays (:mod:`grasp_core.graph.adjacency`).

It returns exactly what the plan's Cypher query (:func:`grasp_core.plan.cypher.compile_plan`) returns from a
graph store: every reached target node with its anchor score, the sum of the binding scores of the anchors on
a matching path, maximised over paths; undirected hops unless a hop has ``dir``; the same ``max_frontier`` cap on main-chain
variables, ties broken by the lower node id. Each variable holds a dense score vector (-inf = not reached); a
hop takes, for every node of the hop's end type, the best score among its neighbours over the relation —
(max,+) — and a variable entered by several hops (an intersection) adds them. A ``"most"`` plan (partial
matching, :class:`~grasp_core.plan.model.Plan`) is traversed path by path and the paths' scores added per node
(:func:`add_branches`), as the graph store runs it.

A hop either pushes the frontier's scores to its neighbours (``np.maximum.at``; work = the frontier's degree
sum) or pulls, for every node of the hop's end type, its best neighbour score (one gather over that type's
adjacency block plus ``np.maximum.reduceat``; work = the block's size, cheaper per edge than a push), whichever is
less work, so that even a hop over every edge of Prime's largest relation stays a small part of a question (plan
execution at Prime's scale: ``benchmarks/results/plan_execution.json``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from grasp_core.graph.adjacency import Adjacency
from grasp_core.plan.model import TARGET, Hop, Plan

PULL_PER_PUSH = 2  # a pulled list entry costs about half a pushed one (a timing on synth-prime full)


def traverse(
    plan: Plan,
    adjacency: Adjacency,
    bindings: Mapping[str, Sequence[tuple[int, float]]],
    max_frontier: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(target node ids ascending, their anchor scores as float64) of a resolved plan with at least one hop."""
    if max_frontier is not None and max_frontier < 1:
        raise ValueError(f"max_frontier must be >= 1 or None, not {max_frontier}")
    if plan.partial:
        return add_branches([traverse(b, adjacency, bindings, max_frontier) for b in plan.branches()])
    n = adjacency.num_nodes
    types = {TARGET: plan.target.type}
    for h in plan.hops:
        if h.to != TARGET:
            if h.to_type is None:  # validate_plan resolves every intermediate type
                raise ValueError(f"hop to {h.to!r} has no to_type: traverse validated plans only")
            types[h.to] = h.to_type
    entering: dict[str, list] = {}
    for hop in plan.hops:
        entering.setdefault(hop.to, []).append(hop)
    main, var = [plan.anchors[0].var], plan.anchors[0].var
    while var != TARGET:
        var = next(h.to for h in plan.hops if h.from_ == var)
        main.append(var)

    def value(var: str) -> np.ndarray:
        if var not in entering:  # an anchor: its bindings
            vec = np.full(n, -np.inf)
            for node, score in bindings[var]:
                vec[node] = max(vec[node], score)
            return vec
        # the main-chain hop first, then side branches (the Cypher query's order of addition)
        hops = sorted(entering[var], key=lambda h: h.from_ not in main)
        vec = _hop(value(hops[0].from_), hops[0], adjacency, types[var], n)
        for hop in hops[1:]:
            vec += _hop(value(hop.from_), hop, adjacency, types[var], n)
        vec[~adjacency.of_type[types[var]]] = -np.inf
        if max_frontier is not None and var in main:
            live = np.flatnonzero(vec > -np.inf)
            if len(live) > max_frontier:
                vec[live[np.lexsort((live, -vec[live]))][max_frontier:]] = -np.inf
        return vec

    target = value(TARGET)
    ids = np.flatnonzero(target > -np.inf)
    return ids, target[ids]


def add_branches(parts: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """A ``"most"`` plan's result from its branches' (ids, scores): every node some branch reached, ascending, with
    the sum of its scores over the branches that reached it."""
    ids = np.concatenate([i for i, _ in parts]).astype(np.int64)
    scores = np.concatenate([s for _, s in parts]).astype(np.float64)
    out, at = np.unique(ids, return_inverse=True)
    total = np.zeros(len(out))
    np.add.at(total, at, scores)
    return out, total


_REVERSE = {"out": "in", "in": "out"}


def _hop(vec: np.ndarray, hop: Hop, adjacency: Adjacency, node_type: str, n: int) -> np.ndarray:
    """Every ``node_type`` node's best neighbour score over ``hop``'s relation (-inf: no scored neighbour; other
    types may hold scores too, the caller masks them). A directed hop pushes along the frontier's edges in its
    direction and pulls along the reached nodes' edges in the other."""
    out = np.full(n, -np.inf)
    live = np.flatnonzero(vec > -np.inf)
    push = adjacency.relation(hop.rel, hop.dir)
    pull = push if hop.dir is None else adjacency.relation(hop.rel, _REVERSE[hop.dir])
    if push is None or pull is None or not len(live):
        return out
    deg = push.degree[live]
    work = int(deg.sum())
    rows, first, end = pull.block(node_type)
    if work * PULL_PER_PUSH < end - first:  # push the frontier's scores along its edges
        offsets = np.arange(work) + np.repeat(push.start[live] - (np.cumsum(deg) - deg), deg)
        np.maximum.at(out, push.nbr[offsets], np.repeat(vec[live], deg))
    elif len(rows):  # pull: every node of the type takes its best neighbour's score
        out[rows] = np.maximum.reduceat(vec[pull.nbr[first:end]], pull.start[rows] - first)
    return out

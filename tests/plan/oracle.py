"""Test support: a random Prime-like SKB, random valid plans, and the reference evaluator (the oracle).

The oracle evaluates a plan with scipy.sparse adjacency matrices, one per relation and symmetric (edges are
undirected), and per relation its edges as stored (``(rel, "out")``) and reversed (``(rel, "in")``) for the hops
with a ``dir``: an anchor's vector holds its binding scores (-inf elsewhere); a hop propagates a vector with
(max,+) — each node takes the best score among its neighbours over the relation — restricted to the hop's
end type; a variable reached by several hops sums them (intersection). The target's finite entries are the
expected ``{node id: anchor score}``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp

from grasp_core.plan.model import TARGET, Anchor, Hop, Plan, Target
from grasp_core.skb.format import SKB
from grasp_core.skb.schema import Relation, Schema

PRIME_LIKE = Schema(
    "prime-like",
    {"disease": ("details",), "gene/protein": ("summary",), "drug": ("description",), "anatomy": ()},
    (
        Relation("ppi", "gene/protein", "gene/protein"),
        Relation("associated with", "gene/protein", "disease"),
        Relation("associated with", "gene/protein", "anatomy"),
        Relation("target", "drug", "gene/protein"),
        Relation("indication", "drug", "disease"),
        Relation("off-label use", "drug", "disease"),
        Relation("expression present", "anatomy", "gene/protein"),
        Relation("parent-child", "disease", "disease"),
        Relation("parent-child", "anatomy", "anatomy"),
    ),
)


def random_skb(seed: int = 0, nodes_per_type: int = 15, edges_per_relation: int = 40) -> SKB:
    rng = np.random.default_rng(seed)
    types = [t for t in PRIME_LIKE.node_types for _ in range(nodes_per_type)]
    n = len(types)
    nodes = pd.DataFrame(
        {
            "node_id": np.arange(n),
            "key": [f"K{i}" for i in range(n)],
            "type": types,
            "name": [f"{t} {i}" for i, t in enumerate(types)],
        }
    )
    for f in PRIME_LIKE.text_fields:
        nodes[f] = None
    ids = {t: np.flatnonzero(np.array(types) == t) for t in PRIME_LIKE.node_types}
    rows = []
    for r in PRIME_LIKE.relations:
        src, dst = rng.choice(ids[r.src], edges_per_relation), rng.choice(ids[r.dst], edges_per_relation)
        rows += [(int(a), r.name, int(b)) for a, b in zip(src, dst)]
    edges = pd.DataFrame(rows, columns=["src", "rel", "dst"])
    return SKB(PRIME_LIKE, nodes, edges, pd.DataFrame({"qid": [], "split": [], "query": [], "answer_ids": []}))


def random_plan(schema: Schema, rng: np.random.Generator, max_anchors: int = 3, max_depth: int = 3) -> Plan:
    """A valid plan: branches grown backwards from ``target`` or from a variable of an earlier branch."""
    target_type = str(rng.choice(list(schema.node_types)))
    types = {TARGET: target_type}
    hops, anchors, joinable = [], [], [TARGET]
    for a in range(int(rng.integers(1, max_anchors + 1))):
        cur = joinable[int(rng.integers(len(joinable)))]
        depth = int(rng.integers(1, max_depth + 1))
        for d in range(depth):
            options = [(r, t) for r in schema.relation_names for t in schema.neighbour_types(r, types[cur])]
            rel, prev_type = options[int(rng.integers(len(options)))]
            var = f"a{a}" if d == depth - 1 else f"x{a}_{d}"
            types[var] = prev_type
            # a hop within one type is directed two times in three
            direction = [None, "out", "in"][int(rng.integers(3))] if prev_type == types[cur] else None
            hops.append(Hop(**{"from": var, "rel": rel, "to": cur, "to_type": types[cur], "dir": direction}))
            if d < depth - 1:
                joinable.append(var)
            cur = var
        anchors.append(Anchor(var=f"a{a}", type=types[f"a{a}"], text=f"anchor {a}"))
    return Plan(target=Target(type=target_type), anchors=tuple(anchors), hops=tuple(reversed(hops)))


def random_bindings(skb: SKB, plan: Plan, rng: np.random.Generator, k: int = 4) -> dict[str, list[tuple[int, float]]]:
    out = {}
    for a in plan.anchors:
        ids = rng.choice(skb.ids_of_type(a.type), size=k, replace=False)
        out[a.var] = [(int(i), float(s)) for i, s in zip(ids, rng.uniform(0.1, 1.0, k))]
    return out


def adjacency(skb: SKB) -> dict[str | tuple[str, str], sp.csr_matrix]:
    n, out = skb.num_nodes, {}
    for rel, group in skb.edges.groupby("rel"):
        m = sp.coo_matrix((np.ones(len(group)), (group["src"], group["dst"])), shape=(n, n))
        out[rel] = ((m + m.T) > 0).tocsr()
        out[rel, "out"], out[rel, "in"] = (m > 0).tocsr(), (m.T > 0).tocsr()
    return out


def oracle(
    skb: SKB,
    adj: dict[str | tuple[str, str], sp.csr_matrix],
    plan: Plan,
    bindings: dict[str, list[tuple[int, float]]],
    max_frontier: int | None = None,
) -> dict[int, float]:
    """Expected {target node id: anchor score} of a resolved plan (every hop has ``to_type``).

    ``max_frontier`` applies the compiler's cap: each variable of the main chain (first anchor -> target) keeps
    its ``max_frontier`` best nodes (score descending, then id), scored with its side branches.
    """
    n, types = skb.num_nodes, skb.nodes["type"].to_numpy()
    main, var = {plan.anchors[0].var}, plan.anchors[0].var
    while var != TARGET:
        var = next(h.to for h in plan.hops if h.from_ == var)
        main.add(var)

    def cap(vec: np.ndarray) -> np.ndarray:
        live = np.flatnonzero(np.isfinite(vec))
        drop = live[np.lexsort((live, -vec[live]))][max_frontier:]
        vec[drop] = -np.inf
        return vec

    def value(var: str) -> np.ndarray:
        vec = np.full(n, -np.inf)
        anchor = next((a for a in plan.anchors if a.var == var), None)
        if anchor is not None:
            for i, s in bindings[var]:
                vec[i] = s
            return vec
        vec[:] = 0.0
        of_type = types == (plan.target.type if var == TARGET else next(h.to_type for h in plan.hops if h.to == var))
        for hop in (h for h in plan.hops if h.to == var):
            key = hop.rel if hop.dir is None else (hop.rel, hop.dir)
            part = propagate(value(hop.from_), adj.get(key, sp.csr_matrix((n, n))))
            part[~of_type] = -np.inf
            vec += part
        return cap(vec) if max_frontier is not None and var in main else vec

    def propagate(vec: np.ndarray, a: sp.csr_matrix) -> np.ndarray:
        out = np.full(n, -np.inf)
        live = np.flatnonzero(np.isfinite(vec))
        sub = a[live].tocoo()
        np.maximum.at(out, sub.col, vec[live][sub.row])
        return out

    result = value(TARGET)
    return {int(i): float(result[i]) for i in np.flatnonzero(np.isfinite(result))}

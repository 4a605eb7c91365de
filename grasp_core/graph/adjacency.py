"""The graph's edges as in-process arrays: one undirected adjacency list per relation (the executor's traversal).

Built from :func:`~grasp_core.graph.store.edge_groups`, the same edges both graph stores load (an edge whose
endpoint types match no declared pair of its relation is in neither). Each edge is listed under both of its
ends, so walking a node's list is an undirected hop. A relation with edges between nodes of one type also gets
two directed lists of those edges, ``(rel, "out")`` (each node's destinations: for ``parent-child``, a term's
children) and ``(rel, "in")`` (its sources), for the hops that take a ``dir``. Node ids are row numbers (``SKB.nodes.node_id`` is
``0..n-1``). The lists are laid out by node type, then node id, so the lists of one type's nodes are one
contiguous block: a hop into a type reads only that block. The arrays are built once per executor, before the
first question; their size and build time at Prime's scale are in ``benchmarks/results/plan_execution.json``
(``adjacency_mib``, ``adjacency_build_s``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from grasp_core.graph.store import edge_groups
from grasp_core.skb.format import SKB


@dataclass(frozen=True)
class Relation:
    start: np.ndarray  # int64 [n]: node i's neighbours are nbr[start[i] : start[i] + degree[i]]
    degree: np.ndarray  # int64 [n]
    nbr: np.ndarray  # int32 neighbour ids, node by node in (node type, node id) order
    rows: dict[str, np.ndarray]  # node type -> its nodes with a neighbour, ascending: their lists, back to back

    def block(self, node_type: str) -> tuple[np.ndarray, int, int]:
        """(the type's nodes with neighbours, first and end position of their lists in ``nbr``)."""
        rows = self.rows.get(node_type, np.zeros(0, np.int64))
        if not len(rows):
            return rows, 0, 0
        return rows, int(self.start[rows[0]]), int(self.start[rows[-1]] + self.degree[rows[-1]])

    @property
    def nbytes(self) -> int:
        return self.start.nbytes + self.degree.nbytes + self.nbr.nbytes + sum(r.nbytes for r in self.rows.values())


@dataclass(frozen=True)
class Adjacency:
    num_nodes: int
    relations: dict[str, Relation]
    of_type: dict[str, np.ndarray]  # node type -> bool [n]
    # (relation, "out" | "in") -> the relation's same-type edges from each node to its destinations / sources
    directed: dict[tuple[str, str], Relation] = field(default_factory=dict)

    def relation(self, rel: str, direction: str | None = None) -> Relation | None:
        """The undirected lists of ``rel`` (``direction`` None), or its same-type edges towards destinations
        (``"out"``) or sources (``"in"``); None when the graph has no such edge."""
        return self.relations.get(rel) if direction is None else self.directed.get((rel, direction))

    @classmethod
    def build(cls, skb: SKB) -> Adjacency:
        n = skb.num_nodes
        codes, names = pd.factorize(skb.nodes["type"].to_numpy())
        code = {str(t): i for i, t in enumerate(names)}
        of_type = {t: codes == code.get(t, -2) for t in [*skb.schema.node_types, *code]}  # a type may have no nodes
        by_type = np.argsort(codes, kind="stable")  # node ids in (type, id) order
        rank = np.empty(n, np.int64)
        rank[by_type] = np.arange(n)
        ends: dict[str, list[np.ndarray]] = {}
        same_type: dict[str, list[np.ndarray]] = {}
        for rel, a, b, src, dst in edge_groups(skb):
            ends.setdefault(rel, []).append(np.stack([np.concatenate([src, dst]), np.concatenate([dst, src])]))
            if a == b:
                same_type.setdefault(rel, []).append(np.stack([src, dst]))

        def lists(end: np.ndarray, other: np.ndarray) -> Relation:
            degree = np.bincount(end, minlength=n)
            start = np.empty(n, np.int64)
            start[by_type] = np.concatenate([[0], np.cumsum(degree[by_type])[:-1]])
            nbr = other[np.argsort(rank[end], kind="stable")].astype(np.int32)
            rows = {t: np.flatnonzero(mask & (degree > 0)) for t, mask in of_type.items()}
            return Relation(start, degree, nbr, rows)

        relations = {rel: lists(*np.concatenate(parts, axis=1)) for rel, parts in ends.items()}
        directed = {}
        for rel, parts in same_type.items():
            src, dst = np.concatenate(parts, axis=1)
            directed[rel, "out"], directed[rel, "in"] = lists(src, dst), lists(dst, src)
        return cls(n, relations, of_type, directed)

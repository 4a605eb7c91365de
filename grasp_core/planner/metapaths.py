"""Metapaths over a schema: the (relation, type) sequences that lead from one node type to another.

Edges are undirected, so a relation declared ``src → dst`` can be walked both ways. Used by the
programmatic teacher to enumerate candidate plans and by the query generator's templates.
"""

from __future__ import annotations

from collections import deque

from grasp_core.skb.schema import Schema

Metapath = tuple[tuple[str, str], ...]  # ((relation, type reached), ...)


def type_steps(schema: Schema) -> dict[str, list[tuple[str, str]]]:
    """For each node type, the (relation, neighbour type) steps available from it."""
    steps: dict[str, set[tuple[str, str]]] = {t: set() for t in schema.node_types}
    for r in schema.relations:
        steps[r.src].add((r.name, r.dst))
        steps[r.dst].add((r.name, r.src))
    return {t: sorted(s) for t, s in steps.items()}


def metapaths(schema: Schema, start: str, end: str, max_hops: int = 3, limit: int = 8) -> list[Metapath]:
    """Up to ``limit`` metapaths from ``start`` to ``end`` with 1..``max_hops`` hops, shortest first.

    A path never walks straight back over the relation it just took (``a -r- b -r- a``): such a path only
    widens the candidate set around the anchor and is never what a query means.
    """
    steps = type_steps(schema)
    found: list[Metapath] = []
    queue: deque[tuple[str, Metapath]] = deque([(start, ())])
    while queue and len(found) < limit:
        node_type, path = queue.popleft()
        if len(path) == max_hops:
            continue
        for rel, nxt in steps.get(node_type, []):
            came_from = path[-2][1] if len(path) >= 2 else start
            if path and rel == path[-1][0] and nxt == came_from:
                continue
            new = path + ((rel, nxt),)
            if nxt == end:
                found.append(new)
                if len(found) == limit:
                    break
            queue.append((nxt, new))
    return found

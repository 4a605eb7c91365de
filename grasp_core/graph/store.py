"""The graph store interface (``docs/design.md``, "Graph store"): one protocol, two real backends.

- ``ladybug`` (default): LadybugDB, embedded and in-process (the maintained continuation of Kùzu);
  see :mod:`grasp_core.graph.ladybug_store`.
- ``neo4j``: a Neo4j server over Bolt; see :mod:`grasp_core.graph.neo4j_store`.

Both hold one node label/table per node type (``id`` = node_id; Neo4j also ``name``, for browsing — the
embedded store leaves it out for speed, see :mod:`grasp_core.graph.ladybug_store`) and one relationship
type/table per relation. SKB type and relation names ("gene/protein", "off-label use") are not identifiers, so
:func:`table_names` maps them — in this one place, used by both loaders and the Cypher compiler — to
``N_<slug>`` / ``R_<slug>`` (non-alphanumerics become ``_``; a slug that collides gets ``_<k>`` appended,
in schema order, so the mapping is deterministic and injective). :func:`grasp_core.graph.open.open_graph_store` opens
the configured backend.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Literal, NamedTuple, Protocol

import numpy as np
import pandas as pd

from grasp_core.skb.format import SKB
from grasp_core.skb.schema import Schema

Dialect = Literal["ladybug", "neo4j"]


class GraphStore(Protocol):
    dialect: Dialect

    def load(self, skb: SKB) -> None:
        """Replace the store's content with ``skb``'s nodes and edges."""

    def run(self, cypher: str, params: dict[str, Any] | None = None) -> list[tuple]:
        """Run one Cypher query; every value from outside the schema must come in ``params``."""

    def counts(self) -> dict[str, dict[str, int]]:
        """{"nodes": {node type: n}, "edges": {relation: n}} with the SKB's own names."""

    def close(self) -> None: ...


class TableNames(NamedTuple):
    node: dict[str, str]  # node type -> label / node table
    rel: dict[str, str]  # relation -> relationship type / rel table


def table_names(schema: Schema) -> TableNames:
    """The one mapping from SKB type/relation names to safe Cypher identifiers (see the module doc)."""
    return TableNames(_safe_names("N_", list(schema.node_types)), _safe_names("R_", schema.relation_names))


def _safe_names(prefix: str, names: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    used: set[str] = set()
    for name in names:
        base = prefix + re.sub(r"[^A-Za-z0-9]", "_", name)
        ident, k = base, 1
        while ident in used:
            ident, k = f"{base}_{k}", k + 1
        used.add(ident)
        out[name] = ident
    return out


def quote(identifier: str) -> str:
    """Backtick-quote an identifier produced by :func:`table_names` (both dialects accept this)."""
    if not re.fullmatch(r"[A-Za-z0-9_]+", identifier):
        raise ValueError(f"{identifier!r} is not a generated identifier")
    return f"`{identifier}`"


def relation_pairs(schema: Schema) -> dict[str, list[tuple[str, str]]]:
    """relation -> its declared (src type, dst type) pairs, in schema order, without duplicates."""
    out: dict[str, list[tuple[str, str]]] = {}
    for r in schema.relations:
        pairs = out.setdefault(r.name, [])
        if (r.src, r.dst) not in pairs:
            pairs.append((r.src, r.dst))
    return out


def edge_groups(skb: SKB) -> Iterator[tuple[str, str, str, np.ndarray, np.ndarray]]:
    """(relation, src type, dst type, src ids, dst ids) per declared type pair, in schema order.

    An edge whose endpoint types match a declared pair only in reverse is given reversed: between two types the
    types fix a hop's direction, so stores can keep one table per declared pair. An edge between two nodes of one
    type keeps its stored direction (a hop with ``dir`` follows it, :mod:`grasp_core.plan.model`).
    """
    type_codes, type_names = pd.factorize(skb.nodes["type"])
    code = {t: i for i, t in enumerate(type_names)}
    src, dst = skb.edges["src"].to_numpy(np.int64), skb.edges["dst"].to_numpy(np.int64)
    src_t, dst_t = type_codes[src], type_codes[dst]
    rel_codes, rel_names = pd.factorize(skb.edges["rel"])
    rel_code = {r: i for i, r in enumerate(rel_names)}
    for rel, pairs in relation_pairs(skb.schema).items():
        if rel not in rel_code:
            continue
        of_rel = np.flatnonzero(rel_codes == rel_code[rel])
        s_t, d_t = src_t[of_rel], dst_t[of_rel]
        for a, b in pairs:
            if a not in code or b not in code:
                continue
            forward = (s_t == code[a]) & (d_t == code[b])
            backward = (s_t == code[b]) & (d_t == code[a]) & ~forward
            if forward.any() or backward.any():
                f, r = of_rel[forward], of_rel[backward]
                yield rel, a, b, np.concatenate([src[f], dst[r]]), np.concatenate([dst[f], src[r]])

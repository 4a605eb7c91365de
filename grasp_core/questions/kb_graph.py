"""The knowledge base as the question synthesizer walks it: one ``scipy.sparse`` CSR adjacency per relation and
direction, node types, text fields, and the properties (:mod:`grasp_core.questions.properties`) each node has."""

from __future__ import annotations

from functools import cached_property

import numpy as np
import pandas as pd
import scipy.sparse as sp

from grasp_core.questions.properties import (
    NON_PROPERTY_FIELDS,
    TERM_SEPARATOR,
    Property,
    PropertyRules,
    is_meaningful,
    is_name_phrase,
    normalized,
    noun_phrases,
    tokens,
)
from grasp_core.skb.format import SKB


class Graph:
    """CSR adjacencies per relation (symmetric, along and against the stored direction), types and fields."""

    def __init__(self, skb: SKB):
        self.skb = skb
        n = skb.num_nodes
        codes, names = pd.factorize(skb.nodes["type"])
        self.type_code = codes
        self.type_index = {t: i for i, t in enumerate(names)}
        src, dst = skb.edges["src"].to_numpy(np.int64), skb.edges["dst"].to_numpy(np.int64)
        rel_codes, rel_names = pd.factorize(skb.edges["rel"])
        self.adj: dict[str, sp.csr_matrix] = {}
        for i, rel in enumerate(rel_names):
            m = rel_codes == i
            a, b = src[m], dst[m]
            down = sp.csr_matrix((np.ones(len(a), dtype=np.int8), (a, b)), shape=(n, n))
            self.adj[f"{rel}|down"] = down
            self.adj[f"{rel}|up"] = down.T.tocsr()
            self.adj[rel] = (down + down.T).tocsr()
        self.types = skb.nodes["type"].to_numpy(dtype=object)
        self.text_columns = {c: skb.nodes[c].to_numpy(dtype=object) for c in ("name", *skb.schema.text_fields)}
        self._normalized: dict[tuple[int, str], str] = {}

    def neighbours(self, rel: str, nodes: np.ndarray, node_type: str) -> np.ndarray:
        m = self.adj[rel]
        if len(nodes) == 1:
            i = int(nodes[0])
            out = m.indices[m.indptr[i] : m.indptr[i + 1]]
            return np.unique(out[self.type_code[out] == self.type_index.get(node_type, -1)])
        out = m[nodes].indices
        out = out[self.type_code[out] == self.type_index.get(node_type, -1)]
        if len(out) < 4096:
            return np.unique(out)
        seen = np.zeros(len(self.type_code), dtype=bool)  # O(N) dedup beats sorting big frontiers
        seen[out] = True
        return np.flatnonzero(seen)

    def degree(self, rel: str, node: int) -> int:
        m = self.adj[rel]
        return int(m.indptr[node + 1] - m.indptr[node])

    def text(self, node: int, name: str) -> str:
        value = self.text_columns[name][node]
        return value if isinstance(value, str) else ""

    def fields_of(self, node: int) -> dict[str, str]:
        """The node's non-empty text fields, in schema order."""
        return {f: v for f in self.skb.schema.node_types[self.types[node]] if (v := self.text(node, f))}

    def satisfying(self, prop: Property, candidates: np.ndarray) -> np.ndarray:
        """The ``candidates`` whose ``prop.field`` holds the phrase (contiguous tokens within one clause)."""
        needle = " " + " ".join(tokens(prop.phrase)) + " "
        keep = []
        for node in candidates.tolist():
            key = (node, prop.field)
            if key not in self._normalized:
                self._normalized[key] = normalized(self.text(node, prop.field))
            keep.append(needle in self._normalized[key])
        return candidates[np.asarray(keep, dtype=bool)] if keep else candidates

    def properties(self, node: int, rules: PropertyRules) -> list[Property]:
        """Every property of ``node``: terms of its term fields, noun phrases of its descriptive fields."""
        out = []
        name = self.text(node, "name")
        if self.types[node] in rules.name_types:  # a part of the name ("muscular dystrophy"), never all of it
            out += [Property("name", p) for p in noun_phrases(name) if is_name_phrase(p, name)]
        for f, text in self.fields_of(node).items():
            if f in rules.skip_fields:
                continue
            if f in rules.term_fields:
                out += [Property(f, t) for t in dict.fromkeys(TERM_SEPARATOR.split(text)) if is_meaningful(t)]
            else:
                out += [Property(f, p) for p in noun_phrases(text)]
        return [p for p in out if tokens(p.phrase) != tokens(name)]  # a property never gives the name away

    def describable(self, node_type: str, skip_fields: frozenset[str] = NON_PROPERTY_FIELDS) -> bool:
        """True when nodes of this type have a text field a property can be cut from."""
        return any(f not in skip_fields for f in self.skb.schema.node_types.get(node_type, ()))

    @cached_property
    def ids_by_type(self) -> dict[str, np.ndarray]:
        return {t: np.flatnonzero(self.type_code == i) for t, i in self.type_index.items()}

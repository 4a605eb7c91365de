"""The text a reranker reads for one candidate node (paper §3.3, ``docs/design.md`` Reranker).

A candidate document is::

    <type>: <name>
    <field>: <text>                      one line per non-empty text field, each cut at 512 tokens
    <relation>: <nbr>; <nbr>; ...        one line per relation type (schema order: sorted names),
                                         up to 10 neighbours, most query-similar first

Neighbours are ordered by the cosine between the query vector and their document vectors (the node
document embeddings of ``grasp_core.embed``; ties: smaller node id first). Edges are undirected, so a
neighbour is listed whichever end of the edge the candidate is on; a relation that links the candidate
to several node types lists them in one line.

Budget. The whole reranker input (instruction + query + document) may hold ``max_input_tokens``; the
caller passes the tokens its prompt spends outside the document (``prompt_tokens``). An input over
budget first drops neighbours from the end of the last relation line backwards (an emptied line goes
away), then shortens the text fields longest first: the fields are cut to a common cap, the largest cap
that fits ("water filling"), so the longest field loses the most and short fields stay whole. Only if the
type/name line alone is over budget is the document itself cut. Tokens are counted with the reranker's own
tokenizer (a fast tokenizer: cutting uses its character offsets, so a cut text is a prefix of the
original). Counting sums the tokens of the parts and then checks the exact count of the joined text,
trimming further if tokenization across joins differs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from grasp_core.errors import GraspError
from grasp_core.rerank.config import DocumentConfig
from grasp_core.skb.format import SKB

NEIGHBOUR_SEP = "; "


@dataclass
class _Parts:
    """A document under construction: its head line, its fields and its relation lines."""

    head: str
    fields: list[tuple[str, str]]  # (field name, text)
    relations: list[tuple[str, list[str]]]  # (relation name, neighbour names best first)

    def text(self) -> str:
        lines = [self.head]
        lines += [f"{name}: {text}" for name, text in self.fields if text]
        lines += [f"{rel}: {NEIGHBOUR_SEP.join(names)}" for rel, names in self.relations if names]
        return "\n".join(lines)


class CandidateDocumentBuilder:
    """Serializes candidate nodes for the reranker; ``build`` does a query's whole candidate list at once."""

    def __init__(self, skb: SKB, node_vectors: np.ndarray, cfg: DocumentConfig = DocumentConfig(), encoder=None):
        """``node_vectors``: the node document vectors f32 [N, d] (L2-normalized). ``encoder`` (an
        ``grasp_core.embed.encoder.Encoder``, the one that made ``node_vectors``) is needed only by
        :meth:`embed_queries`."""
        if len(node_vectors) != skb.num_nodes:
            raise GraspError(f"node_vectors has {len(node_vectors)} rows but the SKB has {skb.num_nodes} nodes")
        self.skb, self.cfg, self.encoder = skb, cfg, encoder
        self.node_vectors = np.asarray(node_vectors, np.float32)
        self._names = skb.nodes["name"].astype(str).to_numpy()
        self._relations = skb.schema.relation_names
        self._index_edges()

    def _index_edges(self) -> None:
        """CSR adjacency over undirected edges, sorted by (node, relation, neighbour), duplicates removed."""
        rel_code = {r: i for i, r in enumerate(self._relations)}
        edges = self.skb.edges
        src, dst = edges["src"].to_numpy(np.int64), edges["dst"].to_numpy(np.int64)
        rel = np.array([rel_code[r] for r in edges["rel"]], np.int64)
        triples = np.unique(
            np.stack([np.concatenate([src, dst]), np.concatenate([rel, rel]), np.concatenate([dst, src])], axis=1),
            axis=0,
        )
        self._adj_rel, self._adj_nbr = triples[:, 1], triples[:, 2]
        self._offsets = np.searchsorted(triples[:, 0], np.arange(self.skb.num_nodes + 1))

    def embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        """Query vectors f32 [q, d] from the encoder that made the node vectors."""
        if self.encoder is None:
            raise GraspError("CandidateDocumentBuilder was made without an encoder; pass encoder= to embed queries")
        return self.encoder.encode(list(queries), max_tokens=self.cfg.query_max_tokens)

    def build(self, query_vec: np.ndarray, node_ids: Sequence[int], tokenizer, prompt_tokens: int = 0) -> list[str]:
        """Documents of ``node_ids`` for one query, each fitting ``max_input_tokens - prompt_tokens``."""
        budget = self.cfg.max_input_tokens - prompt_tokens
        if budget <= 0:
            raise GraspError(
                f"the prompt alone takes {prompt_tokens} tokens, over max_input_tokens={self.cfg.max_input_tokens}"
            )
        query_vec = np.asarray(query_vec, np.float32)
        return [self._fit(self._parts(query_vec, int(i), tokenizer), tokenizer, budget) for i in node_ids]

    def _parts(self, query_vec: np.ndarray, node_id: int, tokenizer) -> _Parts:
        row = self.skb.nodes.iloc[node_id]
        fields = [
            (f, _cut(text, self.cfg.max_field_tokens, tokenizer))
            for f, text in self.skb.text_fields_of(node_id).items()
        ]
        lo, hi = self._offsets[node_id], self._offsets[node_id + 1]
        rels, nbrs = self._adj_rel[lo:hi], self._adj_nbr[lo:hi]
        sims = self.node_vectors[nbrs] @ query_vec if hi > lo else np.zeros(0, np.float32)
        relations = []
        for code in np.unique(rels):
            mask = rels == code
            ids, s = nbrs[mask], sims[mask]
            best = ids[np.lexsort((ids, -s))][: self.cfg.max_neighbours]
            relations.append((self._relations[code], [str(self._names[n]) for n in best]))
        return _Parts(f"{row['type']}: {row['name']}", fields, relations)

    def _fit(self, parts: _Parts, tokenizer, budget: int) -> str:
        text = parts.text()
        over = _count(text, tokenizer) - budget
        if over <= 0:
            return text
        # 1. drop neighbours from the last relation line backwards
        while over > 0 and any(names for _, names in parts.relations):
            rel_i = max(i for i, (_, names) in enumerate(parts.relations) if names)
            names = parts.relations[rel_i][1]
            cost = _count(names[-1], tokenizer) + (
                _count(NEIGHBOUR_SEP, tokenizer)
                if len(names) > 1
                else _count(f"{parts.relations[rel_i][0]}: \n", tokenizer)
            )
            names.pop()
            over -= cost
            if over <= 0:
                over = _count(parts.text(), tokenizer) - budget
        if over <= 0:
            return parts.text()
        # 2. shorten the text fields, longest first (common cap)
        lengths = [_count(t, tokenizer) for _, t in parts.fields]
        while over > 0 and any(lengths):
            cap = _water_fill_cap(lengths, sum(lengths) - over)
            parts.fields = [(f, _cut(t, cap, tokenizer)) for f, t in parts.fields]
            lengths = [_count(t, tokenizer) for _, t in parts.fields]
            over = _count(parts.text(), tokenizer) - budget
        # 3. the type/name line alone is over budget
        return _cut(parts.text(), budget, tokenizer) if over > 0 else parts.text()


def _count(text: str, tokenizer) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def _cut(text: str, max_tokens: int, tokenizer) -> str:
    """The longest prefix of ``text`` holding at most ``max_tokens`` tokens (cut at a token boundary)."""
    if max_tokens <= 0:
        return ""
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    return text if len(offsets) <= max_tokens else text[: offsets[max_tokens - 1][1]].rstrip()


def _water_fill_cap(lengths: list[int], total: int) -> int:
    """Largest cap c with sum(min(l, c)) <= total (0 when even c = 1 is too much); strictly below max(lengths)."""
    lo, hi = 0, max(lengths) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(n, mid) for n in lengths) <= total:
            lo = mid
        else:
            hi = mid - 1
    return lo

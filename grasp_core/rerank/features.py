"""Per-(query, candidate) features of the ``ltr`` reranker (``docs/reranker.md``).

For one query the reranker sees a :class:`RerankInput`: the fused ranking, the text and graph rankings it was
fused from, the plan's target type and anchor bindings, and the entity table's linked anchors. The
:class:`FeatureBuilder` turns the fused top K of a batch of such inputs into one float32 matrix per query
(rows in fused order, columns :attr:`FeatureBuilder.names`), vectorised over the candidates:

* ranks and scores: fused rank and score (and the score over the query's top fused score); text and graph
  rank and score, where a candidate missing from a list gets rank ``rank_sentinel`` and score 0 plus a
  ``missing`` indicator;
* the text branch (mFAR): each (field, scorer) raw score — BM25 per field and the dense cosines of the fields
  that have vectors (the whole document's BM25 and its cosine to the query among them) — and mFAR's total;
* the plan: whether the candidate's type is the plan's target type (and whether there is a plan), the number
  of the plan's anchor bindings adjacent to the candidate (its 1-hop plan paths), the best such binding's
  link cosine, whether the candidate is itself a binding;
* the node: log(1 + degree); the share (and number) of the query's distinct tokens found in its name and in
  its text fields (the BM25 tokenizer: lower case, stopwords out, Snowball stems);
* the entity table: whether the candidate is itself a linked node (and its best link cosine); the best link
  cosine of a linked node adjacent to it, overall and per relation type, and the number of entity rows
  with a linked node adjacent to it;
* the question's wording (``docs/reranker.md``, "Natural questions"): the asked-type model's probability of
  the candidate's type (and whether it is the most probable type); the best cosine of the query vector to the
  candidate's name or any of its aliases; whether the candidate's name or one of its aliases occurs in the
  query (normalized, as the gazetteer matches); each pair only when the builder has an asked-type model,
  respectively name vectors;
* neighbour context, per relation type: log(1 + number of neighbours), and the max and mean cosine between
  the query vector and all the neighbours' document vectors (dot products with the node embeddings already
  built). The relevance text's cosine to the candidate is already inside the graph score, so no other text
  is embedded.

Edges are undirected. A candidate with no neighbours gets 0 for its neighbour and adjacency features; an
empty fused list gives a ``[0, F]`` matrix; a list shorter than K gives that many rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
import torch

from grasp_core.embed.node_embeddings import NodeEmbeddings
from grasp_core.entities.table import EntityTable
from grasp_core.ranking import Ranking
from grasp_core.rerank.asked_type import AskedType
from grasp_core.rerank.config import FeatureConfig
from grasp_core.skb.format import SKB


@dataclass(frozen=True)
class RerankInput:
    """What the reranker knows of one query."""

    query: str
    fused: Ranking
    text: Ranking = field(default_factory=Ranking.empty)
    graph: Ranking = field(default_factory=Ranking.empty)
    target_type: str | None = None  # the executed plan's target type; None when no plan ran
    bindings: tuple[tuple[int, float], ...] = ()  # the plan's anchor bindings: (node id, link cosine)
    links: tuple[tuple[int, int, float], ...] = ()  # entity-table anchor rows' links: (row, node id, cosine)

    @classmethod
    def of(
        cls,
        query: str,
        fused: Ranking,
        text: Ranking | None = None,
        graph: Ranking | None = None,
        trace=None,
        table: EntityTable | None = None,
    ) -> RerankInput:
        """From a plan execution's :class:`~grasp_core.plan.trace.Trace` and the query's entity table."""
        plan = trace.plan if trace is not None else None
        bindings = tuple((b.node_id, b.score) for bs in trace.bindings.values() for b in bs) if trace else ()
        links = tuple(
            (i, link.node_id, link.score)
            for i, row in enumerate(table.rows if table is not None else ())
            if row.role == "anchor"
            for ls in row.links.values()
            for link in ls
        )
        return cls(
            query,
            fused,
            text if text is not None else Ranking.empty(),
            graph if graph is not None else Ranking.empty(),
            plan.target.type if plan is not None else None,
            bindings,
            links,
        )


GATHER_SHARE = 16  # neighbour rows gathered at most per query, as a share of all nodes (1/16), before one product


class FeatureBuilder:
    """Feature matrices of fused top-K lists over one SKB (see the module docstring for the columns).

    ``doc_vectors`` are the L2-normalized node document embeddings; ``text_model`` the trained
    :class:`~grasp_core.text.mfar.MFARRetriever`, which also embeds the queries (one batched encoder call).
    """

    def __init__(
        self,
        skb: SKB,
        doc_vectors: np.ndarray,
        text_model,
        cfg: FeatureConfig = FeatureConfig(),
        names: NodeEmbeddings | None = None,
        asked: AskedType | None = None,
    ):
        self.skb, self.doc, self.text_model, self.cfg = skb, doc_vectors, text_model, cfg
        self.asked, self.name_vectors = asked, names
        self._asked_col = (
            np.asarray([asked.types.index(t) if t in asked.types else -1 for t in skb.nodes["type"]], np.int64)
            if asked is not None
            else None
        )
        self._aliases = _AliasRows(skb, names) if names is not None else None
        n = skb.num_nodes
        self.relations = skb.schema.relation_names
        edges = skb.edges
        self.adjacency: list[sp.csr_matrix] = []
        for rel in self.relations:
            e = edges[edges["rel"] == rel]
            src, dst = e["src"].to_numpy(np.int64), e["dst"].to_numpy(np.int64)
            a = sp.csr_matrix(
                (np.ones(2 * len(e), np.float32), (np.concatenate([src, dst]), np.concatenate([dst, src]))),
                shape=(n, n),
            )
            a.sum_duplicates()
            a.sort_indices()
            self.adjacency.append(a)
        self.log_degree = np.log1p(skb.degrees).astype(np.float32)
        self.types = skb.nodes["type"].to_numpy()
        fields = text_model.fields
        self._attribute_fields = set(skb.schema.text_fields)
        self._members = {}  # lexical field -> bool [N] "node has this field" (BM25L/BM25+ baselines only)
        for f, index in fields.lexical.items():
            if index.nonoccurrence is not None:
                self._members[f] = np.zeros(n, bool)
                self._members[f][index.rows] = True
        self.scorer_names = list(fields.scorer_names)
        self.names = (
            ["fused rank", "fused score", "fused score / top"]
            + ["text rank", "text score", "text missing", "graph rank", "graph score", "graph missing"]
            + ["type is plan target", "no plan", "plan bindings adjacent", "binding adjacent cosine", "is binding"]
            + ["log degree", "name overlap", "name overlap count", "field overlap", "field overlap count"]
            + ["is linked", "linked cosine", "linked adjacent cosine", "linked rows adjacent"]
            + [f"linked adjacent cosine: {r}" for r in self.relations]
            + [
                f"{what}: {r}"
                for r in self.relations
                for what in ("log neighbours", "neighbour max cos", "neighbour mean cos")
            ]
            + [f"mfar {s}" for s in self.scorer_names]
            + ["mfar total"]
            + (list(ASKED_FEATURES) if asked is not None else [])
            + (list(ALIAS_FEATURES) if names is not None else [])
        )

    @property
    def num_features(self) -> int:
        return len(self.names)

    def build(self, inputs: Sequence[RerankInput], K: int) -> list[np.ndarray]:
        """float32 [min(K, len(fused)), F] per input, rows in fused order (queries encoded in one batch)."""
        inputs = list(inputs)
        if not inputs:
            return []
        tokens, vecs = self.text_model.encode_queries([x.query for x in inputs])
        return [self.featurize(x, tok, vec, K) for x, tok, vec in zip(inputs, tokens, vecs)]

    def featurize(self, x: RerankInput, query_tokens: list[str], qvec: np.ndarray, K: int) -> np.ndarray:
        """The feature matrix of one already encoded query (its BM25 tokens and query vector)."""
        ids = np.asarray(x.fused.node_ids[:K], np.int64)
        n = len(ids)
        if n == 0:
            return np.zeros((0, self.num_features), np.float32)
        cols: list[np.ndarray] = []
        fused_scores = np.asarray(x.fused.scores[:n], np.float32)
        top = float(fused_scores[0]) if fused_scores[0] != 0 else 1.0
        cols += [np.arange(1, n + 1, dtype=np.float32), fused_scores, fused_scores / top]
        for ranking in (x.text, x.graph):
            rank, score = self._lookup(ranking, ids)
            cols += [rank, score, (rank == self.cfg.rank_sentinel).astype(np.float32)]
        text_scores, name_hits, field_hits = self._text(query_tokens, qvec, ids)
        graph = self._graph(x, ids, qvec)
        if x.target_type is None:
            cols += [np.zeros(n), np.ones(n)]
        else:
            cols += [self.types[ids] == x.target_type, np.zeros(n)]
        cols += [graph["bindings"], graph["binding cosine"], _member(ids, [b for b, _ in x.bindings])]
        size = max(1, len(set(query_tokens)))
        cols += [self.log_degree[ids], name_hits / size, name_hits, field_hits / size, field_hits]
        link_ids = [node for _, node, _ in x.links]
        own = _best_by_node(link_ids, [score for _, _, score in x.links])
        cols += [_member(ids, own.ids), own.get(ids), graph["linked"], graph["linked rows"]]
        cols += graph["linked per relation"] + graph["neighbours"] + text_scores
        cols += self._natural(x.query, qvec, ids)
        return np.stack(cols, axis=1).astype(np.float32)

    def _natural(self, query: str, qvec: np.ndarray, ids: np.ndarray) -> list[np.ndarray]:
        """:data:`ASKED_FEATURES` (with an asked-type model) and :data:`ALIAS_FEATURES` (with name vectors)."""
        cols: list[np.ndarray] = []
        if self.asked is not None and self._asked_col is not None:
            p = self.asked.proba(qvec, [query])[0]
            col = self._asked_col[ids]
            cols += [np.where(col >= 0, p[np.maximum(col, 0)], 0.0), (col == int(p.argmax())).astype(np.float32)]
        if self._aliases is not None:
            cols += list(self._aliases.match(query, qvec, ids))
        return cols

    def _lookup(self, ranking: Ranking, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rank = np.full(len(ids), self.cfg.rank_sentinel, np.float32)
        score = np.zeros(len(ids), np.float32)
        if len(ranking):
            order = np.argsort(ranking.node_ids, kind="stable")
            pos = np.clip(np.searchsorted(ranking.node_ids, ids, sorter=order), 0, len(order) - 1)
            found = ranking.node_ids[order[pos]] == ids
            rank[found] = order[pos[found]] + 1
            score[found] = ranking.scores[order[pos[found]]]
        return rank, score

    def _graph(self, x: RerankInput, ids: np.ndarray, qvec: np.ndarray) -> dict:
        """Per relation, one gather of the candidates' neighbours answers every graph feature."""
        n = len(ids)
        links = _best_by_node([node for _, node, _ in x.links], [score for _, _, score in x.links])
        row_bits = _or_by_node([node for _, node, _ in x.links], [1 << min(row, 62) for row, _, _ in x.links])
        bindings = _best_by_node([b for b, _ in x.bindings], [s for _, s in x.bindings])
        paths = _sum_by_node([b for b, _ in x.bindings], [1.0] * len(x.bindings))
        out: dict[str, Any] = {"linked per relation": [], "neighbours": []}
        linked, rows = np.zeros(n, np.float32), np.zeros(n, np.int64)
        n_paths, binding_cos = np.zeros(n, np.float32), np.zeros(n, np.float32)
        gathered = [_rows_of(a, ids) for a in self.adjacency]
        nbrs = [a.indices[pos] for a, (_, pos) in zip(self.adjacency, gathered)]
        total = sum(len(x) for x in nbrs)
        # the neighbours' cosines to the query: gathered rows times the query vector, or, when the candidates have
        # many neighbours (hubs), one product with every node's vector (faster than gathering that many rows)
        every = self.doc @ qvec if total * GATHER_SHARE > len(self.doc) else None
        for (lens, _), nb in zip(gathered, nbrs):
            rel_linked = _segment(np.maximum, links.get(nb), lens)
            rows |= _segment(np.bitwise_or, row_bits.get(nb), lens, np.int64)
            binding_cos = np.maximum(binding_cos, _segment(np.maximum, bindings.get(nb), lens))
            n_paths += _segment(np.add, paths.get(nb), lens)
            linked = np.maximum(linked, rel_linked)
            out["linked per relation"].append(rel_linked)
            cos = every[nb] if every is not None else self.doc[nb] @ qvec
            out["neighbours"] += [
                np.log1p(lens),
                _segment(np.maximum, cos, lens),
                _segment(np.add, cos, lens) / np.maximum(lens, 1),
            ]
        out["linked"], out["bindings"], out["binding cosine"] = linked, n_paths, binding_cos
        out["linked rows"] = np.asarray([bin(int(m)).count("1") for m in rows], np.float32)
        return out

    def _text(self, query_tokens: list[str], qvec: np.ndarray, ids: np.ndarray):
        """mFAR's raw score of every (field, scorer) and its total, and the number of distinct query tokens in the
        candidate's name and in any of its text fields; one gather of the candidates' BM25 rows per field."""
        fields = self.text_model.fields
        distinct = list(dict.fromkeys(query_tokens))
        name_hits = np.zeros((len(ids), len(distinct)), bool)
        field_hits = np.zeros((len(ids), len(distinct)), bool)
        raw = []
        for f, kind in fields.scorers:
            if kind != "lexical":
                raw.append(fields.dense[f][ids] @ qvec)
                continue
            index = fields.lexical[f]
            known = [i for i, t in enumerate(distinct) if t in index.vocab]  # distinct query tokens in this field
            vocab_ids = np.asarray([index.vocab[distinct[i]] for i in known], np.int64)
            order = np.argsort(vocab_ids)
            counts = np.asarray([query_tokens.count(distinct[i]) for i in known], np.float32)[order]
            tokens = _ByNode(vocab_ids[order], np.asarray(known, np.int64)[order])
            lens, pos = _rows_of(index.weights, ids)
            found, at = tokens.find(index.weights.indices[pos])
            weight = np.where(found, index.weights.data[pos] * counts[at] if len(counts) else 0.0, 0.0)
            score = _segment(np.add, weight, lens)
            if f in self._members:
                score = score + float(np.dot(counts, index.nonoccurrence[tokens.ids])) * self._members[f][ids]
            raw.append(score)
            if f == "name" or f in self._attribute_fields:
                seg = np.repeat(np.arange(len(ids)), lens)
                target = name_hits if f == "name" else field_hits
                target[seg[found], tokens.values[at[found]]] = True
        raw_matrix = np.stack(raw, axis=1).astype(np.float32)
        with torch.no_grad():
            total = self.text_model.model(
                torch.from_numpy(np.asarray(qvec, np.float32)[None]), torch.from_numpy(raw_matrix[None])
            )[0].numpy()
        return [*raw_matrix.T, total], name_hits.sum(1).astype(np.float32), field_hits.sum(1).astype(np.float32)


ASKED_FEATURES = ("asked type prob", "asked type is candidate type")
ALIAS_FEATURES = ("alias cosine", "alias in query")


class _AliasRows:
    """Each node's name and alias vectors and normalized strings, gathered per candidate list.

    Built lazily: a node's strings are normalized the first time it is a candidate, and the vectors are gathered from
    the name and alias arrays per candidate list (the rows of their concatenation, in its order), so building costs
    neither a pass over every name and alias of the SKB nor a copy of their vectors (a cold ``grasp query`` reads a
    few hundred candidates)."""

    def __init__(self, skb: SKB, names: NodeEmbeddings):
        from grasp_core.skb.format import ALIASES
        from grasp_core.textnorm import normalize

        self._names, self._owned = names.name, names.alias if names.alias is not None else names.name[:0]
        owner = np.arange(len(names.name), dtype=np.int64)
        if len(self._owned):
            assert names.alias_owner is not None
            owner = np.concatenate([owner, names.alias_owner])  # the rows of names.name_vectors()
        order = np.argsort(owner, kind="stable")
        self.rows = order
        self.starts = np.searchsorted(owner[order], np.arange(skb.num_nodes + 1))
        self._node_names = skb.nodes["name"].to_numpy()
        self._node_aliases = skb.nodes[ALIASES].to_numpy() if ALIASES in skb.nodes else None
        self._strings: dict[int, list[str]] = {}
        self._normalize = normalize

    def strings(self, node: int) -> list[str]:
        """`` name `` and each `` alias `` of ``node``, normalized, distinct, padded with a space."""
        out = self._strings.get(node)
        if out is None:
            from grasp_core.skb.format import is_alias_list

            texts = [str(self._node_names[node])]
            aliases = self._node_aliases[node] if self._node_aliases is not None else None
            if is_alias_list(aliases):
                texts += [str(a) for a in aliases]  # type: ignore[union-attr]
            out = self._strings[node] = [f" {s} " for s in dict.fromkeys(map(self._normalize, texts)) if s]
        return out

    def _vectors(self, pos: np.ndarray) -> np.ndarray:
        """Rows ``pos`` of the names' vectors followed by the aliases' (``NodeEmbeddings.name_vectors``)."""
        out = np.empty((len(pos), self._names.shape[1]), self._names.dtype)
        own = pos < len(self._names)
        out[own] = self._names[pos[own]]
        out[~own] = self._owned[pos[~own] - len(self._names)]
        return out

    def match(self, query: str, qvec: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(best name-or-alias cosine to the query vector, 1 if a name or alias occurs in the query) per candidate."""
        lens = (self.starts[ids + 1] - self.starts[ids]).astype(np.int64)
        pos = np.concatenate([self.rows[self.starts[i] : self.starts[i + 1]] for i in ids])
        cosine = _segment(np.maximum, self._vectors(pos) @ qvec, lens)
        text = f" {self._normalize(query)} "
        in_query = np.asarray([any(s in text for s in self.strings(i)) for i in ids.tolist()], np.float32)
        return cosine, in_query


class _ByNode(NamedTuple):
    """A small set of node ids (sorted, distinct) with one value each, searched by binary search."""

    ids: np.ndarray
    values: np.ndarray

    def find(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(found: bool per node, index of each found node's value)."""
        if not len(self.ids):
            return np.zeros(len(nodes), bool), np.zeros(len(nodes), np.int64)
        at = np.clip(np.searchsorted(self.ids, nodes), 0, len(self.ids) - 1)
        return self.ids[at] == nodes, at

    def get(self, nodes: np.ndarray) -> np.ndarray:
        """The value of each node, 0 for a node not in the set."""
        if not len(self.ids):
            return np.zeros(len(nodes), self.values.dtype)
        found, at = self.find(nodes)
        return np.where(found, self.values[at], 0)


def _by_node(nodes, values, ufunc, dtype) -> _ByNode:
    nodes = np.asarray(nodes, np.int64)
    values = np.asarray(values, dtype)
    ids, inverse = np.unique(nodes, return_inverse=True)
    out = np.zeros(len(ids), dtype)
    ufunc.at(out, inverse, values)
    return _ByNode(ids, out)


def _best_by_node(nodes, values) -> _ByNode:
    return _by_node(nodes, values, np.maximum, np.float32)


def _sum_by_node(nodes, values) -> _ByNode:
    return _by_node(nodes, values, np.add, np.float32)


def _or_by_node(nodes, values) -> _ByNode:
    return _by_node(nodes, values, np.bitwise_or, np.int64)


def _member(ids: np.ndarray, nodes) -> np.ndarray:
    return np.isin(ids, np.asarray(nodes, np.int64)).astype(np.float32)


def _rows_of(csr: sp.csr_matrix, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row lengths, positions of the rows' entries in ``csr.indices``/``data``, concatenated in ``ids`` order)."""
    starts = csr.indptr[ids].astype(np.int64)
    lens = csr.indptr[ids + 1].astype(np.int64) - starts
    total = int(lens.sum())
    if total == 0:
        return lens, np.zeros(0, np.int64)
    offsets = np.repeat(np.cumsum(lens) - lens, lens)
    return lens, np.repeat(starts, lens) + (np.arange(total) - offsets)


def _segment(ufunc, values: np.ndarray, lens: np.ndarray, dtype=np.float32) -> np.ndarray:
    """``ufunc`` reduced over each segment of ``values`` (consecutive, lengths ``lens``); 0 for an empty one."""
    out = np.zeros(len(lens), dtype)
    nonempty = lens > 0
    if nonempty.any():
        out[nonempty] = ufunc.reduceat(np.asarray(values, dtype), (np.cumsum(lens) - lens)[nonempty])
    return out

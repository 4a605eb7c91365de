"""Per-(query, candidate) features of the ``ltr`` reranker (``DESIGN.md`` §3, "The cpu reranker").

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
* neighbour context, per relation type: log(1 + number of neighbours), and the max and mean cosine between
  the query vector and the neighbours' document vectors (dot products with the node embeddings already
  built; at most ``max_neighbour_cosines`` neighbours per relation, lowest node ids first). The relevance
  text's cosine to the candidate is already inside the graph score, so no other text is embedded.

Edges are undirected. A candidate with no neighbours gets 0 for its neighbour and adjacency features; an
empty fused list gives a ``[0, F]`` matrix; a list shorter than K gives that many rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from grasp_core.entities.table import EntityTable
from grasp_core.ranking import Ranking
from grasp_core.skb.format import SKB
from grasp_core.text.bm25 import tokenize


@dataclass(frozen=True)
class FeatureConfig:
    max_neighbour_cosines: int = field(
        default=200, metadata={"help": "Neighbours per (candidate, relation) whose cosine to the query is computed."}
    )
    rank_sentinel: int = field(
        default=101, metadata={"help": "Rank given to a candidate missing from the text or graph list (lists: 100)."}
    )


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


class FeatureBuilder:
    """Feature matrices of fused top-K lists over one SKB (see the module docstring for the columns).

    ``doc_vectors`` are the L2-normalized node document embeddings; ``text_model`` the trained
    :class:`~grasp_core.text.mfar.MFARRetriever`, which also embeds the queries (one batched encoder call).
    """

    def __init__(self, skb: SKB, doc_vectors: np.ndarray, text_model, cfg: FeatureConfig = FeatureConfig()):
        self.skb, self.doc, self.text_model, self.cfg = skb, doc_vectors, text_model, cfg
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
        self._names = skb.nodes["name"].astype(str).to_numpy()
        self._fields = skb.schema.text_fields
        self._tokens: dict[int, tuple[frozenset[str], frozenset[str]]] = {}
        self.scorer_names = list(text_model.fields.scorer_names)
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
        cols += self._plan(x, ids)
        cols += [self.log_degree[ids], *self._overlap(query_tokens, ids)]
        cols += self._graph_context(x, ids, qvec)
        cols += self._text_scores(query_tokens, qvec, ids)
        return np.stack(cols, axis=1).astype(np.float32)

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

    def _plan(self, x: RerankInput, ids: np.ndarray) -> list[np.ndarray]:
        n = len(ids)
        if x.target_type is None:
            target, no_plan = np.zeros(n, np.float32), np.ones(n, np.float32)
        else:
            target, no_plan = (self.types[ids] == x.target_type).astype(np.float32), np.zeros(n, np.float32)
        count, best, is_binding = np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros(n, np.float32)
        if x.bindings:
            b_ids = np.asarray([b for b, _ in x.bindings], np.int64)
            b_scores = np.asarray([s for _, s in x.bindings], np.float32)
            adjacent = self._adjacent_to(ids, b_ids)  # [n, bindings] bool, any relation
            count = adjacent.sum(1).astype(np.float32)
            best = np.where(adjacent, b_scores[None, :], 0.0).max(1).astype(np.float32)
            is_binding = np.isin(ids, b_ids).astype(np.float32)
        return [target, no_plan, count, best, is_binding]

    def _adjacent_to(self, ids: np.ndarray, others: np.ndarray) -> np.ndarray:
        """bool [len(ids), len(others)]: is ids[i] a neighbour of others[j] by any relation."""
        out = np.zeros((len(ids), len(others)), bool)
        for a in self.adjacency:
            out |= a[ids][:, others].toarray() > 0
        return out

    def _overlap(self, query_tokens: list[str], ids: np.ndarray) -> list[np.ndarray]:
        q = set(query_tokens)
        missing = [int(i) for i in ids if int(i) not in self._tokens]
        if missing:
            names = tokenize([self._names[i] for i in missing])
            fields = tokenize([self._field_text(i) for i in missing])
            for i, a, b in zip(missing, names, fields):
                self._tokens[i] = (frozenset(a), frozenset(b))
        name_hits = np.asarray([len(q & self._tokens[int(i)][0]) for i in ids], np.float32)
        field_hits = np.asarray([len(q & self._tokens[int(i)][1]) for i in ids], np.float32)
        size = max(1, len(q))
        return [name_hits / size, name_hits, field_hits / size, field_hits]

    def _field_text(self, node_id: int) -> str:
        row = self.skb.nodes.iloc[node_id]
        return " ".join(str(row[f]) for f in self._fields if isinstance(row[f], str))

    def _graph_context(self, x: RerankInput, ids: np.ndarray, qvec: np.ndarray) -> list[np.ndarray]:
        n = len(ids)
        is_linked, linked_cos = np.zeros(n, np.float32), np.zeros(n, np.float32)
        link_score: dict[int, float] = {}
        link_rows: dict[int, int] = {}  # node id -> bit mask of the entity rows linking it
        for row, node, score in x.links:
            link_score[node] = max(link_score.get(node, 0.0), score)
            link_rows[node] = link_rows.get(node, 0) | (1 << min(row, 62))
        if link_score:
            for j, i in enumerate(ids.tolist()):
                if i in link_score:
                    is_linked[j], linked_cos[j] = 1.0, link_score[i]
            l_ids = np.fromiter(link_score, np.int64, len(link_score))
            l_scores = np.fromiter(link_score.values(), np.float32, len(link_score))
            l_rows = np.fromiter(link_rows.values(), np.int64, len(link_rows))
        per_rel_linked, neighbour_cols = [], []
        any_linked = np.zeros(n, np.float32)
        rows_mask = np.zeros(n, np.int64)
        cap = self.cfg.max_neighbour_cosines
        for a in self.adjacency:
            starts, ends = a.indptr[ids], a.indptr[ids + 1]
            lens = (ends - starts).astype(np.int64)
            rel_best = np.zeros(n, np.float32)
            if link_score:
                adjacent = a[ids][:, l_ids].toarray() > 0  # [n, links]
                rel_best = np.where(adjacent, l_scores[None, :], 0.0).max(1).astype(np.float32)
                rows_mask |= np.bitwise_or.reduce(np.where(adjacent, l_rows[None, :], 0), axis=1)
            any_linked = np.maximum(any_linked, rel_best)
            per_rel_linked.append(rel_best)
            kept = np.minimum(lens, cap)
            nbrs = a.indices[_gather_positions(starts, kept)]
            cos = self.doc[nbrs] @ qvec if len(nbrs) else np.zeros(0, np.float32)
            nb_max, nb_mean = _segment_max_mean(cos, kept)
            neighbour_cols += [np.log1p(lens).astype(np.float32), nb_max, nb_mean]
        rows_adjacent = np.asarray([bin(int(m)).count("1") for m in rows_mask], np.float32)
        return [is_linked, linked_cos, any_linked, rows_adjacent, *per_rel_linked, *neighbour_cols]

    def _text_scores(self, query_tokens: list[str], qvec: np.ndarray, ids: np.ndarray) -> list[np.ndarray]:
        raw, total = self.text_model.candidate_scores(query_tokens, qvec, ids)
        return [*raw.T.astype(np.float32), total.astype(np.float32)]


def _gather_positions(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Positions ``starts[i] .. starts[i] + lens[i] - 1`` of every segment, concatenated."""
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    offsets = np.repeat(np.cumsum(lens) - lens, lens)
    return np.repeat(starts, lens) + (np.arange(total) - offsets)


def _segment_max_mean(values: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per segment of ``values`` (lengths ``lens``): max and mean, 0 for an empty segment."""
    n = len(lens)
    mx, mean = np.zeros(n, np.float32), np.zeros(n, np.float32)
    nonempty = lens > 0
    if nonempty.any():
        starts = (np.cumsum(lens) - lens)[nonempty]
        mx[nonempty] = np.maximum.reduceat(values, starts)
        mean[nonempty] = np.add.reduceat(values, starts) / lens[nonempty]
    return mx, mean

"""Reranked inference (paper §3.3): score the fused top K, then fuse reranker rank and fused rank by RRF.

``s(d) = w / (k + r_rerank(d)) + 1 / (k + r_fused(d))`` with ranks from 1: ``w`` weights the reranker's list
against the fused list (weight 1); ``w → ∞`` is the reranker's order alone, ``w = 0`` the fused order.
Candidates below the fused top K keep their fused order under the reranked block (they have no reranker
term, and ``1/(k+r) < (w+1)/(k+K)`` for every ``r > K``), so the output ranks the whole fused list and
recall beyond K is unchanged. ``(w, k)`` is picked on validation by :func:`select_rrf_params`; the grid is
:class:`RerankConfig`.

Per-query seconds are the query's document building and scoring plus its share of the batched query
embedding (neighbour ordering needs the query vector).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from grasp_core.ranking import Ranking, rrf
from grasp_core.rerank.config import RerankConfig
from grasp_core.rerank.documents import CandidateDocumentBuilder
from grasp_core.truncation import Cut, reranker_cut


class Reranked(NamedTuple):
    ranking: Ranking  # the whole fused list, top K reordered
    scores: np.ndarray  # f32[min(K, len(fused))]: reranker scores of fused.node_ids[:K], in fused order
    seconds: float
    contributions: Sequence[list[tuple[str, float]]] | None = None  # ltr with explain: top features per candidate


class ValItem(NamedTuple):
    fused: Ranking
    scores: np.ndarray  # reranker scores of fused.node_ids[:len(scores)]
    answers: Sequence[int]


def fuse_reranked(fused: Ranking, scores: np.ndarray, w: float, k: float) -> Ranking:
    """RRF of the reranker's order of the fused top ``len(scores)`` (weight ``w``) and the fused list (weight 1).

    Candidates the reranker scores equally keep their fused order. ``w = inf`` is the limit: the reranker's
    order of the top block, then the rest of the fused list."""
    order = np.argsort(-np.asarray(scores, np.float32), kind="stable")
    reranked = Ranking(fused.node_ids[: len(scores)][order], np.asarray(scores, np.float32)[order])
    if math.isinf(w):
        rest = fused.node_ids[len(scores) :]
        n = len(reranked) + len(rest)
        return Ranking(np.concatenate([reranked.node_ids, rest]), np.arange(n, 0, -1, dtype=np.float32) / max(1, n))
    return rrf([reranked, fused], weights=[w, 1.0], k=k)


def rerank_batch(
    fused: Sequence[Ranking],
    queries: Sequence[str],
    scorer,
    builder: CandidateDocumentBuilder,
    K: int = 50,
    w: float = 1.0,
    k: float = 60.0,
    cache: dict[tuple[str, int], float] | None = None,
) -> list[Reranked]:
    """Rerank several queries (their query vectors are embedded in one batch).

    ``cache`` maps (query, node id) to a reranker score of this scorer: pairs found there are not scored again
    and new scores are added to it (a pair's document and score depend on the query and the node only, so
    rankings of one query that share candidates, e.g. text-only and fused, share the work).
    """
    t0 = time.perf_counter()
    query_vecs = builder.embed_queries(queries)
    shared = (time.perf_counter() - t0) / max(1, len(queries))
    out = []
    for ranking, query, vec in zip(fused, queries, query_vecs):
        t0 = time.perf_counter()
        ids = [int(i) for i in ranking.node_ids[:K]]
        todo = ids if cache is None else [i for i in ids if (query, i) not in cache]
        docs = builder.build(vec, todo, scorer.tokenizer, scorer.prompt_tokens(query)) if todo else []
        scores = scorer.score(query, docs).astype(np.float32)
        if cache is not None:
            cache.update(((query, i), float(v)) for i, v in zip(todo, scores))
            scores = np.asarray([cache[(query, i)] for i in ids], np.float32)
        out.append(Reranked(fuse_reranked(ranking, scores, w, k), scores, shared + time.perf_counter() - t0))
    return out


class PairReranker:
    """A pointwise (query, document) scorer (cross-encoder or causal LM) with its document builder and the
    ``(w, k)`` picked on validation, behind the interface the ``ltr`` reranker shares (only the query and the
    fused list of each input are read)."""

    def __init__(self, scorer, builder: CandidateDocumentBuilder, w: float = 1.0, k: float = 60.0):
        self.scorer, self.builder, self.w, self.k = scorer, builder, w, k

    def read(self, query: str) -> Cut:
        """The query as the scorer reads it beside a candidate document (:func:`~grasp_core.truncation.reranker_cut`)."""
        return reranker_cut(self.scorer, query, self.builder.cfg.max_input_tokens)

    def rerank(
        self, inputs, K: int, w: float | None = None, k: float | None = None, explain=False, cache=None
    ) -> list[Reranked]:
        w, k = self.w if w is None else w, self.k if k is None else k
        return rerank_batch(
            [x.fused for x in inputs], [x.query for x in inputs], self.scorer, self.builder, K, w, k, cache
        )


def rerank(
    fused: Ranking, query: str, scorer, builder: CandidateDocumentBuilder, K: int = 50, w: float = 1.0, k: float = 60.0
) -> Reranked:
    """Rerank one query's fused ranking: (ranking, per-candidate reranker scores, seconds)."""
    return rerank_batch([fused], [query], scorer, builder, K, w, k)[0]


def _hit1_mrr(rankings: Sequence[Ranking], answers: Sequence[Sequence[int]]) -> tuple[float, float]:
    """Hit@1 and MRR in percent; a gold answer absent from the list counts as a miss (reciprocal rank 0)."""
    ranks = [r.rank_of(a) for r, a in zip(rankings, answers)]
    hit1 = np.mean([rank == 1 for rank in ranks]) if ranks else 0.0
    mrr = np.mean([1.0 / rank if rank else 0.0 for rank in ranks]) if ranks else 0.0
    return 100.0 * float(hit1), 100.0 * float(mrr)


def select_rrf_params(
    val_items: Sequence[ValItem],
    grid_w: Sequence[float] = RerankConfig.grid_w,
    grid_k: Sequence[float] = RerankConfig.grid_k,
) -> tuple[float, float, pd.DataFrame]:
    """Pick (w, k) maximizing validation Hit@1 (ties: higher MRR, then the earlier grid point).

    Returns ``(w, k, table)``; ``table`` has one row per grid point: w, k, hit@1, mrr (percent).
    Reranker scores are computed once (``ValItem.scores``); the grid only reuses them.
    """
    rows = []
    answers = [item.answers for item in val_items]
    for w in grid_w:
        for k in grid_k:
            fused = [fuse_reranked(item.fused, item.scores, w, k) for item in val_items]
            hit1, mrr = _hit1_mrr(fused, answers)
            rows.append({"w": float(w), "k": float(k), "hit@1": hit1, "mrr": mrr})
    table = pd.DataFrame(rows)
    best = max(range(len(rows)), key=lambda i: (rows[i]["hit@1"], rows[i]["mrr"], -i))
    return rows[best]["w"], rows[best]["k"], table


class RerankValidation:
    """``val_fn`` for :func:`grasp_core.rerank.train.train_reranker`: called with a scorer, returns the Hit@1
    (percent) of the reranker's own order of the fused top K (no RRF: (w, k) are chosen after the checkpoint, on
    the chosen one). ``last`` keeps the items of the latest call, so the (w, k) grid of the checkpoint validated
    last needs no second scoring pass."""

    def __init__(
        self,
        fused: Sequence[Ranking],
        queries: Sequence[str],
        answers: Sequence[Sequence[int]],
        builder: CandidateDocumentBuilder,
        K: int = 50,
    ):
        self.fused, self.queries, self.answers, self.builder, self.K = fused, queries, answers, builder, K
        self.last: list[ValItem] | None = None

    def __call__(self, scorer) -> float:
        results = rerank_batch(self.fused, self.queries, scorer, self.builder, self.K)
        self.last = [ValItem(f, r.scores, a) for f, r, a in zip(self.fused, results, self.answers)]
        reordered = [Ranking.from_scores(f.node_ids[: len(r.scores)], r.scores) for f, r in zip(self.fused, results)]
        return _hit1_mrr(reordered, self.answers)[0]

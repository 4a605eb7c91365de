"""The one ranking interface shared by every retriever, fusion and the reranker.

A :class:`Ranking` is a query's ranked candidates: node ids with descending scores. A retriever
answers a batch of queries at once (``Retriever.rank``). Fusion is reciprocal rank fusion:
``s(d) = Σ_i w_i / (k + r_i(d))`` with ranks from 1; a list in which ``d`` is absent contributes 0.
:func:`fuse` is the one fusion of a query's text and graph rankings; :func:`fusion` is the answer path's fusion
stage over a batch (:mod:`grasp_core.answer`), which the planner's reward and the RL sampling call too. The RL
reward fuses at the profile's fixed weights; the plan chooser may serve a question's graph ranking at another
weight (:func:`graph_weighted`), picked with the plan from the weights it was trained on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import numpy as np

BRANCHES = ("text", "graph", "both")  # which branches of the answer path run (and are fused)


class Ranking(NamedTuple):
    node_ids: np.ndarray  # int64, best first
    scores: np.ndarray  # float32, descending

    @classmethod
    def empty(cls) -> Ranking:
        return cls(np.zeros(0, np.int64), np.zeros(0, np.float32))

    @classmethod
    def from_scores(cls, node_ids: np.ndarray, scores: np.ndarray, k: int | None = None) -> Ranking:
        """Sort candidates by descending score (ties: smaller node id first) and keep the top ``k``."""
        node_ids = np.asarray(node_ids, np.int64)
        scores = np.asarray(scores, np.float32)
        order = np.lexsort((node_ids, -scores))
        if k is not None:
            order = order[:k]
        return cls(node_ids[order], scores[order])

    def __len__(self) -> int:
        return len(self.node_ids)

    def top(self, k: int) -> Ranking:
        return Ranking(self.node_ids[:k], self.scores[:k])

    def rank_of(self, node_ids: Sequence[int]) -> int | None:
        """1-based rank of the best-ranked of ``node_ids``, or None when none is in the list."""
        hits = np.flatnonzero(np.isin(self.node_ids, np.asarray(node_ids, np.int64)))
        return int(hits[0]) + 1 if len(hits) else None


def named_first(ranking: Ranking, named: Sequence[int]) -> Ranking:
    """``ranking`` with the ``named`` nodes on top, in their order in ``ranking`` (those absent from it after them,
    in the order given), the rest after them in their order; scores stay descending (a named node scores above the
    list's top)."""
    if not len(named):
        return ranking
    rank = {n: i for i, n in enumerate(ranking.node_ids.tolist())}
    order = list(dict.fromkeys(int(n) for n in named))  # given order, duplicates dropped
    first = sorted(order, key=lambda n: (rank.get(n, len(rank)), order.index(n)))
    keep = ~np.isin(ranking.node_ids, first)
    top = float(ranking.scores[0]) if len(ranking) else 0.0
    scores = (top + 1.0 + np.arange(len(first), 0, -1, dtype=np.float32) / (len(first) + 1)).astype(np.float32)
    return Ranking(
        np.concatenate([np.asarray(first, np.int64), ranking.node_ids[keep]]),
        np.concatenate([scores, ranking.scores[keep]]),
    )


class FusionWeights(Protocol):
    """The RRF weights of the text and graph rankings and RRF's k (the profile's ``reward`` section)."""

    @property
    def w_text(self) -> float: ...

    @property
    def w_graph(self) -> float: ...

    @property
    def rrf_k(self) -> float: ...


@dataclass(frozen=True)
class Weights:
    """RRF weights held as values (a :class:`FusionWeights`)."""

    w_text: float
    w_graph: float
    rrf_k: float


def graph_weighted(weights: FusionWeights, w_graph: float) -> FusionWeights:
    """``weights`` with the graph ranking's weight replaced by ``w_graph`` (1.0: ``weights`` themselves)."""
    return weights if w_graph == weights.w_graph else Weights(weights.w_text, w_graph, weights.rrf_k)


class Retriever(Protocol):
    """Anything that ranks nodes for a batch of queries."""

    def rank(self, queries: Sequence[str], k: int = 100) -> list[Ranking]: ...


def rrf(
    rankings: Sequence[Ranking], weights: Sequence[float] | None = None, k: float = 60.0, top: int | None = None
) -> Ranking:
    """Reciprocal rank fusion of several rankings of one query."""
    weights = [1.0] * len(rankings) if weights is None else list(weights)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(rankings)} rankings but {len(weights)} weights")
    ids = [r.node_ids for r in rankings if len(r)]
    if not ids:
        return Ranking.empty()
    union = np.unique(np.concatenate(ids))
    scores = np.zeros(len(union), np.float64)
    for ranking, w in zip(rankings, weights):
        if not len(ranking) or w == 0:
            continue
        pos = np.searchsorted(union, ranking.node_ids)
        scores[pos] += w / (k + np.arange(1, len(ranking) + 1))
    return Ranking.from_scores(union, scores, top)


def fuse(text: Ranking, graph: Ranking, weights: FusionWeights, top: int | None = 100) -> Ranking:
    """The fusion the retriever serves and the reward scores: RRF of a query's text and graph rankings."""
    return rrf([text, graph], [weights.w_text, weights.w_graph], k=weights.rrf_k, top=top)


def fusion(
    text: Sequence[Ranking],
    graph: Sequence[Ranking],
    weights: FusionWeights,
    branches: str = "both",
    graph_weights: Sequence[float] | None = None,
) -> list[Ranking]:
    """The fusion stage of a batch: :func:`fuse` of each query's rankings, or the one branch that ran.
    ``graph_weights``: each query's weight of its graph ranking (the plan chooser's; None: ``weights.w_graph``)."""
    if branches == "text":
        return list(text)
    if branches == "graph":
        return list(graph)
    if graph_weights is None:
        return [fuse(t, g, weights) for t, g in zip(text, graph, strict=True)]
    return [fuse(t, g, graph_weighted(weights, w)) for t, g, w in zip(text, graph, graph_weights, strict=True)]

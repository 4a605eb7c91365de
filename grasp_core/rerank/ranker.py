"""The ``ltr`` reranker at inference: a LightGBM lambdarank model over :mod:`grasp_core.rerank.features`.

The model is LightGBM's text format (``ranker.txt``) inside the ``reranker`` artifact, next to
``features.json`` (the feature names it was trained on). For each query the fused top K are featurized and
scored in one ``predict``; the final ranking is :func:`~grasp_core.rerank.inference.fuse_reranked` of that order
and the fused list with the ``(w, k)`` picked on validation. With ``explain`` each candidate also gets its
three largest feature contributions (LightGBM's ``pred_contrib``: per-feature SHAP values that, with the bias,
sum to the score). Training lives in :mod:`grasp_core.rerank.ltr`; this module never imports it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from grasp_core.errors import CorruptArtifactError
from grasp_core.gbdt import TreeModel, load_booster
from grasp_core.io import read_json
from grasp_core.rerank.features import FeatureBuilder, RerankInput
from grasp_core.rerank.inference import Reranked, fuse_reranked
from grasp_core.truncation import Cut

MODEL_FILE, FEATURES_FILE = "ranker.txt", "features.json"
TOP_CONTRIBUTIONS = 3


class RowContributions(Sequence[list[tuple[str, float]]]):
    """The top feature contributions of each row of a candidate list's feature matrix, computed per row on first
    access: TreeSHAP costs about 10 ms a row on the hpo model, many times the scores' cost, and an explanation shows
    only the top answers (a row's contributions are the same alone as in its matrix: each row is explained on its
    own)."""

    def __init__(self, ranker: LTRReranker, X: np.ndarray):
        self._ranker, self._X = ranker, X
        self._rows: dict[int, list[tuple[str, float]]] = {}

    def __len__(self) -> int:
        return len(self._X)

    def __eq__(self, other: object) -> bool:  # equal to the list of its rows, as the eager list was
        return isinstance(other, list | RowContributions) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # mutable-looking like a list: unhashable

    def __getitem__(self, row):  # an int row (slices are not needed)
        row = range(len(self._X))[row]  # a negative row counts from the end; out of range: IndexError
        if row not in self._rows:
            (self._rows[row],) = self._ranker.contributions(self._X[row : row + 1])
        return self._rows[row]


class LTRReranker:
    def __init__(self, booster: TreeModel, features: FeatureBuilder, w: float = float("inf"), k: float = 60.0):
        if booster.num_feature() != features.num_features:
            raise CorruptArtifactError(
                f"the reranker model has {booster.num_feature()} features, this SKB's feature builder "
                f"{features.num_features}; rematerialize the reranker asset"
            )
        self.booster, self.features, self.w, self.k = booster, features, w, k

    @classmethod
    def load(cls, directory: Path, features: FeatureBuilder, w: float, k: float) -> LTRReranker:
        booster = load_booster(directory / MODEL_FILE)
        names = read_json(directory / FEATURES_FILE)["names"]
        if names != features.names:
            raise CorruptArtifactError(
                f"{directory / FEATURES_FILE}: the model was trained on other features than this code builds; "
                "rematerialize the reranker asset"
            )
        return cls(booster, features, w, k)

    def read(self, query: str) -> Cut:
        """The query as the ranker reads it: all of it (its features compare it with each candidate's text)."""
        return Cut(query, None)

    def score(self, X: np.ndarray) -> np.ndarray:
        if not len(X):
            return np.zeros(0, np.float32)
        return np.asarray(self.booster.predict(X, num_threads=1), np.float32)

    def contributions(self, X: np.ndarray) -> list[list[tuple[str, float]]]:
        """Per row: the TOP_CONTRIBUTIONS features with the largest absolute contribution, largest first."""
        if not len(X):
            return []
        contrib = np.asarray(self.booster.predict(X, pred_contrib=True, num_threads=1))[:, :-1]  # last column: the bias
        top = np.argsort(-np.abs(contrib), axis=1, kind="stable")[:, :TOP_CONTRIBUTIONS]
        return [[(self.features.names[j], float(row[j])) for j in idx] for row, idx in zip(contrib, top)]

    def rerank(
        self,
        inputs: Sequence[RerankInput],
        K: int,
        w: float | None = None,
        k: float | None = None,
        explain: bool = False,
        cache=None,
    ) -> list[Reranked]:
        """Rerank each input's fused top K; per-query seconds are its share of the batched feature building
        (one query-encoder call) plus its own prediction. ``cache`` is the pair rerankers' score cache: a
        candidate's features depend on the query's whole context (its rankings, plan, entity table), so the
        ranker has nothing to reuse and ignores it."""
        w, k = self.w if w is None else w, self.k if k is None else k
        t0 = time.perf_counter()
        matrices = self.features.build(inputs, K)
        shared = (time.perf_counter() - t0) / max(1, len(inputs))
        out = []
        for x, X in zip(inputs, matrices):
            t0 = time.perf_counter()
            scores = self.score(X)
            contributions = RowContributions(self, X) if explain else None
            ranking = fuse_reranked(x.fused, scores, w, k)
            out.append(Reranked(ranking, scores, shared + time.perf_counter() - t0, contributions))
        return out

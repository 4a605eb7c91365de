"""The ``ltr`` reranker at inference: a LightGBM lambdarank model over :mod:`grasp_core.rerank.features`.

The model is LightGBM's text format (``ranker.txt``) inside the ``reranker`` artifact, next to
``features.json`` (the feature names it was trained on). For each query the fused top K are featurized and
scored in one ``predict``; the final ranking is :func:`~grasp_core.rerank.inference.fuse_reranked` of that order
and the fused list with the ``(w, k)`` picked on validation. With ``explain`` each candidate also gets its
three largest feature contributions (LightGBM's ``pred_contrib``: per-feature SHAP values that, with the bias,
sum to the score). Training lives in :mod:`grasp_core.rerank.ltr`; this module never imports it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path

import lightgbm as lgb
import numpy as np

from grasp_core.errors import CorruptArtifactError
from grasp_core.io import read_json
from grasp_core.rerank.features import FeatureBuilder, RerankInput
from grasp_core.rerank.inference import Reranked, fuse_reranked
from grasp_core.truncation import Cut

MODEL_FILE, FEATURES_FILE = "ranker.txt", "features.json"
TOP_CONTRIBUTIONS = 3


def load_booster(path: Path, asset: str = "reranker") -> lgb.Booster:
    """The LightGBM model at ``path`` (in ``asset``'s artifact); a missing, malformed or unreadable file raises a
    one-line CorruptArtifactError. The text is checked first (:func:`check_model_text`): LightGBM itself aborts the
    process on some malformed models and silently loads others."""
    if not path.is_file():
        raise CorruptArtifactError(f"{path}: the model file is missing; rematerialize the {asset} asset")
    try:
        text = path.read_bytes()
        check_model_text(text)
    except (OSError, ValueError) as exc:
        raise CorruptArtifactError(f"{path}: corrupt model ({exc}); rematerialize the {asset} asset") from None
    try:
        return lgb.Booster(model_str=text.decode())
    except lgb.basic.LightGBMError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "unreadable"
        raise CorruptArtifactError(f"{path}: corrupt model ({first}); rematerialize the {asset} asset") from None


_PER_INTERNAL = (
    "split_feature",
    "split_gain",
    "threshold",
    "decision_type",
    "left_child",
    "right_child",
    "internal_value",
    "internal_weight",
    "internal_count",
)
_PER_LEAF = ("leaf_value", "leaf_weight", "leaf_count")
_TREE_KEYS = {"Tree", "num_leaves", "num_cat", "is_linear", "shrinkage", *_PER_INTERNAL, *_PER_LEAF}
_HEADER_NUMBERS = ("num_class", "num_tree_per_iteration", "label_index", "max_feature_idx", "tree_sizes")
_HEADER_KEYS = ("version", "num_class", "num_tree_per_iteration", "max_feature_idx", "objective", "tree_sizes")
_KEY_VALUE = re.compile(rb"[A-Za-z_]+=[ -~]*")  # LightGBM's lines: printable ASCII only (a NUL segfaults it)
_PARAMETER = re.compile(rb"\[[a-z0-9_]+: [ -~]*\]")
_IMPORTANCE = re.compile(rb"[ -~]+=[0-9]+")
_NUMBER = r"-?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|inf)"
_NUMBERS = re.compile(rf"{_NUMBER}(?: {_NUMBER})*")  # what LightGBM writes (Python's float() also takes '1_0')


def check_model_text(text: bytes) -> None:
    """Raise ValueError unless ``text`` is a whole LightGBM text model, line by line as LightGBM writes it: the
    header, every tree at the byte offset of its ``tree_sizes`` entry with all its fields (as many numbers as
    the tree has nodes and leaves, children and features in range), ``end of trees``, the feature importances
    and the parameters block. LightGBM checks less: it loads some malformed models silently and crashes the
    process (abort, segfault) on others."""
    start = text.find(b"\nTree=0\n")
    if not text.startswith(b"tree\n") or start < 0:
        raise ValueError("not a LightGBM text model (no 'tree' header or no trees)")
    header = _fields(text[5:start], _KEY_VALUE, "header")
    if any(key not in header for key in _HEADER_KEYS):
        raise ValueError("its header lacks one of " + ", ".join(_HEADER_KEYS))
    try:
        if not all(_NUMBERS.fullmatch(header[key]) for key in _HEADER_NUMBERS if key in header):
            raise ValueError
        sizes = [int(x) for x in header["tree_sizes"].split()]
        max_feature = int(header["max_feature_idx"])
    except ValueError:
        raise ValueError("a count in the header is not a number") from None
    pos = start + 1
    for i, size in enumerate(sizes):
        block = text[pos : pos + size]
        if len(block) < size or not block.startswith(b"Tree=%d\n" % i):
            raise ValueError(f"tree {i} is not where tree_sizes puts it (truncated?)")
        _check_tree(_fields(block, _KEY_VALUE, f"tree {i}"), i, max_feature)
        pos += size
    tail = [line for line in text[pos:].split(b"\n") if line]
    shape = [b"end of trees", b"feature_importances:", b"parameters:", b"end of parameters"]
    if [line for line in tail if line in shape] != shape or not tail[-1].startswith(b"pandas_categorical:"):
        raise ValueError("the model ends before 'end of trees', its importances and parameters (truncated?)")
    importances, parameters = tail.index(b"feature_importances:"), tail.index(b"parameters:")
    bad = [x for x in tail[importances + 1 : parameters] if not _IMPORTANCE.fullmatch(x)]
    bad += [x for x in tail[parameters + 1 : tail.index(b"end of parameters")] if not _PARAMETER.fullmatch(x)]
    if tail[0] != shape[0] or bad or len(tail) != tail.index(b"end of parameters") + 2:
        raise ValueError("a malformed importance or parameter line")


def _fields(block: bytes, line: re.Pattern, where: str) -> dict[str, str]:
    lines = [x for x in block.split(b"\n") if x]
    if not all(line.fullmatch(x) for x in lines):
        raise ValueError(f"{where}: a malformed line")
    return dict(x.decode().split("=", 1) for x in lines)


def _check_tree(fields: dict[str, str], i: int, max_feature: int) -> None:
    try:
        leaves, cat, linear = int(fields["num_leaves"]), int(fields["num_cat"]), int(fields["is_linear"])
        float(fields["shrinkage"])
        counts = {key: leaves - 1 for key in _PER_INTERNAL} if leaves > 1 else {}
        counts.update({key: leaves for key in _PER_LEAF} if leaves > 1 else {"leaf_value": 1})
        if not all(_NUMBERS.fullmatch(value) for value in fields.values()):
            raise ValueError
        values = {key: np.array(fields[key].split(), np.float64) for key in counts}
    except (KeyError, ValueError):
        raise ValueError(f"tree {i}: a field is missing or not numeric") from None
    if set(fields) - _TREE_KEYS or cat != 0 or linear != 0 or leaves < 1:
        raise ValueError(f"tree {i}: an unknown field, or a categorical or linear tree (this reranker has none)")
    if any(len(values[key]) != n for key, n in counts.items()):
        raise ValueError(f"tree {i}: wrong number of values in a field")
    if not all(np.isfinite(v).all() for key, v in values.items() if key not in ("threshold", "split_gain")):
        raise ValueError(f"tree {i}: a non-finite value")
    if leaves > 1:
        children = np.concatenate([values["left_child"], values["right_child"]])
        feature, kind = values["split_feature"], values["decision_type"]
        if ((children < -leaves) | (children > leaves - 2)).any() or ((feature < 0) | (feature > max_feature)).any():
            raise ValueError(f"tree {i}: a child or feature index out of range")
        if ((kind < 0) | (kind > 15) | (kind != np.round(kind))).any():
            raise ValueError(f"tree {i}: a decision type out of range")


class RowContributions(Sequence[list[tuple[str, float]]]):
    """The top feature contributions of each row of a candidate list's feature matrix, computed per row on first
    access: TreeSHAP costs about 5 ms a row, many times the scores' cost, and an explanation shows only the top
    answers (a row's contributions are the same alone as in its matrix: each row is explained on its own)."""

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
    def __init__(self, booster: lgb.Booster, features: FeatureBuilder, w: float = float("inf"), k: float = 60.0):
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

"""LightGBM models at inference, without importing LightGBM: a text model's trees, checked and evaluated in numpy.

Importing ``lightgbm`` imports scikit-learn and pandas with it (seconds from a cold shell), and a question needs
only the trees' scores: :class:`TreeModel` reads LightGBM's text format (``save_model``) and computes what
``Booster.predict`` computes for numerical splits, bit for bit (``tests/test_gbdt.py`` compares them): at each
node, a missing value (NaN) counts as 0 unless the split's missing type is NaN; a value that is missing by the
split's missing type (zero, or NaN) goes to the default side, any other goes left when ``value <= threshold``; a
row's score is the sum of its leaves' values in tree order, in float64. Per-feature contributions
(``pred_contrib``) are LightGBM's path-dependent TreeSHAP (the Shapley values of the cover-weighted expectation),
computed here in closed form: equal to LightGBM's to rounding (tested). Training stays LightGBM's
(:mod:`grasp_core.rerank.ltr`, :mod:`grasp_core.planner.policy.chooser_train`).
"""

from __future__ import annotations

import re
from functools import cached_property
from pathlib import Path

import numpy as np

from grasp_core.errors import CorruptArtifactError

_DEFAULT_LEFT, _ZERO, _NAN = 2, 1, 2  # decision_type: bit 1 default-left; bits 2-3 missing type (0 none, 1 zero, 2 NaN)
_ZERO_THRESHOLD = 1e-35  # LightGBM's kZeroThreshold: |value| below it is zero for a "zero" missing type


class TreeModel:
    """A LightGBM model's trees. ``predict(X)`` -> float64 [rows]: Booster.predict's raw scores for a ranker."""

    def __init__(self, text: str, num_features: int, trees: list[dict[str, np.ndarray]]):
        self.text, self._features = text, num_features
        # every tree's internal nodes in one array (tree i's node j at offsets[i] + j), their children renumbered
        # the same way; a leaf is a negative child, ~(its index among all leaves)
        inner = [len(t.get("split_feature", ())) if len(t["leaf_value"]) > 1 else 0 for t in trees]
        leaves = [len(t["leaf_value"]) for t in trees]
        offsets, leaf_offsets = np.cumsum([0, *inner])[:-1], np.cumsum([0, *leaves])[:-1]

        def per_node(key: str, dtype: type) -> list[np.ndarray]:
            return [np.asarray(t.get(key, ())[:n], dtype) for t, n in zip(trees, inner)]

        def joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
            return np.concatenate(parts) if parts else np.zeros(0, dtype)

        self._feature = joined(per_node("split_feature", np.int64), np.int64)
        self._threshold = joined(per_node("threshold", np.float64), np.float64)
        kind = joined(per_node("decision_type", np.int64), np.int64)
        self._default_left, self._missing = (kind & _DEFAULT_LEFT) != 0, (kind >> 2) & 3
        self._left, self._right = (
            joined(
                [
                    np.where(c >= 0, c + o, ~(~c + lo))
                    for c, o, lo in zip(per_node(key, np.int64), offsets, leaf_offsets)
                ],
                np.int64,
            )
            for key in ("left_child", "right_child")
        )
        self._leaf_value = np.concatenate([t["leaf_value"] for t in trees] or [np.zeros(0)]).astype(np.float64)
        # the training rows through each node and leaf (TreeSHAP's covers); a one-leaf tree has no leaf_count
        self._count = joined(per_node("internal_count", np.float64), np.float64)
        self._leaf_count = np.concatenate(
            [np.asarray(t.get("leaf_count", [1.0]), np.float64) for t in trees] or [np.zeros(0)]
        )
        # where each tree starts: its root, or its one leaf
        self._start = np.array([o if n else ~lo for o, n, lo in zip(offsets, inner, leaf_offsets)], np.int64)
        self._zero_missing = bool((self._missing == _ZERO).any())

    def num_feature(self) -> int:
        return self._features

    def num_trees(self) -> int:
        return len(self._start)

    def save_model(self, path: str | Path) -> None:
        Path(path).write_text(self.text)

    def _rows(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, np.float64)
        X = X.reshape(1, -1) if X.ndim == 1 else X
        if X.shape[1] != self._features:
            raise ValueError(f"the model has {self._features} features, the rows {X.shape[1]}")
        return X

    def _may_be_missing(self, values: np.ndarray) -> bool:
        """Whether the missing-value rules can decide a split for these feature values (a NaN, or a zero type)."""
        return self._zero_missing or bool(np.isnan(values).any())

    def _goes_left(self, value: np.ndarray, n: np.ndarray, check_missing: bool) -> np.ndarray:
        """Whether ``value`` goes to the left child at internal nodes ``n`` (LightGBM's numerical decision)."""
        if not check_missing:
            return value <= self._threshold[n]
        missing = self._missing[n]
        value = np.where(np.isnan(value) & (missing != _NAN), 0.0, value)
        is_missing = ((missing == _ZERO) & (value > -_ZERO_THRESHOLD) & (value <= _ZERO_THRESHOLD)) | (
            (missing == _NAN) & np.isnan(value)
        )
        return np.where(is_missing, self._default_left[n], value <= self._threshold[n])

    def predict(self, X: np.ndarray, num_threads: int = 1, pred_contrib: bool = False) -> np.ndarray:
        """Raw scores of the rows of ``X`` (a 1-D ``X`` is one row); ``pred_contrib``: per-feature TreeSHAP values
        and, last, the expected score [rows, features + 1] (they sum to the score). ``num_threads`` is LightGBM's
        argument, accepted for the same calls: numpy runs on one."""
        X = self._rows(X)
        if pred_contrib:
            return np.stack([self._contributions(x) for x in X]) if len(X) else np.zeros((0, self._features + 1))
        rows, flat = len(X), X.ravel()
        node = np.repeat(self._start, rows)  # [trees * rows]: tree-major, a row's node in each tree
        row = np.tile(np.arange(rows) * self._features, len(self._start))
        live = np.flatnonzero(node >= 0)
        check_missing = self._may_be_missing(flat)
        while len(live):
            n = node[live]
            left = self._goes_left(flat[row[live] + self._feature[n]], n, check_missing)
            node[live] = nxt = np.where(left, self._left[n], self._right[n])
            live = live[nxt >= 0]
        leaf = self._leaf_value[~node].reshape(len(self._start), rows)  # [trees, rows]
        score = np.zeros(rows)
        for values in leaf:  # tree by tree, as LightGBM adds them
            score += values
        return score

    @cached_property
    def _paths(self) -> _Paths:
        return _Paths(self)

    def _contributions(self, x: np.ndarray) -> np.ndarray:
        """One row's TreeSHAP values and expected score. For a leaf ``l`` reached through the distinct features
        ``U`` of its path, with ``z_j`` the share of training rows that follow the path at ``j``'s splits and
        ``o_j`` whether ``x`` does (1 or 0), feature ``i`` of ``U`` gets ``v_l (o_i - z_i) * sum over S in U-i of
        |S|!(|U|-|S|-1)!/|U|! prod_S o_j prod_(U-i-S) z_j``, and that sum is the integral over [0, 1] of
        ``prod_(j in U-i) (z_j (1-u) + o_j u) du`` (the weights are Beta integrals): a polynomial, integrated exactly
        by Gauss-Legendre."""
        p = self._paths
        nodes = np.arange(len(self._feature))
        left = self._goes_left(x[self._feature], nodes, self._may_be_missing(x))
        off = (p.node >= 0) & (np.append(left, False)[p.node] != p.went_left)  # x leaves the path here
        on = np.bincount(p.group.ravel(), weights=off.ravel(), minlength=off.size) == 0  # per (leaf, feature)
        out = np.zeros(self._features + 1)
        for g in p.by_features:  # leaves with the same number of distinct features on their path
            o = on[g.group]  # [leaves, features]
            factor = g.z[:, :, None] * (1 - g.u) + o[:, :, None] * g.u  # [leaves, features, points], > 0
            integral = (np.prod(factor, axis=1)[:, None, :] / factor) @ g.w
            phi = self._leaf_value[g.leaf, None] * (o - g.z) * integral
            out += np.bincount(g.feature.ravel(), weights=phi.ravel(), minlength=self._features + 1)
        out[-1] = p.expected
        return out


class _Paths:
    """Every leaf's path up to its tree's root, as [leaves, depth] arrays (shorter paths padded with node -1): the
    internal node of each step, whether the path goes left there, and its group (``leaf * depth +`` the leaf's first
    step on the same feature: a feature's steps are one factor); the leaves grouped by their number of distinct
    features (:class:`_Leaves`), and the expected score."""

    def __init__(self, model: TreeModel):
        leaves = len(model._leaf_value)
        parent = np.full(len(model._feature) + 1, -1)  # an internal node's parent, a leaf's in leaf_parent
        # per internal node, with a last entry that index -1 (no node) reads
        node_count, left_child = np.append(model._count, 1.0), np.append(model._left, 0)
        leaf_parent, leaf_left = np.full(leaves, -1), np.zeros(leaves, bool)
        for children, side in ((model._left, True), (model._right, False)):
            inner = children >= 0
            parent[children[inner]] = np.flatnonzero(inner)
            leaf_parent[~children[~inner]], leaf_left[~children[~inner]] = np.flatnonzero(~inner), side
        steps, went, cover = [], [], []
        node, is_left = leaf_parent, leaf_left
        count = np.where(leaf_parent >= 0, model._leaf_count, 0.0)  # the rows through the child of each step
        while (node >= 0).any():
            live = node >= 0
            steps.append(node)
            went.append(is_left)
            cover.append(np.where(live, count / node_count[node], 1.0))
            count = np.where(live, node_count[node], 0.0)
            up = np.where(live, parent[node], -1)
            is_left = (up >= 0) & (left_child[up] == node)
            node = up
        depth = max(len(steps), 1)
        self.node = np.stack(steps, axis=1) if steps else np.full((leaves, 1), -1)
        self.went_left = np.stack(went, axis=1) if went else np.zeros((leaves, 1), bool)
        cover_ = np.stack(cover, axis=1) if cover else np.ones((leaves, 1))
        feature = np.append(model._feature, -1)[self.node]
        first_of = np.argmax(feature[:, :, None] == feature[:, None, :], axis=2)  # the first step on its feature
        first = (first_of == np.arange(depth)) & (feature >= 0)
        self.group = np.arange(leaves)[:, None] * depth + first_of
        z = np.ones(leaves * depth)
        np.multiply.at(z, self.group.ravel(), cover_.ravel())
        order = np.argsort(~first, axis=1, kind="stable")  # each leaf's distinct features first
        distinct = first.sum(axis=1)
        self.by_features = []
        for d in np.unique(distinct[distinct > 0]):
            leaf = np.flatnonzero(distinct == d)
            kept = order[leaf, :d]
            group, feature_d = (np.take_along_axis(a[leaf], kept, axis=1) for a in (self.group, feature))
            self.by_features.append(_Leaves(leaf, group, feature_d, z[group]))
        # the expected score: each leaf's value times the share of its tree's training rows that reach it
        self.expected = float(model._leaf_value @ np.prod(cover_, axis=1))


class _Leaves:
    """The leaves with ``d`` distinct features on their paths, [leaves, d]: each feature's group in :class:`_Paths`
    (where a row's ``o`` is read), the feature, its ``z`` (the product of its steps' covers); and Gauss-Legendre
    points on [0, 1], exact for the integrand's degree ``d - 1``."""

    def __init__(self, leaf: np.ndarray, group: np.ndarray, feature: np.ndarray, z: np.ndarray):
        self.leaf, self.group, self.feature, self.z = leaf, group, feature, z
        u, w = np.polynomial.legendre.leggauss(group.shape[1] // 2 + 1)  # exact to degree 2 (d // 2) + 1 >= d - 1
        self.u, self.w = (u + 1) / 2, w / 2


def load_booster(path: Path, asset: str = "reranker") -> TreeModel:
    """The LightGBM model at ``path`` (in ``asset``'s artifact); a missing, malformed or unreadable file raises a
    one-line CorruptArtifactError. The text is checked whole (:func:`check_model_text`): LightGBM itself aborts the
    process on some malformed models and silently loads others."""
    if not path.is_file():
        raise CorruptArtifactError(f"{path}: the model file is missing; rematerialize the {asset} asset")
    try:
        text = path.read_bytes()
        num_features, trees = check_model_text(text)
        return TreeModel(text.decode(), num_features, trees)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise CorruptArtifactError(f"{path}: corrupt model ({exc}); rematerialize the {asset} asset") from None


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


def check_model_text(text: bytes) -> tuple[int, list[dict[str, np.ndarray]]]:
    """Raise ValueError unless ``text`` is a whole LightGBM text model, line by line as LightGBM writes it: the
    header, every tree at the byte offset of its ``tree_sizes`` entry with all its fields (as many numbers as
    the tree has nodes and leaves, children and features in range), ``end of trees``, the feature importances
    and the parameters block. LightGBM checks less: it loads some malformed models silently and crashes the
    process (abort, segfault) on others. Returns the number of features and each tree's numeric fields."""
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
    pos, trees = start + 1, []
    for i, size in enumerate(sizes):
        block = text[pos : pos + size]
        if len(block) < size or not block.startswith(b"Tree=%d\n" % i):
            raise ValueError(f"tree {i} is not where tree_sizes puts it (truncated?)")
        trees.append(_check_tree(_fields(block, _KEY_VALUE, f"tree {i}"), i, max_feature))
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
    if header["num_class"] != "1" or header["num_tree_per_iteration"] != "1":
        raise ValueError("a model of several classes or trees per iteration (a ranker has one)")
    return max_feature + 1, trees


def _fields(block: bytes, line: re.Pattern, where: str) -> dict[str, str]:
    lines = [x for x in block.split(b"\n") if x]
    if not all(line.fullmatch(x) for x in lines):
        raise ValueError(f"{where}: a malformed line")
    return dict(x.decode().split("=", 1) for x in lines)


def _check_tree(fields: dict[str, str], i: int, max_feature: int) -> dict[str, np.ndarray]:
    try:
        leaves, cat, linear = int(fields["num_leaves"]), int(fields["num_cat"]), int(fields["is_linear"])
        float(fields["shrinkage"])
        counts = {key: leaves - 1 for key in _PER_INTERNAL} if leaves > 1 else {}
        counts.update({key: leaves for key in _PER_LEAF} if leaves > 1 else {"leaf_value": 1})
        if not all(_NUMBERS.fullmatch(value) for value in fields.values() if value):  # a one-leaf tree: empty lists
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
    return values

"""Training the ``ltr`` reranker: LightGBM lambdarank on the fused top-K lists (``docs/reranker.md``).

Each training query contributes its fused top K as one group: the gold answers in it are the positives
(label 1), every other candidate a hard negative (label 0; they are the highest-ranked wrong ones). A query
without a gold answer in its top K carries no ranking signal and is left out, in training and in the
validation metric alike. Boosting stops when validation NDCG@``early_stopping_at`` (10; @1, Hit@1 of the
ranker's own order with binary labels, is a step function of a few queries and stops at a noisy round) has not
improved for ``early_stopping_rounds`` rounds, and the best round is kept. Training is
deterministic for a given seed (``deterministic``, row-wise histograms, fixed bagging/feature seeds).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import lightgbm as lgb
import numpy as np

from grasp_core.errors import GraspError
from grasp_core.rerank.config import LTRConfig


class TrainedRanker(NamedTuple):
    booster: lgb.Booster
    best_round: int
    val_curve: list[float]  # validation NDCG@early_stopping_at after each round
    train_groups: int  # training queries with a gold answer in their top K
    importance: dict[str, float]  # total gain per feature, largest first


def labels_of(node_ids: np.ndarray, gold: Sequence[int]) -> np.ndarray:
    return np.isin(node_ids, np.asarray(list(gold), np.int64)).astype(np.float32)


def _dataset(matrices: Sequence[np.ndarray], labels: Sequence[np.ndarray], names: list[str], reference=None):
    keep = [i for i, y in enumerate(labels) if len(y) and y.any()]
    if not keep:
        return None, 0
    X = np.concatenate([matrices[i] for i in keep])
    y = np.concatenate([labels[i] for i in keep])
    groups = [len(labels[i]) for i in keep]
    return lgb.Dataset(X, y, group=groups, feature_name=_safe(names), reference=reference, free_raw_data=False), len(
        keep
    )


def _safe(names: list[str]) -> list[str]:
    """LightGBM refuses some characters in feature names; the readable names live in features.json."""
    return [f"f{i}" for i in range(len(names))]


def train_ranker(
    train: tuple[Sequence[np.ndarray], Sequence[np.ndarray]],
    val: tuple[Sequence[np.ndarray], Sequence[np.ndarray]],
    names: list[str],
    cfg: LTRConfig = LTRConfig(),
) -> TrainedRanker:
    """Lambdarank on ``train`` = (feature matrices, 0/1 labels) per query, early-stopped on ``val``."""
    train_set, n_train = _dataset(*train, names)
    if train_set is None:
        raise GraspError(
            "no training query has a gold answer in its fused top K: the reranker has nothing to learn from "
            "(check the planner and text artifacts, or raise rerank.top_k)"
        )
    val_set, n_val = _dataset(*val, names, reference=train_set)
    params = {
        "objective": "lambdarank",
        "metric": "ndcg",
        "eval_at": [cfg.early_stopping_at],
        "num_leaves": cfg.num_leaves,
        "learning_rate": cfg.learning_rate,
        "min_data_in_leaf": cfg.min_data_in_leaf,
        "feature_fraction": cfg.feature_fraction,
        "bagging_fraction": cfg.bagging_fraction,
        "bagging_freq": 1,
        "lambda_l2": cfg.lambda_l2,
        "seed": cfg.seed,
        "deterministic": True,
        "force_row_wise": True,
        "num_threads": cfg.num_threads,
        "verbosity": -1,
    }
    curve: dict = {}
    callbacks = [lgb.record_evaluation(curve)]
    if val_set is not None:
        callbacks.append(lgb.early_stopping(cfg.early_stopping_rounds, first_metric_only=True, verbose=False))
    booster = lgb.train(
        params,
        train_set,
        num_boost_round=cfg.max_rounds,
        valid_sets=[val_set] if val_set is not None else [],
        valid_names=["val"] if val_set is not None else [],
        callbacks=callbacks,
    )
    best = booster.best_iteration or booster.current_iteration()
    val_curve = [100.0 * v for v in curve.get("val", {}).get(f"ndcg@{cfg.early_stopping_at}", [])]
    gain = booster.feature_importance("gain", iteration=best)
    importance = {names[i]: float(gain[i]) for i in np.argsort(-gain, kind="stable")}
    return TrainedRanker(booster, int(best), val_curve, n_train, importance)

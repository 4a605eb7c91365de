"""Training the plan chooser (:mod:`grasp_core.planner.policy.chooser`) on the reward of executed plans.

Every shortlisted candidate of a training question is executed and fused with the question's text ranking at each
graph weight it is offered at; an option's label is the fused reward the paper's RL optimizes at its sharpest: 1
when fusion puts a gold answer first, else 0.
A LightGBM lambdarank model learns to put the rewarded candidates first. How many of the policy's candidates to
execute (``k``) is chosen on the selecting validation queries, the smallest ``k`` on a tie (it is the latency).
LightGBM runs on one thread with ``deterministic``: a rerun gives the same model.
"""

from __future__ import annotations

from collections.abc import Sequence

import lightgbm as lgb
import numpy as np

from grasp_core.planner.config import ChooserConfig
from grasp_core.planner.policy.chooser import Shortlist, feature_names


def fused_hit1_labels(shortlist: Shortlist, gold: Sequence[int]) -> np.ndarray:
    """1 for each option whose fused ranking (at its graph weight) puts a gold answer first, else 0."""
    return np.array([float(f.rank_of(gold) == 1) for f in shortlist.fused])


def within(shortlist: Shortlist, k: int) -> np.ndarray:
    """Positions (in the shortlist) of the policy's first ``k`` candidates and ABSTAIN."""
    names = feature_names()
    rank, abstain = names.index("policy_rank"), names.index("plan_abstain")
    f = shortlist.features
    return np.flatnonzero((f[:, rank] < k) | (f[:, abstain] > 0))


def fit_chooser(
    lists: Sequence[Shortlist], labels: Sequence[np.ndarray], cfg: ChooserConfig, names: Sequence[str] | None = None
) -> lgb.Booster:
    """A lambdarank model over the shortlists (one group per question); questions with no candidate left out.
    ``names``: the feature columns' names (default :func:`feature_names`; a study may append columns)."""
    keep = [i for i, s in enumerate(lists) if len(s.rows)]
    x = np.concatenate([lists[i].features for i in keep])
    y = np.concatenate([labels[i] for i in keep])
    names = list(names) if names is not None else feature_names()
    data = lgb.Dataset(x, y, group=[len(lists[i].rows) for i in keep], feature_name=names)
    params = {
        "objective": "lambdarank",
        "lambdarank_truncation_level": 3,
        "eval_at": [1],
        "num_leaves": cfg.num_leaves,
        "learning_rate": cfg.learning_rate,
        "min_child_samples": cfg.min_child_samples,
        "seed": cfg.seed,
        "deterministic": True,
        "num_threads": 1,
        "verbosity": -1,
    }
    return lgb.train(params, data, num_boost_round=cfg.n_estimators)


def picks(booster: lgb.Booster, lists: Sequence[Shortlist], k: int) -> list[int | None]:
    """Per question, the shortlist position the chooser picks among the policy's first ``k`` candidates and
    ABSTAIN (None: no candidate)."""
    out: list[int | None] = []
    for s in lists:
        allowed = within(s, k) if len(s.rows) else np.zeros(0, np.int64)
        if not len(allowed):
            out.append(None)
            continue
        scores = np.asarray(booster.predict(s.features[allowed], num_threads=1))
        out.append(int(allowed[int(np.argmax(scores))]))
    return out


def hit1(lists: Sequence[Shortlist], labels: Sequence[np.ndarray], chosen: Sequence[int | None]) -> float:
    """Fused Hit@1 (%) of the chosen candidates (a question with none counts as a miss)."""
    hits = [float(c is not None and labels[i][c] > 0) for i, c in enumerate(chosen)]
    return 100.0 * float(np.mean(hits)) if hits else 0.0


def choose_k(
    booster: lgb.Booster, lists: Sequence[Shortlist], labels: Sequence[np.ndarray], ks: Sequence[int]
) -> tuple[int, dict[int, float]]:
    """The ``k`` with the best fused Hit@1 on these (selecting) questions, the smallest on a tie; every k's value."""
    scores = {k: hit1(lists, labels, picks(booster, lists, k)) for k in sorted(ks)}
    best = max(scores.values())
    return min(k for k, v in scores.items() if v == best), scores

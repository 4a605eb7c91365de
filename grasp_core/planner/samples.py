"""The samples of an RL round, the same for both planner kinds: which training queries a round samples, which
sample of a query RFT keeps, and which queries GRPO can learn from."""

from __future__ import annotations

import numpy as np
import pandas as pd

from grasp_core.planner.config import RLSamplingConfig


def rl_queries(train: pd.DataFrame, cfg: RLSamplingConfig) -> list[int]:
    """Training query ids used in RL: ≤ max_answers gold answers, optionally a seeded subset."""
    keep = train[train["answer_ids"].map(len) <= cfg.max_answers]["qid"].astype(int).tolist()
    if cfg.max_queries is not None and len(keep) > cfg.max_queries:
        keep = sorted(np.random.default_rng(cfg.seed).choice(keep, cfg.max_queries, replace=False).tolist())
    return keep


def best_positive_samples(samples: pd.DataFrame) -> pd.DataFrame:
    """Each query's highest-reward sample when positive; ties: fewer anchors, then fewer candidates."""
    pos = samples[samples["reward"] > 0]
    ordered = pos.sort_values(
        ["qid", "reward", "n_anchors", "n_candidates", "sample"], ascending=[True, False, True, True, True]
    )
    return ordered.groupby("qid", as_index=False).head(1).reset_index(drop=True)


def informative_queries(samples: pd.DataFrame) -> list[int]:
    """Queries whose sampled rewards are not all equal (the only ones GRPO can learn from)."""
    spread = samples.groupby("qid")["reward"].agg(lambda r: r.max() - r.min())
    return spread[spread > 1e-9].index.astype(int).tolist()

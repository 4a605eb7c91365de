"""Reranker training data from fused rankings (paper §3.3).

For each training query the fused top ``top`` (100) is read: the gold answers in it are the positives (in
ranking order), the ``n_neg`` (30) highest-ranked non-gold candidates are the hard negatives. A query with
no positive in its top 100 is skipped, and so is one whose top 100 holds no wrong candidate (nothing to
contrast the positive with).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from grasp_core.ranking import Ranking


def mine_hard_negatives(
    qids: Sequence[int],
    fused_rankings: Sequence[Ranking],
    answers: Sequence[Sequence[int]],
    top: int = 100,
    n_neg: int = 30,
) -> pd.DataFrame:
    """DataFrame[qid, positives: list[int], negatives: list[int]], both lists best-ranked first."""
    if not len(qids) == len(fused_rankings) == len(answers):
        raise ValueError(f"{len(qids)} qids, {len(fused_rankings)} rankings and {len(answers)} answer lists")
    rows = []
    for qid, ranking, gold in zip(qids, fused_rankings, answers):
        ids = ranking.node_ids[:top]
        is_gold = np.isin(ids, np.asarray(gold, np.int64))
        positives, negatives = ids[is_gold].tolist(), ids[~is_gold][:n_neg].tolist()
        if positives and negatives:
            rows.append((int(qid), positives, negatives))
    return pd.DataFrame(rows, columns=["qid", "positives", "negatives"])

"""Hard negatives from hand-made fused rankings."""

from __future__ import annotations

import numpy as np

from grasp_core.ranking import Ranking
from grasp_core.rerank.hard_negatives import mine_hard_negatives


def ranking(ids) -> Ranking:
    return Ranking(np.asarray(ids, np.int64), np.linspace(1, 0, len(ids)).astype(np.float32))


def test_positives_are_gold_in_the_top_and_negatives_the_best_ranked_wrong_ones():
    rankings = [
        ranking([5, 1, 7, 2, 9, 3]),  # gold 1 and 3 inside the top 6
        ranking([4, 8, 6]),  # gold 0 absent: skipped
        ranking([2, 3]),  # every candidate gold: nothing to contrast, skipped
        ranking([9, 8, 7, 6, 5, 0]),  # gold 0 at rank 6: outside top=5, skipped
        ranking([0, 1, 2, 3, 4, 5]),  # gold 2
    ]
    answers = [[1, 3, 11], [0], [2, 3], [0], [2]]
    out = mine_hard_negatives([100, 101, 102, 103, 104], rankings, answers, top=5, n_neg=3)
    assert out["qid"].tolist() == [100, 104]
    assert out["positives"].tolist() == [[1], [2]]  # 3 is at rank 6, outside the top 5
    assert out["negatives"].tolist() == [[5, 7, 2], [0, 1, 3]]


def test_paper_defaults_take_30_negatives_from_the_top_100():
    ids = np.arange(200)
    out = mine_hard_negatives([1], [ranking(ids)], [[50, 150]])
    assert out["positives"].tolist() == [[50]]
    assert out["negatives"].tolist() == [list(range(30))]

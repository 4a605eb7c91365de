"""named_first: a bare name's nodes answer first, whatever the ranking below them."""

import numpy as np

from grasp_core.ranking import Ranking, named_first


def _ranking(ids: list[int]) -> Ranking:
    return Ranking(np.array(ids, np.int64), np.linspace(1.0, 0.1, len(ids)).astype(np.float32))


def test_named_nodes_go_first_in_their_ranked_order_and_scores_stay_descending():
    out = named_first(_ranking([7, 3, 9, 4]), (4, 9))
    assert out.node_ids.tolist() == [9, 4, 7, 3]  # 9 was ranked above 4
    assert (np.diff(out.scores) < 0).all() and out.scores.dtype == np.float32


def test_a_named_node_missing_from_the_ranking_is_added_after_the_ranked_named_ones():
    out = named_first(_ranking([7, 3]), (5, 3))
    assert out.node_ids.tolist() == [3, 5, 7]
    assert (np.diff(out.scores) < 0).all()
    assert named_first(Ranking.empty(), (2,)).node_ids.tolist() == [2]


def test_no_name_leaves_the_ranking_as_it_is():
    r = _ranking([7, 3, 9])
    assert named_first(r, ()) is r

import numpy as np
import pytest

from grasp_core.planner.config import RewardConfig
from grasp_core.planner.reward import RewardTable, count_bucket, plan_reward, rank_bucket
from grasp_core.ranking import Ranking, fuse


def R(ids):
    return Ranking(np.asarray(ids, np.int64), np.linspace(1, 0, len(ids), dtype=np.float32))


def test_buckets():
    assert [rank_bucket(r) for r in (1, 2, 3, 4, 10, 11, 20, 21, 50, 51, 100, 101, None)] == [
        0,
        1,
        1,
        2,
        2,
        3,
        3,
        4,
        4,
        5,
        5,
        6,
        6,
    ]
    assert [count_bucket(n) for n in (0, 1, 2, 5, 6, 20, 21, 100, 101, 1000, 1001, 10**6)] == [
        0,
        1,
        2,
        2,
        3,
        3,
        4,
        4,
        5,
        5,
        6,
        6,
    ]


def test_prior_table_reward_is_fused_hit_gain():
    table = RewardTable.prior()
    text = R([5, 7, 9])  # gold 7 at rank 2
    graph = R([7])  # graph puts gold first -> fused: 7 gets 1/61 + 1/62 > 5's 1/61
    assert fuse(text, graph, RewardConfig()).node_ids[0] == 7
    assert plan_reward(text, graph, n_candidates=1, gold=[7], table=table) == 1.0
    # a graph ranking that does not change the top keeps reward 0
    assert plan_reward(text, R([9]), 1, [7], table) == 0.0
    # a plan that pushes a wrong node above a gold-first text list loses the hit
    assert plan_reward(R([7, 5]), R([5]), 1, [7], table) == -1.0


def test_invalid_plan_gets_penalty_below_any_valid_reward():
    cfg = RewardConfig(invalid_penalty=-0.1)
    table = RewardTable.prior()
    assert plan_reward(R([1]), None, 0, [1], table, cfg) == -0.1
    # an empty (valid) graph ranking leaves the fused list equal to the text list: reward 0
    assert plan_reward(R([1, 2]), Ranking.empty(), 0, [2], table, cfg) == 0.0


def test_table_shrinkage_toward_row_average():
    # row "2-3": 10 obs at count bucket 1 with hit rate 0.8, 90 obs at bucket 3 with hit rate 0.3
    obs = [(2, 1, i < 8) for i in range(10)] + [(3, 10, i < 27) for i in range(90)]
    table = RewardTable.build(obs, shrink_n=50)
    row_mean = (8 + 27) / 100
    assert table.counts[1, 1] == 10 and table.counts[1, 3] == 90
    assert table.values[1, 1] == pytest.approx(0.2 * 0.8 + 0.8 * row_mean)
    assert table.values[1, 3] == pytest.approx(0.3)  # n >= 50: its own average
    assert table.values[1, 5] == pytest.approx(row_mean)  # unseen cell in a seen row: the row average
    assert table.values[0, 0] == 1.0 and table.values[6, 0] == 0.0  # unseen rows: the rank prior
    assert RewardTable.from_json(table.to_json()).value(2, 1) == pytest.approx(table.values[1, 1])
    assert "2-3" in table.to_markdown()


def test_reward_uses_candidate_bucket_of_the_plan():
    # after a reranker, a gold-first fused list is worth more when the graph list is narrow
    obs = [(1, 1, True)] * 60 + [(1, 500, False)] * 60 + [(5, 0, False)] * 60
    table = RewardTable.build(obs)
    text = R([1, 2, 3, 4, 8])  # gold 8 at rank 5 -> U(T) = 0
    graph = R([8])
    assert fuse(text, graph, RewardConfig()).rank_of([8]) == 1
    assert plan_reward(text, graph, 1, [8], table) == pytest.approx(1.0)
    assert plan_reward(text, graph, 500, [8], table) == pytest.approx(0.0)

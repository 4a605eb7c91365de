import numpy as np
import pytest

from grasp_core.metrics import evaluate, per_query, per_query_hits
from grasp_core.ranking import Ranking


def R(ids, scores=None):
    ids = np.asarray(ids)
    scores = -np.arange(len(ids), dtype=np.float32) if scores is None else scores
    return Ranking.from_scores(ids, scores)


def test_hand_computed_values():
    rankings = [R([3, 1, 2, 9, 8, 7]), R([5, 4]), R([0, 1, 2]), R([])]
    answers = [[2, 7], [4, 6], [1, 0], [3]]
    table = per_query(rankings, answers, num_nodes=100)
    np.testing.assert_allclose(table["hit@1"], [0, 0, 1, 0])
    np.testing.assert_allclose(table["hit@5"], [1, 1, 1, 0])
    np.testing.assert_allclose(table["recall@20"], [1.0, 0.5, 1.0, 0.0])
    np.testing.assert_allclose(table["mrr"], [1 / 3, 1 / 2, 1.0, 1 / 100])  # absent gold ranks last: 100 of 100
    result = evaluate(rankings, answers, 100)
    assert result == pytest.approx(
        {"hit@1": 25.0, "hit@5": 75.0, "recall@20": 62.5, "mrr": 100 * (1 / 3 + 1 / 2 + 1 + 0.01) / 4}
    )
    np.testing.assert_array_equal(per_query_hits(rankings, answers, 100), [False, False, True, False])
    # a candidate set smaller than 20: every candidate is in the top 20
    assert per_query(rankings, answers, 10)["recall@20"].tolist() == [1.0] * 4


def test_absent_gold_counts_only_when_the_candidate_set_is_tiny():
    # 4 candidates, ranking [0, 1], gold 3 absent: ranks 3..4 are unscored, gold takes rank 4
    table = per_query([R([0, 1])], [[3]], num_nodes=4)
    assert table["hit@5"][0] == 1 and table["hit@1"][0] == 0 and table["mrr"][0] == pytest.approx(0.25)
    table = per_query([R([0, 1])], [[2, 3]], num_nodes=30)
    assert table["recall@20"][0] == 0 and table["mrr"][0] == pytest.approx(1 / 29)


def test_duplicate_answers_and_bad_ids():
    np.testing.assert_allclose(per_query([R([1, 2])], [[2, 2]], 5)["recall@20"], [1.0])
    with pytest.raises(ValueError, match="answer ids"):
        per_query([R([1])], [[7]], 5)
    with pytest.raises(ValueError, match="2 rankings but 1"):
        per_query([R([1]), R([2])], [[1]], 5)


def _random_case(rng, n):
    length = int(rng.integers(1, 60))
    ids = rng.choice(n, length, replace=False)
    n_gold = int(rng.integers(1, 6))
    inside = rng.random() < 0.7
    gold_in = list(rng.choice(ids, min(length, int(rng.integers(1, n_gold + 1))), replace=False)) if inside else []
    others = np.setdiff1d(np.arange(n), ids)
    gold = gold_in + list(rng.choice(others, n_gold - len(gold_in), replace=False))
    scores = rng.random(length).astype(np.float32)
    if rng.random() < 0.4:  # ties among non-gold nodes and among gold nodes (never a gold tied with a non-gold)
        is_gold = np.isin(ids, gold)
        for mask in (is_gold, ~is_gold):
            members = np.flatnonzero(mask)
            for a, b in zip(members[::2], members[1::2]):
                scores[b] = scores[a]
    return Ranking.from_scores(ids, scores), gold


def test_parity_with_stark_evaluator():
    torch = pytest.importorskip("torch")
    from stark_qa.evaluator import Evaluator

    rng = np.random.default_rng(0)
    n = 150
    evaluator = Evaluator(list(range(n)))
    cases = [_random_case(rng, n) for _ in range(400)]
    ours = per_query([r for r, _ in cases], [g for _, g in cases], n)
    compared = dict.fromkeys(["hit@1", "hit@5", "recall@20", "mrr"], 0)
    for i, (ranking, gold) in enumerate(cases):
        pred = dict(zip(ranking.node_ids.tolist(), ranking.scores.tolist()))
        stark = evaluator(pred, torch.LongTensor(gold), metrics=["hit@1", "hit@5", "recall@20", "mrr"])
        absent = len(set(gold) - set(ranking.node_ids.tolist()))
        for metric, k in (("hit@1", 1), ("hit@5", 5), ("recall@20", 20), ("mrr", None)):
            determined = absent == 0 or (len(ranking) >= k if k else absent < len(set(gold)))
            if determined:
                compared[metric] += 1
                assert ours[metric][i] == pytest.approx(stark[metric], abs=1e-6), (metric, i)
    assert min(compared.values()) > 150, compared
    assert compared["hit@1"] == 400  # every ranking has >= 1 node

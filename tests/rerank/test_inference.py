"""Reranked inference: RRF of reranker rank and fused rank on hand-made numbers, grid selection, and a real
rerank call with the MiniLM cross-encoder."""

from __future__ import annotations

import math

import numpy as np
import pytest

from grasp_core.ranking import Ranking
from grasp_core.rerank.inference import ValItem, fuse_reranked, rerank, rerank_batch, select_rrf_params

FUSED = Ranking(np.array([10, 20, 30, 40, 50]), np.array([5, 4, 3, 2, 1], np.float32))
SCORES = np.array([0.1, 0.9, 0.5], np.float32)  # reranker scores of 10, 20, 30: reranker ranks 3, 1, 2


@pytest.mark.parametrize(
    "w, k, ids, scores",
    [
        # 10: 2/4 + 1/2, 20: 2/2 + 1/3, 30: 2/3 + 1/4, 40: 1/5, 50: 1/6
        (2.0, 1.0, [20, 10, 30, 40, 50], [4 / 3, 1.0, 11 / 12, 1 / 5, 1 / 6]),
        # 10: .5/4 + 1/2, 20: .5/2 + 1/3, 30: .5/3 + 1/4
        (0.5, 1.0, [10, 20, 30, 40, 50], [0.625, 7 / 12, 5 / 12, 1 / 5, 1 / 6]),
        (1000.0, 60.0, [20, 30, 10, 40, 50], None),  # ≈ the reranker's order; the tail keeps the fused order
        (0.0, 60.0, [10, 20, 30, 40, 50], None),  # the fused order
        (math.inf, 1.0, [20, 30, 10, 40, 50], [1.0, 0.8, 0.6, 0.4, 0.2]),  # exactly the reranker's order, then the tail
    ],
)
def test_rrf_of_reranker_rank_and_fused_rank(w, k, ids, scores):
    out = fuse_reranked(FUSED, SCORES, w, k)
    assert out.node_ids.tolist() == ids
    if scores is not None:
        np.testing.assert_allclose(out.scores, scores, rtol=1e-6)


def test_grid_selection_picks_the_best_validation_hit1():
    items = [
        ValItem(Ranking(np.array([1, 2, 3]), np.array([3, 2, 1], np.float32)), np.array([0, 2, 1], np.float32), [2]),
        ValItem(Ranking(np.array([4, 5, 6]), np.array([3, 2, 1], np.float32)), np.array([1, 2, 0], np.float32), [4]),
    ]
    # with k = 1 the reranker fixes query 1 when w > 2/3 and breaks query 2 when w >= 1
    w, k, table = select_rrf_params(items, grid_w=(0.5, 0.8, 2.0), grid_k=(1.0, 60.0))
    assert (w, k) == (0.8, 1.0)
    assert list(table.columns) == ["w", "k", "hit@1", "mrr"] and len(table) == 6
    by = table.set_index(["w", "k"])
    assert by.loc[(0.8, 1.0), "hit@1"] == 100.0 and by.loc[(0.8, 1.0), "mrr"] == 100.0
    assert by.loc[(0.5, 1.0), "hit@1"] == 50.0 and by.loc[(0.5, 1.0), "mrr"] == 75.0
    assert by.loc[(2.0, 1.0), "hit@1"] == 50.0 and by.loc[(2.0, 60.0), "hit@1"] == 50.0


def test_rerank_scores_the_top_k_with_the_real_cross_encoder(tiny_skb, minilm_builder):
    from grasp_core.rerank.config import CrossEncoderScorerConfig
    from grasp_core.rerank.scorers import CrossEncoderScorer

    scorer = CrossEncoderScorer(CrossEncoderScorerConfig(max_length=64))
    fused = Ranking(np.array([3, 0, 5, 4, 1, 2]), np.linspace(1, 0, 6).astype(np.float32))
    query = "tall stature phenotype"
    ranking, scores, seconds, _ = rerank(fused, query, scorer, minilm_builder, K=4, w=1000.0, k=60.0)
    vec = minilm_builder.embed_queries([query])[0]
    docs = minilm_builder.build(vec, [3, 0, 5, 4], scorer.tokenizer, scorer.prompt_tokens(query))
    np.testing.assert_allclose(scores, scorer.score(query, docs), atol=1e-5)
    assert ranking.node_ids[:4].tolist() == np.array([3, 0, 5, 4])[np.argsort(-scores, kind="stable")].tolist()
    assert ranking.node_ids[4:].tolist() == [1, 2] and seconds > 0
    batch = rerank_batch([fused, fused.top(2)], [query, query], scorer, minilm_builder, K=4)
    assert [len(r.scores) for r in batch] == [4, 2] and [len(r.ranking) for r in batch] == [6, 2]


def test_the_score_cache_scores_each_pair_once(tiny_skb, minilm_builder):
    from grasp_core.rerank.config import CrossEncoderScorerConfig
    from grasp_core.rerank.scorers import CrossEncoderScorer

    scorer = CrossEncoderScorer(CrossEncoderScorerConfig(max_length=64))
    scored = []
    score = scorer.score
    scorer.score = lambda query, docs: (scored.append(len(docs)), score(query, docs))[1]
    query = "tall stature phenotype"
    fused = Ranking(np.array([3, 0, 5, 4, 1, 2]), np.linspace(1, 0, 6).astype(np.float32))
    text = Ranking(np.array([5, 1, 2, 3]), np.linspace(1, 0, 4).astype(np.float32))
    plain = rerank_batch([fused, text], [query, query], scorer, minilm_builder, K=4)
    cache: dict = {}
    first = rerank_batch([fused], [query], scorer, minilm_builder, K=4, cache=cache)
    second = rerank_batch([text], [query], scorer, minilm_builder, K=4, cache=cache)
    assert scored == [4, 4, 4, 2]  # without the cache 4 + 4; with it 4, then only nodes 1 and 2
    assert set(cache) == {(query, n) for n in (3, 0, 5, 4, 1, 2)}
    for a, b in zip(plain, first + second):
        np.testing.assert_allclose(a.scores, b.scores, atol=1e-5)
        assert a.ranking.node_ids.tolist() == b.ranking.node_ids.tolist()

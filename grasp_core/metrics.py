"""Hit@1, Hit@5, Recall@20 and MRR over the whole candidate set, as STaRK defines them (in percent).

STaRK's evaluator (``stark_qa/evaluator.py``) scores every candidate: ranked nodes keep their score, every
other node gets ``min(score) - 1``; torchmetrics then sorts all candidates. So a gold answer missing from a
ranking of length ``L`` sits somewhere in ranks ``L+1..N``, among ties. Per query:

- ``hit@k``    = 1 if a gold answer is in the top k, else 0;
- ``recall@k`` = |gold ∩ top k| / |gold| (0 when there is no gold);
- ``mrr``      = 1 / rank of the best-ranked gold answer.

Ties. torchmetrics sorts with ``torch.argsort``/``topk``, which are not stable on CPU: the order inside a
tie group is an implementation detail (measured: neither id order nor any fixed order). So STaRK's value is
only determined where ties do not matter, and this module fixes a convention for the rest:

- ranked candidates are taken in ``Ranking`` order (``Ranking.from_scores`` breaks score ties by node id);
- the unscored candidates rank below every ranked one, and gold answers among them rank *last* (below the
  unscored non-gold candidates): absent gold answers count toward hit@k/recall@k only when the ranking and
  the non-gold unscored candidates together are shorter than k, and give an MRR of 1/(N - g_absent + 1).

Where STaRK's value is determined (a ranking of at least k nodes for @k metrics, a gold answer inside the
ranking for MRR, no score tie between a gold and a non-gold node) the two agree exactly
(``tests/test_metrics.py``). Elsewhere STaRK's value is a random tie break worth at most chance level
(about ``g·(k-L)/N`` for hit@k, about ``(g+1)/N`` for MRR); this convention never credits a system for it.
Node ids in one ranking are assumed unique (a ``Ranking`` never repeats a node).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from grasp_core.ranking import Ranking

METRICS = ("hit@1", "hit@5", "recall@20", "mrr")


def per_query(rankings: Sequence[Ranking], answers: Sequence[Sequence[int]], num_nodes: int) -> pd.DataFrame:
    """Per-query hit@1, hit@5, recall@20 and mrr as fractions in [0, 1] (one row per query, input order)."""
    if len(rankings) != len(answers):
        raise ValueError(f"{len(rankings)} rankings but {len(answers)} answer lists")
    n_q = len(rankings)
    lengths = np.array([len(r) for r in rankings], np.int64)
    ranked = np.concatenate([np.asarray(r.node_ids, np.int64) for r in rankings]) if n_q else np.zeros(0, np.int64)
    gold = np.concatenate([np.asarray(a, np.int64).ravel() for a in answers]) if n_q else np.zeros(0, np.int64)
    for what, ids in (("ranked node", ranked), ("answer", gold)):
        if len(ids) and (ids.min() < 0 or ids.max() >= num_nodes):
            raise ValueError(f"{what} ids must lie in 0..{num_nodes - 1}")
    ranked_q = np.repeat(np.arange(n_q), lengths)
    position = np.arange(len(ranked)) - np.repeat(np.cumsum(lengths) - lengths, lengths) + 1  # 1-based rank
    gold_keys = np.unique(np.repeat(np.arange(n_q), [len(np.ravel(a)) for a in answers]) * num_nodes + gold)
    n_gold = np.bincount(gold_keys // num_nodes, minlength=n_q)
    keys = ranked_q * num_nodes + ranked
    slot = np.minimum(np.searchsorted(gold_keys, keys), max(len(gold_keys) - 1, 0))
    is_gold = gold_keys[slot] == keys if len(gold_keys) else np.zeros(len(keys), bool)

    gold_q, gold_pos = ranked_q[is_gold], position[is_gold]  # grouped by query, positions increasing
    n_absent = n_gold - np.bincount(gold_q, minlength=n_q)
    first = np.full(n_q, np.inf)
    queries_with_gold, first_index = np.unique(gold_q, return_index=True)
    first[queries_with_gold] = gold_pos[first_index]
    # gold answers outside the ranking take the last ranks N - n_absent + 1 .. N
    first = np.where(np.isinf(first) & (n_absent > 0), num_nodes - n_absent + 1, first)

    def found_in_top(k: int) -> np.ndarray:
        ranked_hits = np.bincount(gold_q[gold_pos <= k], minlength=n_q)
        return ranked_hits + np.clip(k - (num_nodes - n_absent), 0, n_absent)

    with np.errstate(divide="ignore", invalid="ignore"):
        recall = np.where(n_gold > 0, found_in_top(20) / np.maximum(n_gold, 1), 0.0)
    return pd.DataFrame(
        {
            "hit@1": (first <= 1).astype(float),
            "hit@5": (first <= 5).astype(float),
            "recall@20": recall,
            "mrr": np.where(np.isinf(first), 0.0, 1.0 / first),
        }
    )


def evaluate(rankings: Sequence[Ranking], answers: Sequence[Sequence[int]], num_nodes: int) -> dict[str, float]:
    """Mean hit@1, hit@5, recall@20 and mrr over the queries, in percent."""
    table = per_query(rankings, answers, num_nodes)
    return {m: float(100.0 * table[m].mean()) if len(table) else 0.0 for m in METRICS}


def per_query_hits(
    rankings: Sequence[Ranking], answers: Sequence[Sequence[int]], num_nodes: int, metric: str = "hit@1"
) -> np.ndarray:
    """Per-query success (bool) on ``metric`` (hit@1 by default), the input of McNemar's test."""
    return per_query(rankings, answers, num_nodes)[metric].to_numpy() > 0

"""The planner's reward: the gain its graph ranking brings to the *fused* ranking (``docs/design.md``).

``reward = U(RRF(T, G)) − U(T)``, where ``U(list)`` reads the reward table at the list's gold-rank
bucket and the plan's graph-candidate-count bucket. The table holds the average downstream Hit@1 (after
the reranker when one exists, else fused Hit@1) of validation queries in each cell; a cell seen fewer
than ``shrink_n`` times is shrunk toward its gold-rank row average with weight ``min(1, n / shrink_n)``
on its own value. An invalid or unparseable plan gets a fixed penalty below any valid plan's reward.

Buckets (our choice; the paper does not list them):
- gold rank: 1 | 2–3 | 4–10 | 11–20 | 21–50 | 51–100 | absent (no gold in the list);
- graph candidates (before the top-100 cut): 0 | 1 | 2–5 | 6–20 | 21–100 | 101–1,000 | >1,000.
  The text list alone is read in the `0` column.
A cell (and a whole row) no validation query reached falls back to the rank prior: 1 for rank 1, else 0
(exactly fused Hit@1, which is what the table measures when no reranker exists yet).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from grasp_core.planner.config import RewardConfig
from grasp_core.ranking import Ranking, fusion

RANK_EDGES = (1, 3, 10, 20, 50, 100)  # upper bounds of the rank buckets; beyond: absent
COUNT_EDGES = (0, 1, 5, 20, 100, 1000)  # upper bounds of the candidate-count buckets; beyond: last
RANK_LABELS = ("1", "2-3", "4-10", "11-20", "21-50", "51-100", "absent")
COUNT_LABELS = ("0", "1", "2-5", "6-20", "21-100", "101-1000", ">1000")


def rank_bucket(rank: int | None) -> int:
    if rank is None or rank > RANK_EDGES[-1]:
        return len(RANK_EDGES)
    return int(np.searchsorted(RANK_EDGES, rank))


def count_bucket(n_candidates: int) -> int:
    return min(int(np.searchsorted(COUNT_EDGES, n_candidates)), len(COUNT_EDGES))


def _prior() -> np.ndarray:
    prior = np.zeros((len(RANK_LABELS), len(COUNT_LABELS)))
    prior[0, :] = 1.0
    return prior


@dataclass(frozen=True)
class RewardTable:
    values: np.ndarray  # [rank bucket, count bucket] -> expected downstream Hit@1
    counts: np.ndarray  # validation queries per cell

    @classmethod
    def prior(cls) -> RewardTable:
        return cls(_prior(), np.zeros((len(RANK_LABELS), len(COUNT_LABELS)), np.int64))

    @classmethod
    def build(cls, observations: Iterable[tuple[int | None, int, bool]], shrink_n: int = 50) -> RewardTable:
        """From (gold rank in the list, graph candidate count, downstream hit@1) per validation observation."""
        sums = np.zeros((len(RANK_LABELS), len(COUNT_LABELS)))
        counts = np.zeros_like(sums, dtype=np.int64)
        for rank, n_cand, hit in observations:
            r, c = rank_bucket(rank), count_bucket(n_cand)
            sums[r, c] += float(hit)
            counts[r, c] += 1
        values = _prior()
        for r in range(len(RANK_LABELS)):
            row_n = counts[r].sum()
            if row_n == 0:
                continue
            row_mean = sums[r].sum() / row_n
            own = np.divide(sums[r], counts[r], out=np.full(len(COUNT_LABELS), row_mean), where=counts[r] > 0)
            weight = np.minimum(1.0, counts[r] / shrink_n)
            values[r] = weight * own + (1 - weight) * row_mean
        return cls(values, counts)

    def value(self, gold_rank: int | None, n_candidates: int) -> float:
        return float(self.values[rank_bucket(gold_rank), count_bucket(n_candidates)])

    def to_json(self) -> dict:
        return {
            "rank_buckets": list(RANK_LABELS),
            "count_buckets": list(COUNT_LABELS),
            "values": self.values.round(6).tolist(),
            "counts": self.counts.tolist(),
        }

    @classmethod
    def from_json(cls, obj: dict) -> RewardTable:
        return cls(np.asarray(obj["values"], float), np.asarray(obj["counts"], np.int64))

    def to_markdown(self) -> str:
        head = "| gold rank \\ candidates | " + " | ".join(COUNT_LABELS) + " |\n"
        head += "|---" * (len(COUNT_LABELS) + 1) + "|\n"
        rows = [
            f"| {label} | " + " | ".join(f"{v:.2f} ({n})" for v, n in zip(self.values[i], self.counts[i])) + " |"
            for i, label in enumerate(RANK_LABELS)
        ]
        return head + "\n".join(rows)


def plan_reward(
    text: Ranking,
    graph: Ranking | None,
    n_candidates: int,
    gold: Sequence[int],
    table: RewardTable,
    cfg: RewardConfig = RewardConfig(),
) -> float:
    """``U(RRF(T, G)) − U(T)``; ``graph=None`` marks an invalid plan (fixed penalty)."""
    if graph is None:
        return cfg.invalid_penalty
    base = table.value(text.rank_of(gold), 0)
    (fused,) = fusion([text], [graph], cfg)
    return table.value(fused.rank_of(gold), n_candidates) - base

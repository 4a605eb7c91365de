"""Significance tests for comparing two settings: McNemar on per-query Hit@1, Stouffer across datasets.

``mcnemar`` uses only the discordant queries (b: A right and B wrong, c: A wrong and B right). With fewer
than ``EXACT_BELOW`` = 25 discordant pairs the chi-square approximation is poor, so it runs the exact
two-sided binomial test (statistic = min(b, c), p = P(X <= min) * 2 under Binomial(b + c, 1/2), capped at 1);
otherwise the chi-square test with continuity correction, (|b - c| - 1)^2 / (b + c) on 1 degree of freedom.
With no discordant pair the two settings are indistinguishable: (0.0, 1.0).

``stouffer`` combines two-sided p-values of the same comparison on several datasets. Each p-value becomes a
signed z-score, z_i = sign_i * Φ^-1(1 - p_i / 2) (sign +1 when A beat B on that dataset); the combined
Z = Σ z_i / √n gives the two-sided p = 2 (1 - Φ(|Z|)). Opposite effects therefore cancel instead of adding up.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

EXACT_BELOW = 25


def mcnemar(hits_a: Sequence[bool] | np.ndarray, hits_b: Sequence[bool] | np.ndarray) -> tuple[float, float]:
    """McNemar's test on paired per-query successes -> (statistic, two-sided p-value)."""
    a, b_ = np.asarray(hits_a, bool), np.asarray(hits_b, bool)
    if a.shape != b_.shape:
        raise ValueError(f"paired inputs differ in length: {a.shape} vs {b_.shape}")
    b, c = int(np.sum(a & ~b_)), int(np.sum(~a & b_))
    n = b + c
    if n == 0:
        return 0.0, 1.0
    if n < EXACT_BELOW:
        low = min(b, c)
        return float(low), float(min(1.0, 2.0 * stats.binom.cdf(low, n, 0.5)))
    statistic = (abs(b - c) - 1) ** 2 / n
    return float(statistic), float(stats.chi2.sf(statistic, 1))


def stouffer(p_values: Sequence[float], signs: Sequence[float] | None = None) -> float:
    """Combine two-sided p-values (one per dataset) with Stouffer's method -> two-sided p-value."""
    p = np.clip(np.asarray(p_values, float), 1e-300, 1.0)
    if p.size == 0:
        raise ValueError("stouffer needs at least one p-value")
    s = np.ones_like(p) if signs is None else np.sign(np.asarray(signs, float))
    if s.shape != p.shape:
        raise ValueError(f"{p.size} p-values but {s.size} signs")
    z = np.sum(s * stats.norm.isf(p / 2)) / np.sqrt(p.size)
    return float(2 * stats.norm.sf(abs(z)))

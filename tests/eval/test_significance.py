import numpy as np
import pytest
from scipy import stats

from grasp_core.eval.significance import mcnemar, stouffer


def pairs(both, a_only, b_only, neither):
    a = [True] * both + [True] * a_only + [False] * b_only + [False] * neither
    b = [True] * both + [False] * a_only + [True] * b_only + [False] * neither
    return np.array(a), np.array(b)


def test_mcnemar_exact_for_few_discordant_pairs():
    # b=1, c=5: p = 2 * P(X <= 1 | n=6) = 2 * (1 + 6) / 64 = 0.21875
    stat, p = mcnemar(*pairs(10, 1, 5, 4))
    assert stat == 1 and p == pytest.approx(0.21875)
    # b=0, c=8: p = 2 / 256
    assert mcnemar(*pairs(0, 0, 8, 0))[1] == pytest.approx(2 / 256)
    # symmetric: p capped at 1
    assert mcnemar(*pairs(3, 4, 4, 3)) == (4.0, 1.0)


def test_mcnemar_chi_square_with_continuity_correction():
    # b=40, c=20: (|40-20|-1)^2/60 = 361/60
    stat, p = mcnemar(*pairs(100, 40, 20, 50))
    assert stat == pytest.approx(361 / 60) and p == pytest.approx(stats.chi2.sf(361 / 60, 1))
    assert p == pytest.approx(0.014171, abs=1e-5)


def test_mcnemar_edge_cases():
    assert mcnemar(*pairs(5, 0, 0, 5)) == (0.0, 1.0)
    with pytest.raises(ValueError, match="differ in length"):
        mcnemar([True], [True, False])


def test_stouffer_hand_computed():
    # z = Φ^-1(1 - 0.05/2) = 1.959964 twice -> Z = 2*1.959964/√2 = 2.771808 -> p = 0.005575
    assert stouffer([0.05, 0.05]) == pytest.approx(0.0055746, abs=1e-6)
    assert stouffer([0.05, 0.05], signs=[1, -1]) == pytest.approx(1.0)
    assert stouffer([0.2]) == pytest.approx(0.2)
    # one-sided equivalence with scipy's Stouffer on the halved p-values
    p = [0.01, 0.3, 0.04]
    one_sided = stats.combine_pvalues(np.array(p) / 2, method="stouffer").pvalue
    assert stouffer(p) == pytest.approx(2 * one_sided)
    with pytest.raises(ValueError):
        stouffer([0.1, 0.2], signs=[1])

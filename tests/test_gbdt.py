"""The numpy tree evaluator gives LightGBM's own scores bit for bit, whatever the missing values, and its TreeSHAP
contributions to rounding."""

import lightgbm as lgb
import numpy as np
import pytest

from grasp_core.errors import CorruptArtifactError
from grasp_core.gbdt import load_booster


def _ranker(seed: int, **params) -> tuple[lgb.Booster, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(600, 7))
    X[rng.random(X.shape) < 0.1] = np.nan
    X[rng.random(X.shape) < 0.1] = 0.0
    X[:, 3] = rng.integers(0, 3, len(X))  # a few distinct values: exact ties with thresholds
    y = (np.nan_to_num(X[:, 0]) + (X[:, 3] == 1) + rng.normal(scale=0.5, size=len(X)) > 0.5).astype(int)
    y += np.nan_to_num(X[:, 1]) > 1
    data = lgb.Dataset(X, y, group=[20] * 30)
    base = {"objective": "lambdarank", "num_leaves": 15, "min_data_in_leaf": 5, "verbose": -1, "seed": seed}
    return lgb.train({**base, **params}, data, num_boost_round=40), X


@pytest.mark.parametrize(
    "params", [{}, {"zero_as_missing": True}, {"use_missing": False}, {"max_depth": 2, "num_leaves": 4}]
)
def test_scores_are_lightgbms_bit_for_bit(tmp_path, params):
    booster, X = _ranker(3, **params)
    booster.save_model(str(tmp_path / "m.txt"))
    ours = load_booster(tmp_path / "m.txt")
    rows = np.concatenate([X, np.full((1, 7), np.nan), np.zeros((1, 7)), X[:5] + 1e-36])
    assert ours.num_feature() == 7 and ours.num_trees() == booster.num_trees()
    np.testing.assert_array_equal(ours.predict(rows), booster.predict(rows, num_threads=1))
    np.testing.assert_array_equal(ours.predict(rows.astype(np.float32)), booster.predict(rows.astype(np.float32)))
    np.testing.assert_array_equal(ours.predict(rows[0]), booster.predict(rows[:1]))
    assert ours.predict(rows[:0]).shape == (0,)
    explained = rows[[0, 1, 2, -3, -2, -1]]  # a row of NaN and a row of zeros among them
    contrib = ours.predict(explained, pred_contrib=True)  # TreeSHAP in closed form, not LightGBM's code
    np.testing.assert_allclose(contrib, booster.predict(explained, pred_contrib=True), rtol=0, atol=1e-12)
    assert ours.predict(rows[:0], pred_contrib=True).shape == (0, 8)


def test_a_model_with_a_single_leaf_tree_scores_its_constant(tmp_path):
    X = np.zeros((40, 2))
    booster = lgb.train({"objective": "regression", "verbose": -1}, lgb.Dataset(X, np.ones(40)), num_boost_round=2)
    booster.save_model(str(tmp_path / "m.txt"))
    ours = load_booster(tmp_path / "m.txt")
    np.testing.assert_array_equal(ours.predict(X[:3]), booster.predict(X[:3]))
    np.testing.assert_allclose(ours.predict(X[:3], pred_contrib=True), booster.predict(X[:3], pred_contrib=True))


def test_wrong_width_and_a_broken_file_are_refused_in_one_line(tmp_path):
    booster, X = _ranker(1)
    booster.save_model(str(tmp_path / "m.txt"))
    with pytest.raises(ValueError, match="7 features, the rows 6"):
        load_booster(tmp_path / "m.txt").predict(X[:, :6])
    (tmp_path / "m.txt").write_bytes((tmp_path / "m.txt").read_bytes()[:-300])
    with pytest.raises(CorruptArtifactError, match="rematerialize the reranker asset"):
        load_booster(tmp_path / "m.txt")

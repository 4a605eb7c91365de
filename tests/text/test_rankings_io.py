import numpy as np
import pytest

from grasp_core.errors import CorruptArtifactError, MissingArtifactError
from grasp_core.ranking import Ranking
from grasp_core.text.rankings_io import read_rankings, write_rankings


def test_round_trip_keeps_ids_scores_and_order(tmp_path):
    rankings = [
        Ranking.from_scores([5, 2, 9], [0.1, 0.7, 0.3]),
        Ranking.empty(),
        Ranking(np.array([3]), np.array([1.5], np.float32)),
    ]
    path = write_rankings(tmp_path / "r" / "text.parquet", [11, 7, 42], rankings)
    back = read_rankings(path)
    assert list(back) == [11, 7, 42]
    for qid, r in zip([11, 7, 42], rankings):
        assert back[qid].node_ids.dtype == np.int64 and back[qid].scores.dtype == np.float32
        np.testing.assert_array_equal(back[qid].node_ids, r.node_ids)
        np.testing.assert_array_equal(back[qid].scores, r.scores)
    assert not [p for p in path.parent.iterdir() if p.name != "text.parquet"]  # no temp files left


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="2 qids but 1 rankings"):
        write_rankings(tmp_path / "x.parquet", [1, 2], [Ranking.empty()])
    with pytest.raises(MissingArtifactError):
        read_rankings(tmp_path / "missing.parquet")
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(CorruptArtifactError, match="bad.parquet"):
        read_rankings(tmp_path / "bad.parquet")

"""The tests' form of :func:`grasp_core.eval.parity.answer_parity`: every evaluated query's served answers equal
the evaluation's."""

from __future__ import annotations

from grasp_core.components import Components
from grasp_core.eval.parity import answer_parity


def assert_retrieve_answers_as_evaluated(ws: Components) -> dict[str, int]:
    """Assert no query's answer differs; returns the number of queries per split."""
    report = answer_parity(ws)
    assert {key: row["differ"] for key, row in report.items()} == {key: [] for key in report}
    return {key.split("/", 1)[1]: int(row["queries"]) for key, row in report.items()}  # type: ignore[call-overload]

"""The tests' form of :func:`grasp_core.pipeline.answer_parity.answer_parity`: every evaluated query's served answers equal
the evaluation's."""

from __future__ import annotations

from grasp_core.components import Components
from grasp_core.pipeline.answer_parity import answer_parity


def assert_retrieve_answers_as_evaluated(components: Components) -> dict[str, int]:
    """Assert no query's answer differs; returns the number of queries per split."""
    report = answer_parity(components)
    assert {key: row["differ"] for key, row in report.items()} == {key: [] for key in report}
    return {key.split("/", 1)[1]: int(row["queries"]) for key, row in report.items()}  # type: ignore[call-overload]

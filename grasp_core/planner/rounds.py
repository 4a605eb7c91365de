"""The RL rounds of planner training and the validation gate between them.

Round 1 starts from the SFT planner, each later round from the previous round's kept planner. A round
writes its planner whatever its score, with a gate file: the validation fused Hit@1 it reached and the one
of the planner it started from, on the validation queries that select checkpoints and on a held-out part of
validation that selects nothing. The gate passes when fused Hit@1 rose on the held-out part (strictly: a round
that only ties its start did not learn anything validation can see) and did not fall on the selecting part; a
rise on the selecting queries alone is what selection overfits, and does not pass. A round never
starts from a planner whose gate failed, and the served planner is the last round whose gate passed (else
the SFT planner).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grasp_core.io import is_complete, read_json, write_json

ROUNDS = ("1", "2")
GATE_FILE = "gate.json"


@dataclass(frozen=True)
class Gate:
    val_fused_hit1: float  # the round's kept planner, on the validation queries that selected it
    previous: float  # the planner the round started from, on the same queries
    heldout_fused_hit1: float | None = None  # the round's planner on the held-out validation queries
    heldout_previous: float | None = None  # its start on them

    @property
    def passed(self) -> bool:
        """The gate rule: fused Hit@1 rose above the round's start (a tie fails) on the held-out validation queries,
        which chose nothing, and did not fall on the selecting ones (a rise selection overfits does not pass). A
        start without a held-out reading: it rose on validation."""
        if self.heldout_fused_hit1 is None or self.heldout_previous is None:
            return self.val_fused_hit1 > self.previous
        return self.heldout_fused_hit1 > self.heldout_previous and self.val_fused_hit1 >= self.previous

    def to_json(self) -> dict:
        return {
            "val_fused_hit1": self.val_fused_hit1,
            "previous": self.previous,
            "heldout_fused_hit1": self.heldout_fused_hit1,
            "heldout_previous": self.heldout_previous,
            "passed": self.passed,
        }

    def write(self, planner_dir: Path) -> None:
        write_json(planner_dir / GATE_FILE, self.to_json())

    @classmethod
    def read(cls, planner_dir: Path) -> Gate:
        data = read_json(planner_dir / GATE_FILE)
        heldout, heldout_previous = data.get("heldout_fused_hit1"), data.get("heldout_previous")
        return cls(
            float(data["val_fused_hit1"]),
            float(data["previous"]),
            None if heldout is None else float(heldout),
            None if heldout_previous is None else float(heldout_previous),
        )


def previous_round(round_key: str) -> str | None:
    """The round before ``round_key`` (None for the first, which starts from the SFT planner)."""
    i = ROUNDS.index(round_key)
    return ROUNDS[i - 1] if i else None


def next_round(round_key: str) -> str | None:
    """The round after ``round_key`` (None after the last)."""
    i = ROUNDS.index(round_key)
    return ROUNDS[i + 1] if i + 1 < len(ROUNDS) else None


def gate_failed(planner_dir: Path) -> bool:
    """True when a round's planner was written but its gate did not pass."""
    return is_complete(planner_dir) and not Gate.read(planner_dir).passed


def gate_passed(planner_dir: Path) -> bool:
    """True when a round's planner was written and its gate passed."""
    return is_complete(planner_dir) and Gate.read(planner_dir).passed

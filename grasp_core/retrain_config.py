"""Settings of learning from use: which confirmed questions are held out, when growth retrains, and the promotion
guard (profile sections ``feedback`` and ``retrain``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class FeedbackConfig:
    holdout_share: float = field(
        default=0.2,
        metadata={
            "help": "share of the confirmed feedback questions kept out of training as the `feedback` split (chosen "
            "by a hash of the question, so a question never moves between splits)"
        },
    )


@dataclass(frozen=True)
class RetrainConfig:
    retrain_after: int = field(
        default=50,
        metadata={
            "help": "confirmed feedback questions that must have arrived since the last observation before the "
            "`feedback_growth` sensor requests a retrain"
        },
    )
    guard_queries: int = field(
        default=300, metadata={"help": "val questions (the first N) the promotion guard answers with both systems"}
    )
    guard_tolerance: float = field(
        default=1.0,
        metadata={
            "help": "Hit@1 points a retrained system may fall below the served one (on the guard's val questions, "
            "and on the held-out `feedback` questions) and still be promoted"
        },
    )

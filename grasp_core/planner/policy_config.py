"""The plan-selection policy's shape (kept apart from the model code, so reading a profile imports no torch)."""

from __future__ import annotations

from dataclasses import dataclass, field

HEADS = ("features", "linear", "mlp")


@dataclass(frozen=True)
class PolicyConfig:
    head: str = field(default="mlp", metadata={"help": f"scoring head on frozen encoder features: {HEADS}"})
    hidden: int = field(default=64, metadata={"help": "hidden units of the mlp head"})
    max_query_tokens: int = field(default=64, metadata={"help": "truncation of the query for the encoder"})

"""What one plan execution did: the record behind every graph ranking (debugging, rewards, explanations)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from grasp_core.plan.model import Plan

EXECUTION_STAGES = ("validate", "link", "traverse", "rescore")


@dataclass(frozen=True)
class Binding:
    node_id: int
    name: str
    score: float  # cosine of the anchor text to the node's name (or document, match_mode doc)


@dataclass
class Trace:
    plan: Plan | None = None  # the resolved plan (types filled in), None when it did not parse/validate
    bindings: dict[str, list[Binding]] = field(default_factory=dict)  # anchor var -> kept matches, best first
    cypher: str = ""  # a "most" plan: one query per path, separated by ";"
    params: dict[str, Any] = field(default_factory=dict)  # a "most" plan: each query's, by its position ("0", …)
    candidates: int = 0  # target nodes the traversal (or the zero-hop search) returned
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(EXECUTION_STAGES, 0.0))
    error: str | None = None  # reason code when the ranking is empty: a PlanError reason, no_bindings, ...
    message: str = ""

    @property
    def total_seconds(self) -> float:
        return sum(self.seconds.values())

    def to_json(self) -> dict:
        out = asdict(self)
        out["plan"] = self.plan.to_json() if self.plan is not None else None
        return out

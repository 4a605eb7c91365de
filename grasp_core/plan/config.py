"""How a plan is executed: anchor binding, traversal and dense rescoring (profile section ``execution``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class ExecutionConfig:
    name_k: int = field(default=5, metadata={"help": "Bindings kept per anchor with match_mode name (paper: 5)."})
    name_tau: float = field(
        default=0.95, metadata={"help": "Name mode: keep matches with cosine >= tau x best (0.95)."}
    )
    doc_k: int = field(default=10, metadata={"help": "Bindings kept per anchor with match_mode doc (paper: 10)."})
    doc_tau: float = field(default=0.90, metadata={"help": "Doc mode: keep matches with cosine >= tau x best (0.90)."})
    exact_rescore_max: int = field(
        default=20_000,
        metadata={
            "help": "Rescore exactly up to this many candidates; beyond, nearest-neighbour search of this depth."
        },
    )
    traversal: Literal["arrays", "store"] = field(
        default="arrays",
        metadata={
            "help": "arrays = walk the graph's adjacency lists in process (much faster than LadybugDB at Prime "
            "scale: benchmarks/results/plan_execution.json); store = run the plan's Cypher query on the graph "
            "store. Same results."
        },
    )
    max_frontier: int | None = field(
        default=None,
        metadata={
            "help": "Nodes kept per main-chain traversal hop, best anchor score first (ties: lower id); None = "
            "all (exact). A cap bounds the work of a hop through hubs but drops tied answers."
        },
    )
    top_k: int = field(default=100, metadata={"help": "Length of the graph ranking."})
    max_tokens: int = field(default=512, metadata={"help": "Truncation of anchor, relevance and query texts."})

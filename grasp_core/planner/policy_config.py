"""The plan-selection policy's shape (kept apart from the model code, so reading a profile imports no torch)."""

from __future__ import annotations

from dataclasses import dataclass, field

HEADS = ("features", "linear", "mlp")
# the plan features of every candidate (:class:`~grasp_core.planner.policy.Featurizer`), in column order
FEATURES = (
    "abstain",
    "zero_hop",
    "term_lookup",
    "hops",
    "two_anchors",
    "doc_mode",
    "link_cosine",
    "log_degree",
    "role_anchor",
    "role_target",
    "row_best_type",
    "mention_share",
    "verbal_cosine",
    "path_known",
)


@dataclass(frozen=True)
class PolicyConfig:
    head: str = field(default="mlp", metadata={"help": f"scoring head on frozen encoder features: {HEADS}"})
    hidden: int = field(default=64, metadata={"help": "hidden units of the mlp head"})
    max_query_tokens: int = field(default=64, metadata={"help": "truncation of the query for the encoder"})


@dataclass(frozen=True)
class ChooserConfig:
    enabled: bool = field(
        default=True, metadata={"help": "train a chooser over executed candidates in the RL rounds (False: greedy)"}
    )
    shortlist: tuple[int, ...] = field(
        default=(1, 3, 5, 8),
        metadata={"help": "policy candidates executed per question, tried on validation (ABSTAIN is always added)"},
    )
    n_estimators: int = field(default=300, metadata={"help": "LightGBM boosting rounds"})
    num_leaves: int = field(default=7, metadata={"help": "LightGBM leaves per tree"})
    learning_rate: float = field(default=0.05, metadata={"help": "LightGBM learning rate"})
    min_child_samples: int = field(default=20, metadata={"help": "LightGBM: fewest candidates in a leaf"})
    seed: int = field(default=0, metadata={"help": "LightGBM seed (training runs on one thread, deterministic)"})

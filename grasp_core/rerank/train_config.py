"""The settings of reranker training (profile section ``reranker_train``), apart from the trainer so that
reading a profile (as serving does) never loads training code."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RerankerTrainConfig:
    group_size: int = field(
        default=24, metadata={"help": "G: candidates per query per step (1 positive + G-1 hard negatives)."}
    )
    epochs: float = field(default=3.0, metadata={"help": "Passes over the training queries (fractions allowed)."})
    lr: float = field(default=3e-5, metadata={"help": "Peak learning rate (cosine decay after warmup)."})
    warmup_ratio: float = field(default=0.05, metadata={"help": "Share of the steps with linear warmup."})
    betas: tuple[float, float] = field(default=(0.9, 0.95), metadata={"help": "AdamW betas."})
    weight_decay: float = field(default=0.1, metadata={"help": "AdamW weight decay."})
    max_grad_norm: float = field(default=1.0, metadata={"help": "Gradient clipping (global L2 norm)."})
    queries_per_batch: int = field(default=16, metadata={"help": "Queries (groups) per optimizer step."})
    micro_batch_queries: int = field(
        default=1,
        metadata={"help": "Groups per forward/backward pass (gradient accumulation up to queries_per_batch)."},
    )
    checkpoint_every_epochs: float = field(
        default=0.5, metadata={"help": "Checkpoint + validate every this many epochs."}
    )
    validate_base: bool = field(
        default=True,
        metadata={
            "help": "Validate the untrained model as candidate 0 (pointless when its scoring "
            "head is new and random, as the cross-encoder's is)."
        },
    )
    seed: int = field(default=0, metadata={"help": "Seed of data order, group sampling and dropout."})

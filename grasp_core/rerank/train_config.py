"""The settings of reranker training (profile sections ``reranker_train`` and ``ltr``), apart from the trainers
so that reading a profile (as serving does) never loads training code."""

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


@dataclass(frozen=True)
class LTRConfig:
    num_leaves: int = field(default=31, metadata={"help": "Leaves per tree."})
    learning_rate: float = field(default=0.05, metadata={"help": "Shrinkage per boosting round."})
    max_rounds: int = field(default=1000, metadata={"help": "Boosting rounds at most (early stopping ends sooner)."})
    early_stopping_rounds: int = field(
        default=150, metadata={"help": "Stop after this many rounds without a better validation NDCG."}
    )
    early_stopping_at: int = field(
        default=10,
        metadata={"help": "Validation NDCG at this depth stops the boosting (smoother than @1 on binary labels)."},
    )
    min_data_in_leaf: int = field(default=20, metadata={"help": "Candidates per leaf at least."})
    feature_fraction: float = field(default=0.8, metadata={"help": "Share of features each tree sees."})
    bagging_fraction: float = field(default=0.8, metadata={"help": "Share of candidates each tree sees."})
    lambda_l2: float = field(default=1.0, metadata={"help": "L2 regularization of leaf values."})
    seed: int = field(default=0, metadata={"help": "Seed of bagging and feature sampling."})
    num_threads: int = field(default=2, metadata={"help": "LightGBM threads."})
    train_queries: int | None = field(
        default=None, metadata={"help": "Training queries whose fused lists are mined (None: every train query)."}
    )
    val_queries: int | None = field(
        default=None,
        metadata={"help": "Validation queries for early stopping and the (w, k) grid (None: every val query)."},
    )

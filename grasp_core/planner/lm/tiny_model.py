"""The ``cpu`` planner model: a small Qwen3-architecture causal LM built from a config, trained from scratch.

A ~4M-parameter model of this shape learns the plan format in minutes on two cores, where a pretrained 135M
model with LoRA is far slower per token (``docs/decisions.md``). The defaults give ~2.4M
non-embedding parameters plus ``vocab × hidden`` tied embeddings (~4M at a 6k vocabulary).
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase, Qwen3Config, Qwen3ForCausalLM

from grasp_core.io import atomic_dir
from grasp_core.planner.config import TinyModelConfig


def build_tiny_qwen3(tokenizer: PreTrainedTokenizerBase, cfg: TinyModelConfig = TinyModelConfig()) -> Qwen3ForCausalLM:
    """A randomly initialized Qwen3ForCausalLM sized to ``tokenizer`` (float32, tied embeddings)."""
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        head_dim=cfg.hidden_size // cfg.num_heads,
        max_position_embeddings=cfg.max_positions,
        rope_theta=cfg.rope_theta,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(cfg.seed)
    model = Qwen3ForCausalLM(config).to(torch.float32)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    return model


def save_model(model: Qwen3ForCausalLM, tokenizer: PreTrainedTokenizerBase, out_dir: str | Path) -> Path:
    """Write model (safetensors) and tokenizer together, atomically, loadable by ``TransformersLLM``."""
    with atomic_dir(out_dir) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return Path(out_dir)

"""Tiny stand-ins for the `gpu` profile's three models, built from config into one models directory.

``Qwen3-Embedding-4B`` (a Qwen3 backbone, last-token pooled by the encoder), ``Qwen3-1.7B`` (a causal Qwen3 with a
byte-level BPE trained on the SKB, so the plan grammar can spell anything) and ``Qwen3-Reranker-0.6B`` (a causal
Qwen3 whose word-level vocabulary has ``yes`` and ``no`` as single tokens): what ``$GRASP_MODEL_DIR`` holds for the
`gpu-smoke` profile. Random weights; only the code paths are under test.
"""

from __future__ import annotations

from pathlib import Path

import torch

from grasp_core.planner.config import PlannerModelConfig, TinyModelConfig
from grasp_core.planner.lm.base import base_model_path, build_planner_base
from grasp_core.planner.lm.prompt import planner_system_prompt
from grasp_core.rerank.scorers import QWEN3_PREFIX, QWEN3_SUFFIX, reranker_instruction
from grasp_core.skb.format import SKB


def _word_tokenizer(texts: list[str], eos: str):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    specials = ["[PAD]", "[UNK]", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>"]
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=specials, vocab_size=4000))
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", eos_token=eos)


def tiny_qwen3_config(vocab: int, positions: int):
    """The tests' tiny Qwen3 shape (2 layers, hidden 32), built from config: no download."""
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=positions,
        pad_token_id=0,
    )


def build_gpu_stand_ins(skb: SKB, out: Path) -> Path:
    """Write the three stand-ins under ``out`` (returned: the ``$GRASP_MODEL_DIR`` to use)."""
    from transformers import AutoModelForCausalLM, Qwen3Model

    docs = [skb.document(i) for i in range(min(skb.num_nodes, 2000))]
    torch.manual_seed(0)
    enc = _word_tokenizer(docs, eos="<|endoftext|>")
    enc.save_pretrained(out / "Qwen3-Embedding-4B")
    Qwen3Model(tiny_qwen3_config(enc.vocab_size, 512)).save_pretrained(out / "Qwen3-Embedding-4B")

    rer = _word_tokenizer([QWEN3_PREFIX, QWEN3_SUFFIX, reranker_instruction(), "yes no", *docs], eos="<|im_end|>")
    rer.save_pretrained(out / "Qwen3-Reranker-0.6B")
    AutoModelForCausalLM.from_config(tiny_qwen3_config(rer.vocab_size, 512)).save_pretrained(
        out / "Qwen3-Reranker-0.6B"
    )

    tiny = TinyModelConfig(
        hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=64, max_positions=4096
    )
    # the system prompt twice in the BPE's corpus, so its merges learn the prompt's wording as a pretrained
    # tokenizer knows English: a prompt is then ~1.1k tokens, not ~2k (attention is most of the test's time)
    system = planner_system_prompt(skb.schema, compact=False)
    build_planner_base(
        skb,
        [system, system],
        [],
        PlannerModelConfig(tiny=tiny, vocab_size=4096, tokenizer_node_texts=500),
        out / "base",
    )
    Path(base_model_path(out / "base")).rename(out / "Qwen3-1.7B")
    return out

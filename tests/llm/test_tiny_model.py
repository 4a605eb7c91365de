from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM

from grasp_core.io import is_complete
from grasp_core.planner.config import TinyModelConfig
from grasp_core.planner.lm.tiny_model import build_tiny_qwen3
from tests.llm.conftest import TINY
from tests.llm.helpers import PLANS, plan_text


def test_default_config_is_the_4m_parameter_planner(tokenizer):
    model = build_tiny_qwen3(tokenizer)
    cfg = model.config
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads) == (256, 4, 4, 2)
    assert cfg.vocab_size == len(tokenizer) and cfg.max_position_embeddings == 1024 and cfg.tie_word_embeddings
    non_embedding = sum(p.numel() for n, p in model.named_parameters() if "embed" not in n)
    assert 2.0e6 < non_embedding < 3.0e6


def test_builds_deterministically_saves_and_reloads(tokenizer, model_dir):
    a, b = build_tiny_qwen3(tokenizer, TINY), build_tiny_qwen3(tokenizer, TINY)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert not torch.equal(
        build_tiny_qwen3(tokenizer, TinyModelConfig(**{**TINY.__dict__, "seed": 1})).lm_head.weight, a.lm_head.weight
    )
    assert is_complete(model_dir) and (model_dir / "model.safetensors").exists()
    loaded = AutoModelForCausalLM.from_pretrained(model_dir)
    ids = tokenizer(plan_text(PLANS[0]), return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert torch.allclose(loaded(ids).logits, a(ids).logits, atol=1e-5)


def test_a_few_training_steps_fit_one_plan(tokenizer):
    model = build_tiny_qwen3(tokenizer, TINY)
    ids = tokenizer(plan_text(PLANS[0]), return_tensors="pt")["input_ids"]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(60):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0]

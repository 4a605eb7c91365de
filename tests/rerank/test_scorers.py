"""Scorers: the Qwen3-Reranker-style causal LM with LoRA on a tiny Qwen3 built from config, the MiniLM
cross-encoder, and missing model paths."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grasp_core.errors import MissingModelError
from grasp_core.rerank.scorers import (
    QWEN3_PREFIX,
    QWEN3_SUFFIX,
    CausalLMScorer,
    CausalLMScorerConfig,
    CrossEncoderScorer,
    CrossEncoderScorerConfig,
    Group,
    reranker_instruction,
)


def test_causal_lm_scores_are_the_base_models_yes_minus_no_logit(tiny_qwen3, qwen_cfg, qwen_sample):
    from transformers import AutoModelForCausalLM

    QUERY, DOCS = qwen_sample

    scorer = CausalLMScorer(qwen_cfg())
    scores = scorer.score(QUERY, DOCS)
    assert scores.shape == (3,) and scores.dtype == np.float32
    # LoRA starts as the identity: the score is the plain model's logit(yes) - logit(no) after the prompt
    base = AutoModelForCausalLM.from_pretrained(str(tiny_qwen3), dtype=torch.float32).eval()
    tok = scorer.tokenizer
    for doc, score in zip(DOCS, scores):
        turn = f"<Instruct>: {reranker_instruction()}\n<Query>: {QUERY}\n<Document>: {doc}"
        text = QWEN3_PREFIX + turn + QWEN3_SUFFIX
        ids = torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])
        with torch.no_grad():
            last = base(input_ids=ids).logits[0, -1]
        assert score == pytest.approx(float(last[scorer.yes_id] - last[scorer.no_id]), abs=1e-4)
    # left padding does not change a score (batches of 2: the short document is padded next to a long one)
    assert scorer.score(QUERY, DOCS[1:2])[0] == pytest.approx(scores[1], abs=1e-4)
    # the prompt costs exactly prompt_tokens outside the document
    ids = tok(
        QWEN3_PREFIX + f"<Instruct>: {reranker_instruction()}\n<Query>: {QUERY}\n<Document>: " + QWEN3_SUFFIX,
        add_special_tokens=False,
    )["input_ids"]
    assert scorer.prompt_tokens(QUERY) == len(ids)


def test_causal_lm_lora_step_changes_only_the_adapters(qwen_cfg, qwen_sample):
    QUERY, DOCS = qwen_sample
    scorer = CausalLMScorer(qwen_cfg(gradient_checkpointing=True))  # as in the gpu profile
    named = dict(scorer.model.named_parameters())
    trainable = {n for n, p in named.items() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    assert any("mlp.down_proj.lora_A" in n for n in trainable)
    assert any("self_attn.q_proj.lora_B" in n for n in trainable)
    lora = next(iter(scorer.model.peft_config.values()))
    assert (lora.r, lora.lora_alpha, lora.lora_dropout) == (32, 64, 0.05)
    before = {n: p.detach().clone() for n, p in named.items()}
    optimizer = torch.optim.AdamW(scorer.trainable_parameters(), lr=1e-2)
    logits = scorer.group_logits([Group(QUERY, DOCS), Group("a gene", DOCS[::-1])])
    assert logits.shape == (2, 3) and logits.requires_grad
    torch.nn.functional.cross_entropy(logits, torch.zeros(2, dtype=torch.long)).backward()
    optimizer.step()
    changed = {n for n, p in named.items() if not torch.equal(p.detach(), before[n])}
    assert changed == {n for n in trainable if "lora_B" in n or "lora_A" in n}
    assert any("lora_B" in n for n in changed)
    assert not np.allclose(scorer.score(QUERY, DOCS), [0, 0, 0]) and scorer.trainable_state().keys() == trainable


def test_cross_encoder_from_minilm(qwen_sample):
    QUERY, DOCS = qwen_sample
    scorer = CrossEncoderScorer(CrossEncoderScorerConfig(batch_size=2))
    assert type(scorer.model).__name__ == "BertForSequenceClassification"
    assert scorer.model.config.num_labels == 1
    scores = scorer.score(QUERY, DOCS)
    assert scores.shape == (3,) and np.isfinite(scores).all()
    # batching does not change a score
    assert scorer.score(QUERY, DOCS[2:])[0] == pytest.approx(scores[2], abs=1e-5)
    # the head's initialization is seeded: a second load scores identically
    np.testing.assert_allclose(CrossEncoderScorer(CrossEncoderScorerConfig()).score(QUERY, DOCS), scores, atol=1e-5)
    # [CLS] query [SEP] ... [SEP]
    n_query = len(scorer.tokenizer(QUERY, add_special_tokens=False)["input_ids"])
    assert scorer.prompt_tokens(QUERY) == n_query + 3
    assert all(p.requires_grad for p in scorer.model.parameters())


def test_missing_model_paths_name_the_setting(tmp_path):
    with pytest.raises(MissingModelError, match="CausalLMScorerConfig.model_path"):
        CausalLMScorer(CausalLMScorerConfig(model_path=None))
    with pytest.raises(MissingModelError, match="CausalLMScorerConfig.model_path"):
        CausalLMScorer(CausalLMScorerConfig(model_path=str(tmp_path / "nope")))
    with pytest.raises(MissingModelError, match="CrossEncoderScorerConfig.model_path"):
        CrossEncoderScorer(CrossEncoderScorerConfig(model_path=str(tmp_path)))

"""Listwise reranker training on a tiny SKB with the real MiniLM cross-encoder: learning, checkpoints,
selection, exact resumption and corrupt checkpoints; plus a LoRA run on a tiny Qwen3."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from grasp_core.errors import CorruptArtifactError, GraspError
from grasp_core.io import is_complete, read_json
from grasp_core.ranking import Ranking
from grasp_core.rerank.config import CrossEncoderScorerConfig, DocumentConfig, RerankerTrainConfig
from grasp_core.rerank.documents import CandidateDocumentBuilder
from grasp_core.rerank.hard_negatives import mine_hard_negatives
from grasp_core.rerank.inference import RerankValidation, rerank_batch
from grasp_core.rerank.scorers import CrossEncoderScorer
from grasp_core.rerank.train import train_reranker
from grasp_core.rerank.weights import load_trained_weights

QUERIES = pd.DataFrame(
    {
        "qid": [10, 11, 12, 13],
        "query": [
            "which gene associated with Marfan syndrome encodes fibrillin",
            "Marfan phenotype with displacement of the lens",
            "aortic aneurysm syndrome associated with TGFBR2",
            "phenotype of height above average",
        ],
    }
)
ANSWERS = [[1], [4], [6], [3]]
# fused rankings that put the gold answer second or third
FUSED = [
    Ranking.from_scores(np.array(ids), np.array([4.0, 3.0, 2.0, 1.0]))
    for ids in ([2, 1, 0, 6], [3, 5, 4, 0], [0, 6, 2, 5], [4, 3, 5, 0])
]


class Interrupt(Exception):
    pass


@pytest.fixture(scope="module")
def hard_negs():
    negs = mine_hard_negatives(QUERIES["qid"].tolist(), FUSED, ANSWERS)
    assert negs["negatives"].map(len).tolist() == [3, 3, 3, 3]
    return negs


def scorer():
    return CrossEncoderScorer(CrossEncoderScorerConfig(max_length=64))


CFG = RerankerTrainConfig(
    group_size=4,
    epochs=4,
    lr=5e-4,
    warmup_ratio=0.0,
    queries_per_batch=4,
    micro_batch_queries=2,
    checkpoint_every_epochs=2,
    seed=1,
)


def run(out_dir, builder, hard_negs, model=None, stop_at=None, cfg=CFG, validation=None):
    model = model or scorer()
    logs = []

    def log_fn(step, metrics):
        if stop_at is not None and step == stop_at and "loss" in metrics:
            raise Interrupt
        logs.append((step, metrics))

    val_fn = validation or RerankValidation(FUSED, QUERIES["query"].tolist(), ANSWERS, builder, K=4)
    result = train_reranker(model, builder, hard_negs, QUERIES, val_fn, cfg, out_dir, log_fn)
    return model, result, logs


def weights(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.model.named_parameters()}


def test_training_learns_selects_and_resumes_exactly(tmp_path, minilm_builder, hard_negs):
    base = weights(scorer())
    model, result, logs = run(tmp_path / "straight", minilm_builder, hard_negs)
    losses = [m["loss"] for _, m in logs if "loss" in m]
    assert len(losses) == 4
    assert losses[0] > np.log(4) * 0.8  # an untrained group of 4 is near-uniform
    assert losses[-1] < 0.8 * losses[0]
    after = weights(model)
    assert any(not torch.equal(base[n], after[n]) for n in base)
    assert [h["step"] for h in result.history] == [0, 2, 4]
    assert [s for s, m in logs if "val_score" in m] == [0, 2, 4]
    best = max(result.history, key=lambda h: (h["val"], -h["step"]))
    assert (result.best_step, result.best_val) == (best["step"], best["val"])
    assert result.best_val > result.history[0]["val"]  # training beat the base model on validation
    assert is_complete(result.best_dir) and read_json(result.best_dir / "selection.json")["best_step"] == best["step"]
    selected = weights(model)
    # load_trained_weights restores the selected weights into a fresh scorer
    fresh = scorer()
    load_trained_weights(fresh, result.best_dir)
    assert all(torch.equal(a, b) for a, b in zip(weights(fresh).values(), selected.values()))
    # only the latest and the best checkpoint stay on disk; only the latest keeps optimizer state
    kept = sorted(p.name for p in (tmp_path / "straight" / "checkpoints").iterdir())
    assert kept == sorted({"step-000004", f"step-{best['step']:06d}"})
    assert [p.parent.name for p in (tmp_path / "straight" / "checkpoints").glob("*/optimizer.pt")] == ["step-000004"]

    # interrupted after the step-2 checkpoint, then resumed: the same history and the same final weights
    with pytest.raises(Interrupt):
        run(tmp_path / "run", minilm_builder, hard_negs, stop_at=3)
    resumed, again, logs = run(tmp_path / "run", minilm_builder, hard_negs)
    assert [s for s, m in logs if "loss" in m] == [3, 4]
    np.testing.assert_allclose([h["val"] for h in again.history], [h["val"] for h in result.history])
    assert again.best_step == result.best_step
    a = load_file(tmp_path / "run" / "checkpoints" / "step-000004" / "weights.safetensors")
    b = load_file(tmp_path / "straight" / "checkpoints" / "step-000004" / "weights.safetensors")
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=1e-5, rtol=1e-4, msg=name)
    # a finished run resumes to the same selection without training
    _, done, logs = run(tmp_path / "run", minilm_builder, hard_negs)
    assert not [m for _, m in logs if "loss" in m] and done.best_step == result.best_step


def test_without_base_validation_the_last_validation_is_reused(tmp_path, minilm_builder, hard_negs):
    validation = RerankValidation(FUSED, QUERIES["query"].tolist(), ANSWERS, minilm_builder, K=4)
    cfg = dataclasses.replace(CFG, validate_base=False)
    model, result, logs = run(tmp_path / "run", minilm_builder, hard_negs, cfg=cfg, validation=validation)
    assert [h["step"] for h in result.history] == [2, 4] and [s for s, m in logs if "val_score" in m] == [2, 4]
    assert not (tmp_path / "run" / "checkpoints" / "step-000000").exists()
    # the items kept from the last validation are what scoring the trained (step 4) weights again gives
    load_trained_weights(model, tmp_path / "run" / "checkpoints" / "step-000004")
    again = rerank_batch(FUSED, QUERIES["query"].tolist(), model, minilm_builder, K=4)
    assert len(validation.last) == len(FUSED)
    for item, fresh, fused, answers in zip(validation.last, again, FUSED, ANSWERS):
        np.testing.assert_allclose(item.scores, fresh.scores, atol=1e-5)
        assert item.fused is fused and list(item.answers) == list(answers)


def test_corrupt_or_foreign_checkpoints_raise_clear_errors(tmp_path, minilm_builder, hard_negs):
    with pytest.raises(Interrupt):
        run(tmp_path / "run", minilm_builder, hard_negs, stop_at=1)
    # a checkpoint written with another configuration or other training data is refused
    with pytest.raises(GraspError, match="another configuration"):
        train_reranker(scorer(), minilm_builder, hard_negs.iloc[:3], QUERIES, lambda s: 0.0, CFG, tmp_path / "run")
    ckpt = tmp_path / "run" / "checkpoints" / "step-000000"
    (ckpt / "weights.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CorruptArtifactError, match="step-000000.*corrupt reranker checkpoint"):
        run(tmp_path / "run", minilm_builder, hard_negs)
    with pytest.raises(CorruptArtifactError, match="corrupt"):
        load_trained_weights(scorer(), ckpt)


def test_lora_training_on_a_tiny_qwen3(tmp_path, minilm_builder, hard_negs, qwen_cfg):
    from grasp_core.rerank.scorers import CausalLMScorer

    model = CausalLMScorer(qwen_cfg(max_length=256))
    cfg = RerankerTrainConfig(group_size=4, epochs=2, lr=1e-3, queries_per_batch=2, checkpoint_every_epochs=1)
    qwen_builder = CandidateDocumentBuilder(
        minilm_builder.skb,
        minilm_builder.node_vectors,
        DocumentConfig(max_input_tokens=256),
        encoder=minilm_builder.encoder,
    )
    result = train_reranker(model, qwen_builder, hard_negs, QUERIES, lambda s: 0.0, cfg, tmp_path / "qwen")
    saved = read_json(result.best_dir / "selection.json")
    assert [h["step"] for h in saved["history"]] == [0, 2, 4] and result.best_step == 0  # ties keep the earliest
    last = CausalLMScorer(qwen_cfg(max_length=256))
    load_trained_weights(last, tmp_path / "qwen" / "checkpoints" / "step-000004")
    lora_b = [p for n, p in last.model.named_parameters() if "lora_B" in n]
    assert lora_b and any(p.abs().sum() > 0 for p in lora_b)  # the adapters trained (B starts at zero)

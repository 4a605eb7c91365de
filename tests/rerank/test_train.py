"""Listwise reranker training on a tiny SKB with the real MiniLM cross-encoder: learning, checkpoints,
selection, exact resumption and corrupt checkpoints; plus a LoRA run on a tiny Qwen3."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from grasp_core.errors import CorruptArtifactError, GraspError
from grasp_core.io import is_complete, read_json
from grasp_core.ranking import Ranking
from grasp_core.rerank.documents import CandidateDocumentBuilder, DocumentConfig
from grasp_core.rerank.hard_negatives import mine_hard_negatives
from grasp_core.rerank.inference import validation_hit1
from grasp_core.rerank.scorers import CrossEncoderScorer, CrossEncoderScorerConfig
from grasp_core.rerank.train import RerankerTrainConfig, load_trained_weights, train_reranker

QUERIES = pd.DataFrame({
    "qid": [10, 11, 12, 13],
    "query": ["which gene associated with Marfan syndrome encodes fibrillin",
              "Marfan phenotype with displacement of the lens",
              "aortic aneurysm syndrome associated with TGFBR2",
              "phenotype of height above average"],
})
ANSWERS = [[1], [4], [6], [3]]
# fused rankings that put the gold answer second or third
FUSED = [Ranking.from_scores(np.array(ids), np.array([4.0, 3.0, 2.0, 1.0]))
         for ids in ([2, 1, 0, 6], [3, 5, 4, 0], [0, 6, 2, 5], [4, 3, 5, 0])]


class Interrupt(Exception):
    pass


@pytest.fixture(scope="module")
def builder(tiny_skb):
    from grasp_core.embed.encoder import EncoderConfig, load_encoder

    encoder = load_encoder(EncoderConfig())
    vectors = encoder.encode(tiny_skb.documents(), max_tokens=512)
    return CandidateDocumentBuilder(tiny_skb, vectors, DocumentConfig(max_input_tokens=128), encoder=encoder)


@pytest.fixture(scope="module")
def hard_negs():
    negs = mine_hard_negatives(QUERIES["qid"].tolist(), FUSED, ANSWERS)
    assert negs["negatives"].map(len).tolist() == [3, 3, 3, 3]
    return negs


def scorer():
    return CrossEncoderScorer(CrossEncoderScorerConfig(max_length=128))


CFG = RerankerTrainConfig(group_size=4, epochs=8, lr=2e-4, warmup_ratio=0.0, queries_per_batch=4,
                          micro_batch_queries=2, checkpoint_every_epochs=2, seed=1)


def run(out_dir, builder, hard_negs, model=None, stop_at=None):
    model = model or scorer()
    logs = []

    def log_fn(step, metrics):
        if stop_at is not None and step == stop_at and "loss" in metrics:
            raise Interrupt
        logs.append((step, metrics))

    val_fn = validation_hit1(FUSED, QUERIES["query"].tolist(), ANSWERS, builder, K=4)
    result = train_reranker(model, builder, hard_negs, QUERIES, val_fn, CFG, out_dir, log_fn)
    return model, result, logs


def weights(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.model.named_parameters()}


def test_training_lowers_the_group_loss_and_selects_on_validation(tmp_path, builder, hard_negs):
    base = weights(scorer())
    model, result, logs = run(tmp_path / "run", builder, hard_negs)
    losses = [m["loss"] for _, m in logs if "loss" in m]
    assert len(losses) == 8
    assert losses[0] > np.log(4) * 0.8  # an untrained group of 4 is near-uniform
    assert np.mean(losses[-2:]) < 0.5 * losses[0]
    after = weights(model)
    assert any(not torch.equal(base[n], after[n]) for n in base)
    assert [h["step"] for h in result.history] == [0, 2, 4, 6, 8]
    assert [s for s, m in logs if "val_score" in m] == [0, 2, 4, 6, 8]
    best = max(result.history, key=lambda h: (h["val"], -h["step"]))
    assert (result.best_step, result.best_val) == (best["step"], best["val"])
    assert result.best_val > result.history[0]["val"]  # training beat the base model on validation
    assert is_complete(result.best_dir) and read_json(result.best_dir / "selection.json")["best_step"] == best["step"]
    # the scorer holds the selected weights, and load_trained_weights restores them into a fresh one
    fresh = scorer()
    load_trained_weights(fresh, result.best_dir)
    assert all(torch.equal(a, b) for a, b in zip(weights(fresh).values(), after.values()))
    # only the latest and the best checkpoint stay on disk; only the latest keeps optimizer state
    kept = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    assert kept == sorted({"step-000008", f"step-{best['step']:06d}"})
    assert [p.parent.name for p in (tmp_path / "run" / "checkpoints").glob("*/optimizer.pt")] == ["step-000008"]


def test_resume_after_interruption_matches_an_uninterrupted_run(tmp_path, builder, hard_negs):
    with pytest.raises(Interrupt):
        run(tmp_path / "run", builder, hard_negs, stop_at=5)
    assert (tmp_path / "run" / "checkpoints" / "step-000004").exists()
    resumed, result, logs = run(tmp_path / "run", builder, hard_negs)
    assert [s for s, m in logs if "loss" in m] == [5, 6, 7, 8]
    straight, reference, _ = run(tmp_path / "straight", builder, hard_negs)
    assert [h["step"] for h in result.history] == [0, 2, 4, 6, 8]
    np.testing.assert_allclose([h["val"] for h in result.history], [h["val"] for h in reference.history])
    for (name, a), b in zip(weights(resumed).items(), weights(straight).values()):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5, msg=name)
    # a finished run resumes to the same selection without training
    _, again, logs = run(tmp_path / "run", builder, hard_negs)
    assert not logs and again.best_step == result.best_step


def test_corrupt_or_foreign_checkpoints_raise_clear_errors(tmp_path, builder, hard_negs):
    with pytest.raises(Interrupt):
        run(tmp_path / "run", builder, hard_negs, stop_at=3)
    ckpt = tmp_path / "run" / "checkpoints" / "step-000002"
    (ckpt / "weights.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CorruptArtifactError, match="step-000002.*corrupt reranker checkpoint"):
        run(tmp_path / "run", builder, hard_negs)
    with pytest.raises(CorruptArtifactError, match="corrupt"):
        load_trained_weights(scorer(), ckpt)
    # a checkpoint written with another configuration is refused
    with pytest.raises(Interrupt):
        run(tmp_path / "other", builder, hard_negs, stop_at=3)
    with pytest.raises(GraspError, match="another configuration"):
        train_reranker(scorer(), builder, hard_negs.iloc[:3], QUERIES, lambda s: 0.0, CFG, tmp_path / "other")


def test_lora_training_on_a_tiny_qwen3(tmp_path, builder, hard_negs, qwen_cfg):
    from grasp_core.rerank.scorers import CausalLMScorer

    model = CausalLMScorer(qwen_cfg(max_length=256))
    cfg = RerankerTrainConfig(group_size=4, epochs=2, lr=1e-3, queries_per_batch=2, checkpoint_every_epochs=1)
    qwen_builder = CandidateDocumentBuilder(builder.skb, builder.node_vectors, DocumentConfig(max_input_tokens=256),
                                            encoder=builder.encoder)
    result = train_reranker(model, qwen_builder, hard_negs, QUERIES, lambda s: 0.0, cfg, tmp_path / "qwen")
    saved = read_json(result.best_dir / "selection.json")
    assert [h["step"] for h in saved["history"]] == [0, 2, 4] and result.best_step == 0  # ties keep the earliest
    last = CausalLMScorer(qwen_cfg(max_length=256))
    load_trained_weights(last, tmp_path / "qwen" / "checkpoints" / "step-000004")
    lora_b = [p for n, p in last.model.named_parameters() if "lora_B" in n]
    assert lora_b and any(p.abs().sum() > 0 for p in lora_b)  # the adapters trained (B starts at zero)

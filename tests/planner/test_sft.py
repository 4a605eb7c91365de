from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from grasp_core.errors import GraspError, MissingModelError
from grasp_core.llm.backends import TransformersLLM
from grasp_core.planner.config import InferenceConfig, SFTTrainingConfig
from grasp_core.planner.lm.checkpoint import load_planner, planner_kind
from grasp_core.planner.lm.generate import plan_queries
from grasp_core.planner.lm.sft import train_sft
from tests.planner.conftest import N_SFT


def weights(path) -> dict[str, torch.Tensor]:
    return load_file(str(path / "model.safetensors"))


def losses(result) -> list[float]:
    return [h["loss"] for h in result["history"] if "loss" in h]


def test_full_sft_learns_and_changes_every_weight(planner_base, sft_planner):
    path, result = sft_planner
    curve = losses(result)
    assert result["examples"] == N_SFT and len(curve) == 36  # 3 epochs × 96 / 8 steps
    assert sum(curve[-3:]) / 3 < 0.5 * sum(curve[:3]) / 3, curve
    before, after = weights(Path(planner_base)), weights(path)
    assert before.keys() == after.keys()
    assert all(not torch.equal(before[k], after[k]) for k in before), [
        k for k in before if torch.equal(before[k], after[k])
    ]
    assert planner_kind(path) == ("full", None)
    assert not (path / "trainer").exists()


def test_lora_sft_trains_adapters_and_the_checkpoint_generates(world, planner_base, sft_examples, tmp_path):
    from peft import PeftModel

    cfg = SFTTrainingConfig(
        n_examples=32,
        epochs=1.0,
        learning_rate=5e-3,
        effective_batch=8,
        per_device_batch=8,
        use_lora=True,
        lora_r=8,
        lora_alpha=16,
        max_length=768,
    )
    train_sft(planner_base, sft_examples[:32], cfg, tmp_path / "lora")
    assert planner_kind(tmp_path / "lora") == ("lora", planner_base)
    adapter = load_file(str(tmp_path / "lora" / "adapter_model.safetensors"))
    lora_b = [v for k, v in adapter.items() if "lora_B" in k]
    assert lora_b and all(v.abs().sum() > 0 for v in lora_b)  # B starts at zero: every adapter moved
    model, tok = load_planner(tmp_path / "lora")
    base, _ = load_planner(planner_base)
    assert not isinstance(model, PeftModel)  # merged on load
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, base.state_dict()[k])]
    assert any("q_proj" in k for k in changed) and any("down_proj" in k for k in changed)
    qids = world.sft_qids()[:3]
    llm = TransformersLLM.from_model(model, tok)
    out = plan_queries(
        llm,
        world.skb.schema,
        [world.queries[q] for q in qids],
        [world.tables[q] for q in qids],
        InferenceConfig(max_new_tokens=200, compact_prompt=True),
    )
    assert all(a.valid for a in out)


def test_missing_or_corrupt_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(MissingModelError, match="planner checkpoint"):
        load_planner(tmp_path / "nothing")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("{not json")
    with pytest.raises(GraspError, match="corrupt"):
        load_planner(tmp_path / "bad")

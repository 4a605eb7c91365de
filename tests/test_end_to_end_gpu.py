"""The whole DAG through Dagster with the `gpu-smoke` profile: the `gpu` profile's code paths on tiny models.

The LM planner (its base a pretrained-model pointer, LoRA SFT and RFT, GRPO with LoRA through TRL on the
grammar-constrained policy, the plan grammar with free text), the causal-LM reranker with LoRA and the
last-token-pooled encoder all run for real; the models are random tiny Qwen3s built from config
(``tests/tiny_models.py``), which is the only difference from the `gpu` profile besides the budgets (a handful of
queries, one optimizer step each: `grasp_core/profiles.py`, ``_gpu_smoke``). Part of the test command.
"""

import pytest

from grasp_core.artifacts import Artifacts
from grasp_core.io import is_complete, read_json
from grasp_core.planner.lm.checkpoint import planner_kind
from grasp_core.profiles import get_profile
from grasp_core.sources.synth import build_synth_skb
from tests.tiny_models import build_gpu_stand_ins

DATASET = "synth-prime"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("e2e_gpu")
    models = build_gpu_stand_ins(build_synth_skb("prime", get_profile("gpu-smoke").dataset.scale), tmp / "models")
    mp = pytest.MonkeyPatch()
    mp.setenv("GRASP_MODEL_DIR", str(models))
    mp.setenv("DAGSTER_HOME", str(tmp / "dagster_home"))
    mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp / 'mlflow.db'}")
    (tmp / "dagster_home").mkdir()
    from grasp_assets.run import run_pipeline

    run_pipeline(DATASET, profile="gpu-smoke", root=str(tmp / "artifacts"))
    yield tmp, models
    mp.undo()


def test_gpu_shaped_profile_materializes_every_asset_with_the_gpu_code_paths(trained):
    tmp, models = trained
    art = Artifacts.for_dataset(DATASET, tmp / "artifacts")
    profile = get_profile("gpu-smoke")
    assert (profile.planner, profile.reranker_kind, profile.encoder.pooling) == ("lm", "causal-lm", "last_token")
    for name in ("node_embeddings", "teacher_plans", "planner_base", "sft_adapter", "reward_table", "reranker"):
        assert is_complete(art.path(name)), name
    for name in ("eval_metrics", "ablations", "latency"):
        assert is_complete(art.path(name)), name
    assert is_complete(art.path("rft_samples", "1")) and is_complete(art.path("planner", "1"))
    # the planner base points at the "pretrained" model, SFT trained LoRA adapters on it, GRPO selected a checkpoint
    assert read_json(art.path("planner_base") / "base.json")["model_path"] == str(models / "Qwen3-1.7B")
    assert planner_kind(art.path("sft_adapter"))[0] == "lora"
    assert read_json(art.path("planner", "1") / "selection.json")["checkpoints"][0]["step"] == 0

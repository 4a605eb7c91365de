"""An OpenAI-compatible endpoint's settings (kept apart from the clients, so reading a profile imports no torch)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EndpointConfig:
    """An OpenAI-compatible chat/completions endpoint (a vLLM server, a hosted API)."""

    base_url: str | None = field(
        default=None, metadata={"help": "endpoint root ending in /v1, e.g. http://127.0.0.1:8000/v1 (None: not used)"}
    )
    model: str = field(default="Qwen3.6-27B", metadata={"help": "model name served at the endpoint"})
    api_key_env: str = field(
        default="OPENAI_API_KEY", metadata={"help": "environment variable holding the API key (unset: no key sent)"}
    )
    timeout_s: float = field(default=120.0, metadata={"help": "seconds before a request times out"})
    retries: int = field(default=3, metadata={"help": "retries of a request after a timeout, 429 or 5xx"})
    backoff_s: float = field(default=1.0, metadata={"help": "first retry delay (doubles each retry)"})
    concurrency: int = field(default=8, metadata={"help": "requests in flight at once"})

"""``grasp query --server [URL]``: ask a running ``grasp serve`` instead of loading the models in this process.

The command checks the server first (``GET /health``: it must serve the dataset asked for, with the profile, branches
and reranker setting the command line names, so the answer is the one ``grasp query`` without ``--server`` would
give), then sends the question to ``POST /query`` and returns the explanation text the server rendered with the
same function the local command prints with (:func:`grasp_core.explain.format_result`). Nothing answering, a
server of another dataset or setting, or an error answer ends the command with one line saying so.

Only the standard library is imported here, and only when the command runs (``urllib``: no torch, no pandas, no
HTTP client library), so the command costs a Python start and two loopback requests besides the server's answer.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from grasp_core.errors import GraspError

DEFAULT_SERVER = "http://127.0.0.1:8000"  # grasp serve's default --host and --port
HEALTH_TIMEOUT = 10.0  # seconds: /health answers without the retriever's worker
QUERY_TIMEOUT = 600.0  # seconds: the server answers one question at a time, so a busy one queues this one


def check_url(url: str) -> str:
    """``url`` without a trailing slash; a one-line error unless it is an http(s) URL with a host."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise GraspError(f"--server takes the URL of a grasp serve, e.g. {DEFAULT_SERVER}, not {url!r}")
    return url.rstrip("/")


def _call(url: str, path: str, body: Any | None, timeout: float, dataset: str) -> Any:
    """The JSON answer of ``path`` (POST ``body`` as JSON, or GET when None); a one-line GraspError otherwise."""
    import urllib.error
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    host = urlsplit(url).hostname or ""
    # a proxy set in the environment must not take a request for this machine's own server
    handlers = [urllib.request.ProxyHandler({})] if host in ("localhost", "127.0.0.1", "::1") else []
    try:
        with urllib.request.build_opener(*handlers).open(request, timeout=timeout) as response:
            raw = response.read()
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error") or exc.reason
        except (ValueError, AttributeError):
            message = exc.reason
        raise GraspError(f"the grasp serve at {url} answered {exc.code} to {path}: {message}") from None
    except TimeoutError:
        raise GraspError(f"the grasp serve at {url} did not answer {path} within {timeout:.0f} s") from None
    except (urllib.error.URLError, ConnectionError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):
            raise GraspError(f"the grasp serve at {url} did not answer {path} within {timeout:.0f} s") from None
        raise GraspError(
            f"no grasp serve answers at {url} ({reason}); start one with `grasp serve {dataset}`, or drop --server "
            "to answer in this process"
        ) from None
    try:
        return json.loads(raw)
    except ValueError:
        raise GraspError(f"{url}{path} did not answer JSON: is it a grasp serve?") from None


def ask_server(url: str, dataset: str, question: str, k: int, settings: dict[str, Any]) -> str:
    """The explanation the ``grasp serve`` at ``url`` gives of ``question`` (its top ``k``), after checking that it
    serves ``dataset`` with ``settings`` (``profile``, ``branches``, ``rerank``: what its ``/health`` reports)."""
    url = check_url(url)
    health = _call(url, "/health", None, HEALTH_TIMEOUT, dataset)
    if not isinstance(health, dict) or health.get("status") != "ok":
        raise GraspError(f"{url}/health did not answer a grasp serve's health: is it a grasp serve?")
    if health.get("dataset") != dataset:
        raise GraspError(f"the grasp serve at {url} serves {health.get('dataset')!r}, not {dataset!r}")
    differ = [
        f"{name} {health.get(name)!r} (asked: {want!r})" for name, want in settings.items() if health.get(name) != want
    ]
    if differ:
        raise GraspError(
            f"the grasp serve at {url} answers with {', '.join(differ)}: ask with its settings, or drop --server"
        )
    answer = _call(url, "/query", {"query": question, "k": k}, QUERY_TIMEOUT, dataset)
    explanation = answer.get("explanation") if isinstance(answer, dict) else None
    if not isinstance(explanation, str):
        raise GraspError(f"the grasp serve at {url} answered without an explanation: restart it with this version")
    return explanation

"""What the integrations share: one question to a :class:`GraspRetriever` at a time, and an answer as JSON-safe
metadata (its key, type, name, score and explanation) beside its node's text."""

from __future__ import annotations

import threading
import weakref
from typing import Any

from grasp_core.errors import GraspError
from grasp_core.retriever import Answer, GraspRetriever, Result
from grasp_core.textnorm import normalize_text

MAX_K = 100  # answers one question returns at most (what `grasp retrieve` writes)
SHORT_TEXT = 300  # characters of a node's text in an MCP search answer

_locks: weakref.WeakKeyDictionary[GraspRetriever, threading.Lock] = weakref.WeakKeyDictionary()
_locks_lock = threading.Lock()


def _lock_of(retriever: GraspRetriever) -> threading.Lock:
    """One lock per retriever: its models and graph connection answer one batch at a time, whichever adapter (or a
    framework's thread pool, e.g. LangChain's ``batch``) asks."""
    with _locks_lock:
        return _locks.setdefault(retriever, threading.Lock())


def check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise GraspError(f"k (answers returned) must be an integer from 1 to {MAX_K}, not {k!r}")
    return k


def ask(retriever: GraspRetriever, query: object, k: int, explain: bool = True) -> Result:
    """The retriever's result for one question (top ``k``), or a one-line GraspError for an unusable question."""
    if not isinstance(query, str):
        raise GraspError(f"the query must be a string, not {type(query).__name__}")
    text = normalize_text(query, "the query")
    if not text:
        raise GraspError("the query is empty: ask a question")
    with _lock_of(retriever):
        return retriever.retrieve([text], k=check_k(k), explain=explain)[0]


def node_text(retriever: GraspRetriever, answer: Answer) -> str:
    """The answer's node as its document: type, name, text fields and aliases (what the text branch embedded)."""
    return retriever.components.skb.document(answer.node_id)


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def answer_metadata(retriever: GraspRetriever, answer: Answer, rank: int) -> dict[str, Any]:
    """The answer and its explanation, JSON-safe: which branch found it at what rank, the reranker's score and
    largest feature contributions (ltr reranker), and for a graph answer among the top 10 the plan's paths to it."""
    return {
        "key": answer.key,
        "type": answer.type,
        "name": answer.name,
        "score": float(answer.score),
        "rank": rank,
        "node_id": int(answer.node_id),
        "dataset": retriever.components.dataset,
        "found_by": answer.found_by,
        "text_rank": answer.text_rank,
        "graph_rank": answer.graph_rank,
        "fused_rank": answer.fused_rank,
        "reranker_score": _number(answer.reranker_score),
        "reranker_contributions": {str(name): float(value) for name, value in answer.reranker_contributions},
        "paths": [[str(step) for step in path] for path in answer.paths],
    }


def short(text: str, limit: int = SHORT_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"

"""``grasp serve DATASET``: the retriever as an HTTP API (FastAPI on uvicorn), its artifacts loaded once.

Endpoints (JSON in and out; every error body is ``{"error": "<one line>"}``):

- ``GET /health``: ``{"status", "dataset", "profile", "branches", "rerank", "planner", "release", "artifacts"}``, where
  ``release`` is the served release's number (:mod:`grasp_core.releases`; null before the first) and ``artifacts``
  maps each of its artifacts (``planner/1`` for a round) to the UTC time it was completed, i.e. the version being
  served.
- ``POST /retrieve``: a JSON array of ``grasp retrieve`` input records ``{"qid", "query"}`` (at most
  ``MAX_BATCH``); answers the array of its output records, in order: ``{"qid", "request_id", "ranking": [{node_id,
  key, score}…]}`` (top 100, the CLI's lines plus a request id), or ``{"qid", "error"}`` for a record that could not
  be answered; one bad or failing question never fails the others. A missing ``qid`` is the record's 1-based
  position, as a missing one is the line number in the CLI. Each answered record is one question, so it gets its
  own ``request_id``.
- ``POST /query``: ``{"query": "...", "k": 10}``; answers the explained result
  (:func:`grasp_core.explain.result_json`: answers with the branch and rank that found them, the plan, the
  Cypher, the bindings, the entity table, per-stage milliseconds), its ``request_id``, and as ``explanation`` the
  text ``grasp query`` prints (:func:`grasp_core.explain.format_result`; ``grasp query --server`` prints it).
- ``POST /feedback``: one feedback record ``{"request_id" or "query", "answer_key", "relevant": true|false}`` or an
  array of at most ``MAX_FEEDBACK``; all are checked first and then appended in one transaction (or, on the first
  bad one, none: 400 malformed, 404 unknown request id, 422 unknown answer key, 413 too many); answers
  ``{"accepted": n, "ids": [...]}`` once they are committed (:mod:`grasp_core.feedback`, ``docs/feedback.md``).

Every answered question is recorded in the dataset's feedback store (its request id, the answer keys served and,
unless ``grasp serve --no-log-questions``, the question) before the answer is sent, so every request id an answer
carries can be given feedback. Without a store (``create_app(..., feedback=None)``) answers carry no request id and
``POST /feedback`` answers 404.

Concurrency: one worker thread owns the retriever (its models, indexes and graph connection are shared by
nothing else) and answers one request at a time, in arrival order (the models use every core; ``--parallel-branches`` also runs the
text branch beside the graph branch). The questions of one ``/retrieve`` request are
answered in one batch, exactly as one batch of ``grasp retrieve --batch-size <its size>``; requests are never
merged, because with a bfloat16 encoder a question's vectors (and so its ranking, slightly) depend on the
batch it is encoded in, and an answer must not depend on what other clients sent at the same time. If a
batch fails, its questions are retried one by one and only the failing one gets an error. Request handlers
only parse, enqueue and await.
"""

from __future__ import annotations

import asyncio
import json
import logging
import queue
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from grasp_core.artifacts import Artifacts
from grasp_core.batch import output_record, record_query
from grasp_core.errors import GraspError
from grasp_core.explain import format_result, result_json
from grasp_core.feedback import EXAMPLE as FEEDBACK_EXAMPLE
from grasp_core.feedback import FeedbackError, FeedbackStore
from grasp_core.manifest import MANIFEST_FILE

log = logging.getLogger(__name__)
MAX_BATCH = 32  # questions per request (= `grasp retrieve --batch-size` default)
RETRIEVE_EXAMPLE = '[{"qid": 1, "query": "Which diseases present with seizures?"}]'
QUERY_EXAMPLE = '{"query": "Which diseases present with seizures?", "k": 10}'
MAX_FEEDBACK = 100  # feedback records per request


@dataclass
class _Job:
    texts: list[str]
    k: int
    explain: bool
    futures: list[Future]


class RetrieverWorker:
    """The thread that owns the retriever and answers one request at a time, in arrival order."""

    def __init__(self, retriever):
        self.retriever = retriever
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="grasp-retriever", daemon=True)
        self._thread.start()

    def submit(self, texts: Sequence[str], k: int, explain: bool = False) -> list[Future]:
        """One future per question, resolved with its :class:`~grasp_core.retriever.Result` (or its error)."""
        job = _Job(list(texts), k, explain, [Future() for _ in texts])
        if texts:
            self._queue.put(job)
        return job.futures

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()

    def _loop(self) -> None:
        while (job := self._queue.get()) is not None:
            self._answer(job.texts, job.futures, job.k, job.explain)

    def _answer(self, texts: list[str], futures: list[Future], k: int, explain: bool) -> None:
        try:
            results = self.retriever.retrieve(texts, k=k, explain=explain)
        except Exception as exc:
            if len(texts) > 1:  # find the failing question; the others are still answered
                for text, future in zip(texts, futures):
                    self._answer([text], [future], k, explain)
                return
            if not isinstance(exc, GraspError):
                log.exception("retrieval failed for %r", texts[0])
            futures[0].set_exception(exc)
            return
        for future, res in zip(futures, results):
            future.set_result(res)


def artifact_versions(art: Artifacts) -> dict[str, str]:
    """Each finished artifact of the dataset (rounds as ``name/round``) -> the UTC time it was completed."""

    base = art.path("skb").parent  # the dataset's, a variant's (hpo+rerank-k20) or a served release's directory
    rounds = (m for m in base.glob(f"*/*/{MANIFEST_FILE}") if m.parent.name.isdigit())
    markers = sorted(base.glob(f"*/{MANIFEST_FILE}")) + sorted(rounds)
    return {
        str(m.parent.relative_to(base)): datetime.fromtimestamp(m.stat().st_mtime, UTC).isoformat(timespec="seconds")
        for m in markers
    }


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _failure(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, GraspError) else f"internal error ({type(exc).__name__}); see the server log"


async def _json_body(request: Request, expected: type, example: str) -> Any:
    """The request's JSON body (any content type), or a GraspError naming what to send instead."""
    try:
        body = json.loads(await request.body())
    except ValueError as exc:
        raise GraspError(f"the body is not JSON ({exc}); send {example}") from None
    if not isinstance(body, expected):
        raise GraspError(f"the body must be a JSON {expected.__name__ if expected is dict else 'array'}: {example}")
    return body


def create_app(
    retriever, health: dict[str, Any], max_batch: int = MAX_BATCH, feedback: FeedbackStore | None = None
) -> FastAPI:
    """The API over a loaded retriever; ``health`` is what ``GET /health`` reports besides its status; ``feedback``
    the store answered questions and feedback are recorded in (None: no request ids, no feedback)."""

    async def request_ids(endpoint: str, served: list[tuple[str, list[str]]]) -> list[str] | None:
        if feedback is None or not served:
            return None
        return await asyncio.to_thread(feedback.record_requests, endpoint, served)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.worker = RetrieverWorker(retriever)
        yield
        app.state.worker.close()

    app = FastAPI(title="GRASP", lifespan=lifespan)

    @app.exception_handler(HTTPException)
    async def one_line_http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return _error(
            exc.status_code, f"{exc.detail}: this API has GET /health, POST /retrieve, POST /query and POST /feedback"
        )

    @app.get("/health")
    async def get_health() -> dict:
        return {"status": "ok", **health}

    @app.post("/retrieve")
    async def post_retrieve(request: Request):
        try:
            records = await _json_body(request, list, RETRIEVE_EXAMPLE)
        except GraspError as exc:
            return _error(400, str(exc))
        if len(records) > max_batch:
            return _error(413, f"{len(records)} records in one request; send at most {max_batch} per request")
        qids = [r.get("qid", n) if isinstance(r, dict) else n for n, r in enumerate(records, 1)]
        questions, problems = {}, {}
        for i, record in enumerate(records):
            try:
                questions[i] = record_query(record, f"record {i + 1}")
            except GraspError as exc:
                problems[i] = str(exc)
        futures = dict(zip(questions, app.state.worker.submit(list(questions.values()), k=100)))
        out: list[dict[str, Any]] = []
        for i, qid in enumerate(qids):
            if i in problems:
                out.append({"qid": qid, "error": problems[i]})
                continue
            try:
                out.append(output_record(qid, await asyncio.wrap_future(futures[i])))
            except Exception as exc:
                out.append({"qid": qid, "error": _failure(exc)})
        answered = [(i, r) for i, r in enumerate(out) if "ranking" in r]
        try:
            ids = await request_ids("retrieve", [(questions[i], [a["key"] for a in r["ranking"]]) for i, r in answered])
        except GraspError as exc:
            return _error(500, str(exc))
        for (i, r), rid in zip(answered, ids or ()):
            out[i] = {"qid": r["qid"], "request_id": rid, **r}
        return out

    @app.post("/query")
    async def post_query(request: Request):
        try:
            body = await _json_body(request, dict, QUERY_EXAMPLE)
            text, k = body.get("query"), body.get("k", 10)
            if not isinstance(text, str) or not text.strip():
                raise GraspError(f'"query" must be a non-empty question: {QUERY_EXAMPLE}')
            if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 100:
                raise GraspError(f'"k" (answers returned) must be an integer from 1 to 100, not {k!r}')
        except GraspError as exc:
            return _error(400, str(exc))
        (future,) = app.state.worker.submit([text], k=k, explain=True)
        try:
            result = await asyncio.wrap_future(future)
            answer = {**result_json(result, show=k), "explanation": format_result(result)}  # grasp query --server
            ids = await request_ids("query", [(result.query, [a.key for a in result.answers[:k]])])
        except Exception as exc:
            return _error(500, _failure(exc))
        return answer if ids is None else {"request_id": ids[0], **answer}

    @app.post("/feedback")
    async def post_feedback(request: Request):
        if feedback is None:
            return _error(404, "this server keeps no feedback (it was started without a feedback store)")
        try:
            body = await _json_body(request, object, FEEDBACK_EXAMPLE)
            if not isinstance(body, dict | list):
                raise GraspError(f"the body must be a JSON object or an array of them: {FEEDBACK_EXAMPLE}")
        except GraspError as exc:
            return _error(400, str(exc))
        records = body if isinstance(body, list) else [body]
        if not records:
            return _error(400, f"the array holds no feedback record: {FEEDBACK_EXAMPLE}")
        if len(records) > MAX_FEEDBACK:
            return _error(413, f"{len(records)} records in one request; send at most {MAX_FEEDBACK} per request")
        try:
            ids = await asyncio.to_thread(feedback.add, records, "http")
        except FeedbackError as exc:
            return _error(exc.status, str(exc))
        except Exception as exc:
            return _error(500, _failure(exc))
        return {"accepted": len(ids), "ids": ids}

    return app


def serve(retriever, art: Artifacts, profile: str, host: str, port: int, log_questions: bool = True) -> None:
    """Warm the retriever up, then serve it until interrupted, recording answered questions and feedback in the
    dataset's feedback store (the question text only when ``log_questions``)."""
    import uvicorn

    from grasp_core.experiments import partition_of

    retriever.retrieve(["warm-up question"])  # builds what loads lazily (gazetteer, caches) before the first client
    nodes = retriever.components.skb.nodes
    feedback = FeedbackStore(art.dataset, dict(zip(nodes["key"], nodes["node_id"].tolist())), log_questions)
    health = {
        "dataset": partition_of(art),  # a variant's partition key: which variant answers
        "profile": profile,
        "branches": retriever.branches,
        "rerank": retriever.use_rerank,
        "planner": getattr(retriever, "planner_name", None),
        "release": getattr(art, "number", None),  # the served release (grasp_core.releases), None before the first
        "artifacts": artifact_versions(art),
        "log_questions": log_questions,
    }
    print(
        f"serving {partition_of(art)} on http://{host}:{port} (POST /retrieve, POST /query, POST /feedback, GET /health); "
        f"feedback{' and questions' if log_questions else ''} kept in {feedback.path}",
        flush=True,
    )
    try:
        uvicorn.run(create_app(retriever, health, feedback=feedback), host=host, port=port, log_level="warning")
    finally:
        feedback.close()

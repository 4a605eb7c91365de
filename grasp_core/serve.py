"""``grasp serve DATASET``: the retriever as an HTTP API (FastAPI on uvicorn), its artifacts loaded once.

Endpoints (JSON in and out; every error body is ``{"error": "<one line>"}``):

- ``GET /health``: ``{"status", "dataset", "profile", "branches", "rerank", "planner", "artifacts"}``, where
  ``artifacts`` maps each finished artifact of the dataset (``planner/1`` for a round) to the UTC time it
  was completed, i.e. the version being served.
- ``POST /retrieve``: a JSON array of ``grasp retrieve`` input records ``{"qid", "query"}`` (at most
  ``MAX_BATCH``); answers the array of its output records, in order: ``{"qid", "ranking": [{node_id, key,
  score}…]}`` (top 100, identical to the CLI's lines), or ``{"qid", "error"}`` for a record that could not be
  answered; one bad or failing question never fails the others. A missing ``qid`` is the record's 1-based
  position, as a missing one is the line number in the CLI.
- ``POST /query``: ``{"query": "...", "k": 10}``; answers the explained result
  (:func:`grasp_core.explain.result_json`: answers with the branch and rank that found them, the plan, the
  Cypher, the bindings, the entity table, per-stage milliseconds).

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
from grasp_core.explain import result_json
from grasp_core.manifest import MANIFEST_FILE

log = logging.getLogger(__name__)
MAX_BATCH = 32  # questions per request (= `grasp retrieve --batch-size` default)
RETRIEVE_EXAMPLE = '[{"qid": 1, "query": "Which diseases present with seizures?"}]'
QUERY_EXAMPLE = '{"query": "Which diseases present with seizures?", "k": 10}'


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
    base = art.root / art.dataset
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


def create_app(retriever, health: dict[str, Any], max_batch: int = MAX_BATCH) -> FastAPI:
    """The API over a loaded retriever; ``health`` is what ``GET /health`` reports besides its status."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.worker = RetrieverWorker(retriever)
        yield
        app.state.worker.close()

    app = FastAPI(title="GRASP", lifespan=lifespan)

    @app.exception_handler(HTTPException)
    async def one_line_http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return _error(exc.status_code, f"{exc.detail}: this API has GET /health, POST /retrieve and POST /query")

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
        out = []
        for i, qid in enumerate(qids):
            if i in problems:
                out.append({"qid": qid, "error": problems[i]})
                continue
            try:
                out.append(output_record(qid, await asyncio.wrap_future(futures[i])))
            except Exception as exc:
                out.append({"qid": qid, "error": _failure(exc)})
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
            return result_json(await asyncio.wrap_future(future), show=k)
        except Exception as exc:
            return _error(500, _failure(exc))

    return app


def serve(retriever, art: Artifacts, profile: str, host: str, port: int) -> None:
    """Warm the retriever up, then serve it until interrupted."""
    import uvicorn

    retriever.retrieve(["warm-up question"])  # builds what loads lazily (gazetteer, caches) before the first client
    health = {
        "dataset": art.dataset,
        "profile": profile,
        "branches": retriever.branches,
        "rerank": retriever.use_rerank,
        "planner": getattr(retriever, "planner_name", None),
        "artifacts": artifact_versions(art),
    }
    print(f"serving {art.dataset} on http://{host}:{port} (POST /retrieve, POST /query, GET /health)", flush=True)
    uvicorn.run(create_app(retriever, health), host=host, port=port, log_level="warning")

"""Feedback from use: the questions ``grasp serve`` answered and the answers people confirmed or rejected.

One SQLite file per dataset in the instance, ``<instance>/feedback/<dataset>.sqlite`` (the instance is
:func:`grasp_core.home.grasp_home`: ``$DAGSTER_HOME`` or the checkout's ``dagster_home``). Two tables
(``docs/feedback.md`` documents them for users):

- ``requests``: one row per question answered by ``grasp serve`` (``POST /query``, or one answered record of
  ``POST /retrieve``): ``request_id`` (the id the answer carried), ``dataset``, ``endpoint`` (``query`` |
  ``retrieve``), ``query`` (the normalized question; NULL when question logging is off), ``answers`` (the keys
  served, best first, as a JSON array), ``created_at`` (UTC, ISO 8601).
- ``feedback``: one row per judgement: ``id``, ``request_id`` (NULL for feedback given by question text),
  ``query`` (the text the client sent; NULL when it gave a request id only, the question is then the request's),
  ``answer_key``, ``node_id`` (the key's node in the SKB it was checked against), ``relevant`` (1 confirmed, 0
  rejected), ``rank`` (the answer's 1-based rank among the request's served answers; NULL when it was not served or
  no request was named), ``source`` (``http`` | ``cli`` | ``import``), ``created_at``.

A feedback record (an HTTP body, a JSON line of ``grasp feedback import``) is ``{"request_id" or "query",
"answer_key", "relevant": true|false}``; any other field, a key that is not a node of the dataset's SKB, a request
id this store never issued, or a record with neither a request id nor a question is refused with a one-line
:class:`FeedbackError` whose ``status`` is the HTTP status it is answered with.

Durability: the database runs in WAL mode with ``synchronous=FULL``, and every write is one transaction committed
before the call returns, so whatever was acknowledged (an HTTP 2xx, a CLI exit 0) survives a kill of the process
(the WAL is written before COMMIT returns; the OS keeps it when the process dies) and also a power loss or an OS
crash (FULL fsyncs the WAL at every commit; NORMAL would only sync it at checkpoints). A record is never half
written: SQLite rolls an unfinished transaction back when the database is next opened.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from grasp_core.artifacts import Artifacts
from grasp_core.errors import GraspError
from grasp_core.home import grasp_home
from grasp_core.textnorm import normalize_text

SOURCES = ("http", "cli", "import")
FIELDS = ("request_id", "query", "answer_key", "relevant")
EXAMPLE = '{"request_id": "<from the answer>", "answer_key": "<an answer\'s key>", "relevant": true}'
SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    request_id TEXT PRIMARY KEY,
    dataset TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    query TEXT,
    answers TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS feedback (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id TEXT REFERENCES requests(request_id),
    query TEXT,
    answer_key TEXT NOT NULL,
    node_id INTEGER NOT NULL,
    relevant INTEGER NOT NULL CHECK (relevant IN (0, 1)),
    rank INTEGER,
    source TEXT NOT NULL CHECK (source IN ('http', 'cli', 'import')),
    created_at TEXT NOT NULL,
    CHECK (request_id IS NOT NULL OR query IS NOT NULL)
);
CREATE INDEX IF NOT EXISTS feedback_request ON feedback(request_id);
"""


class FeedbackError(GraspError):
    """A feedback record that is refused; ``status`` is the HTTP status it is answered with (400 malformed, 404
    unknown request id, 422 unknown answer key)."""

    def __init__(self, message: str, status: int = 400):
        self.status = status
        super().__init__(message)


@dataclass(frozen=True)
class Feedback:
    """A checked feedback record, ready to insert."""

    request_id: str | None
    query: str | None
    answer_key: str
    node_id: int
    relevant: bool
    rank: int | None


def store_path(dataset: str) -> Path:
    """Where a dataset's feedback store lives: ``<instance>/feedback/<dataset>.sqlite``."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", dataset):
        raise GraspError(f"{dataset!r} is not a dataset key (letters, digits, '_', '.', '-')")
    return grasp_home() / "feedback" / f"{dataset}.sqlite"


def skb_keys(art: Artifacts) -> dict[str, int]:
    """Node key -> node id of the dataset's built SKB (only the two columns are read), or the usual one-line error
    when the SKB has not been built."""
    import pyarrow.parquet as pq

    table = pq.read_table(art.require("skb") / "nodes.parquet", columns=["key", "node_id"])
    return dict(zip(table.column("key").to_pylist(), table.column("node_id").to_pylist()))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class FeedbackStore:
    """A dataset's feedback store. ``keys`` (node key -> node id) checks answer keys; without it the store only
    reads and records requests. ``log_questions=False`` keeps the question text of served requests out of the store
    (their ids and answer keys are still kept, so feedback by request id works). Safe to share between threads (one
    connection behind a lock); other processes may write at the same time (SQLite's locking, a 10 s busy wait)."""

    def __init__(
        self,
        dataset: str,
        keys: Mapping[str, int] | None = None,
        log_questions: bool = True,
        path: str | Path | None = None,
    ):
        self.dataset, self.keys, self.log_questions = dataset, keys, log_questions
        self.path = Path(path) if path is not None else store_path(dataset)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, timeout=10.0, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA foreign_keys=ON")
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise GraspError(
                    f"feedback store {self.path} has schema version {version}; this grasp reads {SCHEMA_VERSION}: "
                    "upgrade grasp"
                )
            self._db.executescript(_SCHEMA + f"PRAGMA user_version = {SCHEMA_VERSION};")
        except sqlite3.Error as exc:
            raise GraspError(f"cannot open the feedback store {self.path}: {exc}") from None

    @classmethod
    def existing(cls, dataset: str, path: str | Path | None = None) -> FeedbackStore | None:
        """The store if it has been created (reading never creates one), else None."""
        p = Path(path) if path is not None else store_path(dataset)
        return cls(dataset, path=p) if p.exists() else None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> FeedbackStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self, statements: Iterable[tuple[str, Sequence[Any]]]) -> list[int]:
        """Run the statements as one transaction, committed (durably) before returning their rows' ids."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    ids = [int(self._db.execute(sql, params).lastrowid or 0) for sql, params in statements]
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise GraspError(f"could not write the feedback store {self.path}: {exc}") from None
        return ids

    def record_requests(self, endpoint: str, served: Sequence[tuple[str, Sequence[str]]]) -> list[str]:
        """Record answered questions ``(question, answer keys served best first)`` in one transaction; their new
        request ids, in order. The question text is dropped when question logging is off."""
        ids = [uuid.uuid4().hex for _ in served]
        now = _now()
        self._write(
            (
                "INSERT INTO requests (request_id, dataset, endpoint, query, answers, created_at) VALUES (?,?,?,?,?,?)",
                (rid, self.dataset, endpoint, query if self.log_questions else None, json.dumps(list(keys)), now),
            )
            for rid, (query, keys) in zip(ids, served)
        )
        return ids

    def check(self, record: object, where: str = "the record") -> Feedback:
        """A feedback record checked against the SKB's keys and the recorded requests, or a one-line FeedbackError."""
        if not isinstance(record, dict):
            raise FeedbackError(f"{where}: not a JSON object; send {EXAMPLE}")
        unknown = sorted(set(record) - set(FIELDS))
        if unknown:
            raise FeedbackError(f"{where}: unknown field {unknown[0]!r}; the fields are {', '.join(FIELDS)}")
        request_id, query, key, relevant = (record.get(f) for f in FIELDS)
        if request_id is not None and not isinstance(request_id, str):
            raise FeedbackError(f'{where}: "request_id" must be the string an answer carried, not {request_id!r}')
        if query is not None:
            if not isinstance(query, str):
                raise FeedbackError(f'{where}: "query" must be a string, not {query!r}')
            try:
                query = normalize_text(query, where) or None
            except GraspError as exc:
                raise FeedbackError(str(exc)) from None
            if query is None:
                raise FeedbackError(f'{where}: "query" is empty')
        if request_id is None and query is None:
            raise FeedbackError(f'{where}: needs "request_id" (from the answer) or "query" (the question): {EXAMPLE}')
        if not isinstance(key, str) or not key:
            raise FeedbackError(f'{where}: "answer_key" must be the key of an answer (a string), not {key!r}')
        if not isinstance(relevant, bool):
            raise FeedbackError(f'{where}: "relevant" must be true or false, not {relevant!r}')
        if self.keys is None:
            raise GraspError("this feedback store was opened without the SKB's keys: it cannot check feedback")
        node_id = self.keys.get(key)
        if node_id is None:
            raise FeedbackError(f"{where}: answer_key {key!r} is not a node of dataset {self.dataset!r}", 422)
        rank = None
        if request_id is not None:
            with self._lock:
                row = self._db.execute("SELECT answers FROM requests WHERE request_id = ?", (request_id,)).fetchone()
            if row is None:
                raise FeedbackError(
                    f"{where}: request_id {request_id!r} is unknown (no answer of dataset {self.dataset!r} carried it)",
                    404,
                )
            served = json.loads(row[0])
            rank = served.index(key) + 1 if key in served else None
        return Feedback(request_id, query, key, int(node_id), relevant, rank)

    def insert(self, records: Sequence[Feedback], source: str) -> list[int]:
        """Append checked records in one transaction, committed before returning their ids."""
        if source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, not {source!r}")
        now = _now()
        return self._write(
            (
                "INSERT INTO feedback (request_id, query, answer_key, node_id, relevant, rank, source, created_at) "
                "VALUES (?,?,?,?,?,?,?,?)",
                (f.request_id, f.query, f.answer_key, f.node_id, int(f.relevant), f.rank, source, now),
            )
            for f in records
        )

    def add(self, records: Sequence[object], source: str) -> list[int]:
        """Check every record, then append them all or (on the first bad one, a FeedbackError) none."""
        many = len(records) > 1
        return self.insert(
            [self.check(r, f"record {i + 1}" if many else "the record") for i, r in enumerate(records)], source
        )

    def rows(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The feedback, oldest first (the last ``limit`` rows when given), with ``question``: the text the
        client sent, else the question of the request it named (None when that was not logged)."""
        sql = (
            "SELECT f.id, f.created_at, f.request_id, f.query, COALESCE(f.query, r.query) AS question, f.answer_key, "
            "f.node_id, f.relevant, f.rank, f.source FROM feedback f LEFT JOIN requests r USING (request_id) "
            "ORDER BY f.id DESC" + (" LIMIT ?" if limit is not None else "")
        )
        with self._lock:
            cursor = self._db.execute(sql, (limit,) if limit is not None else ())
            names = [d[0] for d in cursor.description]
            found = [dict(zip(names, row)) for row in cursor.fetchall()]
        for row in found:
            row["relevant"] = bool(row["relevant"])
        return found[::-1]

    def counts(self) -> dict[str, int]:
        """``requests``, ``feedback``, ``confirmed`` (relevant) rows and ``last_id`` (0: none), e.g. for a data
        version that changes with every new record."""
        with self._lock:
            requests = self._db.execute("SELECT COUNT(*) FROM requests").fetchone()[0]
            feedback, confirmed, last = self._db.execute(
                "SELECT COUNT(*), COALESCE(SUM(relevant), 0), COALESCE(MAX(id), 0) FROM feedback"
            ).fetchone()
        return {"requests": requests, "feedback": feedback, "confirmed": confirmed, "last_id": last}

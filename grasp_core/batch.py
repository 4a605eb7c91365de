"""Batch retrieval over JSONL files: ``{"qid", "query"}`` in, ``{"qid", "ranking": [{node_id, key, score}…]}`` out.

A malformed line (not UTF-8, not JSON, no ``query``, an empty query, a lone surrogate) is reported on stderr
with its line number and skipped; the good lines are still answered. A query whose retrieval fails gets the
record ``{"qid", "error"}`` instead of a ranking; the other queries of its batch are answered. A query cut to
fit a model's input window carries ``"truncated"`` (which model read how many of its tokens). The output path
is checked before any work, and the file is written under a temporary name and renamed when the whole input is
done (an interrupted run leaves no partial file).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tqdm.auto import tqdm

from grasp_core.errors import GraspError
from grasp_core.io import atomic_file, check_writable
from grasp_core.redact import one_line_error
from grasp_core.textnorm import decode_line, normalize_text


def read_queries(path: str | Path) -> tuple[list[tuple[object, str]], list[str]]:
    """(qid, query) pairs of the good lines, and one message per bad line."""
    path = Path(path)
    if not path.is_file():
        raise GraspError(f"queries file {path} does not exist")
    good, bad = [], []
    with open(path, "rb") as handle:
        for n, raw in enumerate(handle, 1):
            where = f"{path}:{n}"
            try:
                line = decode_line(raw, where)
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise GraspError(
                        f'{where}: not JSON ({exc.msg}); expected {{"qid": ..., "query": "..."}}'
                    ) from None
                good.append((obj.get("qid", n), record_query(obj, where)))
            except GraspError as exc:
                bad.append(str(exc))
    return good, bad


def record_query(obj: object, where: str) -> str:
    """The normalized question of an input record ``{"qid", "query"}``, or a GraspError saying what is wrong."""
    if not isinstance(obj, dict) or not isinstance(obj.get("query"), str):
        raise GraspError(f'{where}: needs a string field "query" (and a "qid")')
    query = normalize_text(obj["query"], where)
    if not query:
        raise GraspError(f"{where}: the query is empty")
    return query


def _answer(retriever, chunk: list[tuple[object, str]], k: int) -> list[dict]:
    """One output record per query of ``chunk``; a failing batch is answered query by query, so a query that
    fails costs only its own record."""
    try:
        results = retriever.retrieve([q for _, q in chunk], k=k)
    except Exception:
        if len(chunk) == 1:
            raise
        return [record for item in chunk for record in _answer_one(retriever, item, k)]
    return [output_record(qid, res) for (qid, _), res in zip(chunk, results)]


def _answer_one(retriever, item: tuple[object, str], k: int) -> list[dict]:
    qid, _ = item
    try:
        return _answer(retriever, [item], k)
    except Exception as exc:
        return [{"qid": qid, "error": one_line_error(exc)}]


def output_record(qid, res) -> dict:
    """The output record of one answered query (``truncated`` when a model read only part of it)."""
    record = {"qid": qid, "ranking": [a.to_json() for a in res.answers]}
    if res.truncated:
        record["truncated"] = res.truncated
    return record


def check_batch_args(queries_path: str | Path, out_path: str | Path, batch_size: int) -> None:
    """Refuse a run that could not write its result, before any model is loaded or any query answered."""
    if batch_size < 1:
        raise GraspError(f"--batch-size must be at least 1, got {batch_size}")
    if not Path(queries_path).is_file():
        raise GraspError(f"queries file {queries_path} does not exist")
    check_writable(out_path)


def retrieve_file(
    retriever, queries_path: str | Path, out_path: str | Path, batch_size: int = 32, k: int = 100
) -> dict:
    check_batch_args(queries_path, out_path, batch_size)
    good, bad = read_queries(queries_path)
    for message in bad:
        print(f"warning: {message}", file=sys.stderr)
    failed = 0
    with atomic_file(out_path) as out:
        for start in tqdm(range(0, len(good), batch_size), desc="retrieve", unit="batch", disable=None):
            chunk = good[start : start + batch_size]
            records = _answer(retriever, chunk, k) if len(chunk) > 1 else _answer_one(retriever, chunk[0], k)
            for record in records:
                if "error" in record:
                    failed += 1
                    print(f"warning: query {record['qid']!r} failed: {record['error']}", file=sys.stderr)
                out.write(json.dumps(record) + "\n")
    return {"answered": len(good) - failed, "failed": failed, "bad": len(bad)}

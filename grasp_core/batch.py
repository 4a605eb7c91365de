"""Batch retrieval over JSONL files: ``{"qid", "query"}`` in, ``{"qid", "ranking": [{node_id, key, score}…]}`` out.

A malformed line (not JSON, no ``query``, an empty query) is reported on stderr with its line number and
skipped; the good lines are still answered. The output is written atomically when the whole file is done.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tqdm.auto import tqdm

from grasp_core.errors import GraspError
from grasp_core.io import atomic_file


def read_queries(path: str | Path) -> tuple[list[tuple[object, str]], list[str]]:
    """(qid, query) pairs of the good lines, and one message per bad line."""
    path = Path(path)
    if not path.is_file():
        raise GraspError(f"queries file {path} does not exist")
    good, bad = [], []
    with open(path, encoding="utf-8") as handle:
        for n, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                bad.append(f'{path}:{n}: not JSON ({exc.msg}); expected {{"qid": ..., "query": "..."}}')
                continue
            problem = record_problem(obj)
            if problem:
                bad.append(f"{path}:{n}: {problem}")
            else:
                good.append((obj.get("qid", n), obj["query"]))
    return good, bad


def record_problem(obj: object) -> str | None:
    """Why a parsed input record cannot be answered, or None for a good ``{"qid", "query"}`` record."""
    if not isinstance(obj, dict) or not isinstance(obj.get("query"), str):
        return 'needs a string field "query" (and a "qid")'
    if not obj["query"].strip():
        return "the query is empty"
    return None


def output_record(qid: object, result) -> dict:
    """The output record of one answered query: ``{"qid", "ranking": [{node_id, key, score}…]}``."""
    return {"qid": qid, "ranking": [a.to_json() for a in result.answers]}


def retrieve_file(
    retriever, queries_path: str | Path, out_path: str | Path, batch_size: int = 32, k: int = 100
) -> dict:
    good, bad = read_queries(queries_path)
    for message in bad:
        print(f"warning: {message}", file=sys.stderr)
    with atomic_file(out_path) as out:
        for start in tqdm(range(0, len(good), batch_size), desc="retrieve", unit="batch", disable=None):
            chunk = good[start : start + batch_size]
            results = retriever.retrieve([q for _, q in chunk], k=k)
            for (qid, _), res in zip(chunk, results):
                out.write(json.dumps(output_record(qid, res)) + "\n")
    return {"answered": len(good), "bad": len(bad)}

"""Rankings of many queries on disk: one parquet file ``qid:int64, node_ids:list<int64>, scores:list<float32>``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from grasp_core.errors import CorruptArtifactError, MissingArtifactError
from grasp_core.io import atomic_file
from grasp_core.ranking import Ranking

SCHEMA = pa.schema([("qid", pa.int64()), ("node_ids", pa.list_(pa.int64())), ("scores", pa.list_(pa.float32()))])


def write_rankings(path: str | Path, qids: Sequence[int], rankings: Sequence[Ranking]) -> Path:
    """Write one row per query, atomically (a crash leaves the previous file intact)."""
    if len(qids) != len(rankings):
        raise ValueError(f"{len(qids)} qids but {len(rankings)} rankings")
    table = pa.table(
        {
            "qid": pa.array(np.asarray(qids, np.int64)),
            "node_ids": pa.array([np.asarray(r.node_ids, np.int64) for r in rankings], pa.list_(pa.int64())),
            "scores": pa.array([np.asarray(r.scores, np.float32) for r in rankings], pa.list_(pa.float32())),
        },
        schema=SCHEMA,
    )
    with atomic_file(path, "wb") as handle:
        pq.write_table(table, handle)
    return Path(path)


def read_rankings(path: str | Path) -> dict[int, Ranking]:
    path = Path(path)
    if not path.exists():
        raise MissingArtifactError(f"rankings file {path} does not exist; run the retriever that writes it first")
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise CorruptArtifactError(f"{path}: not a readable parquet file ({exc})") from exc
    missing = [c for c in SCHEMA.names if c not in table.column_names]
    if missing:
        raise CorruptArtifactError(f"{path}: missing columns {missing}")
    ids, scores = table.column("node_ids"), table.column("scores")
    return {
        int(q): Ranking(np.asarray(i.values, np.int64), np.asarray(s.values, np.float32))
        for q, i, s in zip(table.column("qid").to_pylist(), ids.combine_chunks(), scores.combine_chunks())
    }

"""Entity tables of many queries on disk: one JSON line per query, ``{"qid": …, "table": [rows…]}``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from grasp_core.entities.table import EntityTable
from grasp_core.errors import GraspError
from grasp_core.io import atomic_file


def write_tables(path: str | Path, qids: Sequence[int], tables: Sequence[EntityTable]) -> None:
    with atomic_file(path) as handle:
        for qid, table in zip(qids, tables):
            handle.write(json.dumps({"qid": int(qid), "table": table.to_json()}, ensure_ascii=False) + "\n")


def read_tables(path: str | Path) -> dict[int, EntityTable]:
    out: dict[int, EntityTable] = {}
    with open(path) as handle:
        for line_no, line in enumerate(handle, 1):
            try:
                obj = json.loads(line)
                out[int(obj["qid"])] = EntityTable.from_json(obj["table"])
            except (ValueError, KeyError, TypeError) as exc:
                raise GraspError(
                    f"{path}, line {line_no}: not an entity-table record ({exc}); rebuild entity_tables"
                ) from exc
    return out

"""The embedded graph store: LadybugDB (in-process, columnar, Cypher; the continuation of Kùzu).

Layout of a store directory (written with :func:`grasp_core.io.atomic_dir`, so a crash never leaves a
half-built store behind): ``graph.lbdb`` (the database file) and ``meta.json`` (schema, table names,
counts). Loading derives one parquet file per node type (``id`` INT64 primary key = node_id) and one per
(relation, src type, dst type) pair (:func:`~grasp_core.graph.store.edge_groups`), and bulk-loads them with
``COPY … FROM``; each relation is one REL table declaring all of its type pairs.

A complete store is immutable: it is always reopened read-only (a read-write open checkpoints the file on close,
which would change it under its manifest), and ``load`` rebuilds it into a new directory.

Engine behaviour this module works around (found on synth-prime ``full`` with ``benchmarks/plan_execution.py``;
load speed in ``benchmarks/results/plan_execution.json``, ``load_edges_per_s``):
- Node tables hold only ``id``, no ``name``: the engine carries a node variable through ``WITH`` as a struct of
  all its properties and groups ``max(s)`` by it, so a string column made every traversal hop much
  slower. Names live in the SKB, which is where every caller reads them.
- Loading: ``COPY`` is nearly the whole cost (the numpy grouping and parquet writing are a small part); the load
  database runs without auto-checkpoints, which checkpointed after many of the ``COPY`` statements, and
  checkpoints once at the end. ``COPY`` straight from Arrow tables was no faster than from parquet.
- ``Connection.execute(text, params)`` keeps every distinct query text's prepared statement, with the state of
  its operators, in an unbounded cache: with one text per plan the buffer pool filled up after ~20 plans
  and every later query failed ("buffer pool is full"). :meth:`LadybugStore.run` prepares each parametrised
  query itself and drops the statement after use (preparing is cheap next to the query).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import ladybug
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from grasp_core.errors import GraphStoreError
from grasp_core.graph.config import GraphStoreConfig
from grasp_core.graph.store import Dialect, edge_groups, quote, relation_pairs, table_names
from grasp_core.io import atomic_dir, is_complete, read_json, write_json
from grasp_core.skb.format import SKB
from grasp_core.skb.schema import Schema

DB_FILE = "graph.lbdb"


class LadybugStore:
    dialect: Dialect = "ladybug"

    def __init__(self, path: str | Path, cfg: GraphStoreConfig = GraphStoreConfig()):
        self.path, self.cfg = Path(path), cfg
        self._db: ladybug.Database | None = None
        self._conn: ladybug.Connection | None = None
        self.schema: Schema | None = None
        if is_complete(self.path):
            self._open()

    def _open(self) -> None:
        try:
            meta = read_json(self.path / "meta.json")
            self.schema = Schema.from_json(meta["schema"], str(self.path / "meta.json"))
            self._db = self._database(self.path / DB_FILE, read_only=True)
            self._conn = ladybug.Connection(self._db, num_threads=self.cfg.num_threads)
        except (OSError, KeyError, ValueError, RuntimeError) as exc:
            raise GraphStoreError(
                f"graph store at {self.path} is unreadable ({exc}); rebuild it with load(skb)"
            ) from exc

    def _database(self, file: Path, read_only: bool, auto_checkpoint: bool = True) -> ladybug.Database:
        return ladybug.Database(
            str(file),
            buffer_pool_size=int(self.cfg.buffer_pool_gib * 2**30),
            max_num_threads=self.cfg.num_threads,
            read_only=read_only,
            auto_checkpoint=auto_checkpoint,
        )

    def load(self, skb: SKB) -> None:
        if self.cfg.read_only:
            raise GraphStoreError(f"graph store at {self.path} was opened read-only; it cannot be (re)loaded")
        self.close()
        with atomic_dir(self.path) as tmp:
            db = self._database(tmp / DB_FILE, read_only=False, auto_checkpoint=False)  # one checkpoint at the end
            conn = ladybug.Connection(db, num_threads=self.cfg.num_threads)
            try:
                _bulk_load(conn, skb, tmp / "_load")
            finally:
                conn.close()
                db.close()
            for f in (tmp / "_load").iterdir():
                f.unlink()
            (tmp / "_load").rmdir()
            write_json(
                tmp / "meta.json",
                {
                    "schema": skb.schema.to_json(),
                    "tables": table_names(skb.schema)._asdict(),
                    "nodes": skb.num_nodes,
                    "edges": len(skb.edges),
                },
            )
        self._open()

    def run(self, cypher: str, params: dict[str, Any] | None = None) -> list[tuple]:
        if self._conn is None:
            raise GraphStoreError(f"graph store at {self.path} is empty; load an SKB first")
        try:
            if params:
                with warnings.catch_warnings():  # prepare() is deprecated only in favour of the caching execute()
                    warnings.simplefilter("ignore", DeprecationWarning)
                    statement = self._conn.prepare(cypher, params)
                result = self._conn.execute(statement, params)
            else:
                result = self._conn.execute(cypher)
        except RuntimeError as exc:
            raise GraphStoreError(f"query failed: {exc}") from exc
        if isinstance(result, list):  # several statements: only one is ever sent
            raise GraphStoreError(f"expected one Cypher statement, got {len(result)}")
        try:
            table = result.get_as_arrow()  # columnar fetch: several times faster than get_next() per row
        finally:
            result.close()
        return list(zip(*(column.to_pylist() for column in table.columns)))

    def counts(self) -> dict[str, dict[str, int]]:
        names = table_names(self._require_schema())
        nodes = {t: self.run(f"MATCH (n:{quote(n)}) RETURN count(*)")[0][0] for t, n in names.node.items()}
        edges = {r: self.run(f"MATCH ()-[e:{quote(n)}]->() RETURN count(*)")[0][0] for r, n in names.rel.items()}
        return {"nodes": nodes, "edges": edges}

    def _require_schema(self) -> Schema:
        if self.schema is None:
            raise GraphStoreError(f"graph store at {self.path} is empty; load an SKB first")
        return self.schema

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._db is not None:
            self._db.close()
        self._conn = self._db = None


def _bulk_load(conn: ladybug.Connection, skb: SKB, scratch: Path) -> None:
    scratch.mkdir()
    names = table_names(skb.schema)
    types = skb.nodes["type"].to_numpy()
    for node_type, table in names.node.items():
        conn.execute(f"CREATE NODE TABLE {quote(table)}(id INT64, PRIMARY KEY(id))")
        mask = types == node_type
        if mask.any():
            file = scratch / f"{table}.parquet"
            pq.write_table(pa.table({"id": skb.nodes["node_id"].to_numpy(np.int64)[mask]}), file)
            conn.execute(f"COPY {quote(table)} FROM '{file}'")
    for rel, pairs in relation_pairs(skb.schema).items():
        decl = ", ".join(f"FROM {quote(names.node[a])} TO {quote(names.node[b])}" for a, b in pairs)
        conn.execute(f"CREATE REL TABLE {quote(names.rel[rel])}({decl})")
    for i, (rel, a, b, src, dst) in enumerate(edge_groups(skb)):
        file = scratch / f"edges.{i}.parquet"
        pq.write_table(pa.table({"from": src, "to": dst}), file)
        conn.execute(f"COPY {quote(names.rel[rel])} FROM '{file}' (from='{names.node[a]}', to='{names.node[b]}')")
    conn.execute("CHECKPOINT")

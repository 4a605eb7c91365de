"""The server graph store: Neo4j over Bolt with the official ``neo4j`` driver.

Same model as the embedded store (:mod:`grasp_core.graph.store`): one label per node type with ``id`` (the
node_id, under a uniqueness constraint, which also indexes it) and ``name``; one relationship type per
relation. ``load`` first deletes (in batches) the nodes of this schema's labels and of the graph loaded before
(its schema on ``GraspMeta``; else that graph's nodes of labels this schema lacks, and their edges, would stay and
count in ``counts``), creates the constraints, then writes nodes and edges in ``UNWIND $rows`` batches of
``GraphStoreConfig.batch_size``. The schema is kept on a single ``GraspMeta`` node so that ``counts`` works on a
reconnected store. Connection settings come from the config or the env vars NEO4J_URI / NEO4J_USER; the password
only from NEO4J_PASSWORD.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from grasp_core.errors import GraphStoreError
from grasp_core.graph.config import GraphStoreConfig
from grasp_core.graph.store import Dialect, edge_groups, quote, table_names
from grasp_core.redact import redact
from grasp_core.skb.format import SKB
from grasp_core.skb.schema import Schema

META = "GraspMeta"


class Neo4jStore:
    dialect: Dialect = "neo4j"

    def __init__(self, cfg: GraphStoreConfig = GraphStoreConfig(), driver=None):
        import neo4j

        self.cfg = cfg
        uri, user, password = cfg.neo4j_auth()
        if driver is None and not uri:
            raise GraphStoreError(
                "no Neo4j server configured: set NEO4J_URI (and NEO4J_USER, NEO4J_PASSWORD) or GraphStoreConfig.uri"
            )
        try:
            self._driver = driver or neo4j.GraphDatabase.driver(uri, auth=(user, password))
            self._driver.verify_connectivity()
        except (neo4j.exceptions.Neo4jError, neo4j.exceptions.DriverError, OSError) as exc:
            raise GraphStoreError(redact(f"cannot connect to Neo4j at {uri}: {exc}")) from None

    def load(self, skb: SKB) -> None:
        names = table_names(skb.schema)
        batch = self.cfg.batch_size
        before = self._loaded_schema()
        stale = table_names(before).node.values() if before is not None else ()
        for label in dict.fromkeys([*stale, *names.node.values()]):
            while self.run(f"MATCH (n:{quote(label)}) WITH n LIMIT $n DETACH DELETE n RETURN count(*)", {"n": batch})[
                0
            ][0]:
                pass
        for label in names.node.values():
            self.run(f"CREATE CONSTRAINT IF NOT EXISTS FOR (n:{quote(label)}) REQUIRE n.id IS UNIQUE")
        types = skb.nodes["type"].to_numpy()
        ids, node_names = skb.nodes["node_id"].to_numpy(np.int64), skb.nodes["name"].astype(str).to_numpy()
        for node_type, label in names.node.items():
            mask = types == node_type
            rows = [{"id": int(i), "name": n} for i, n in zip(ids[mask], node_names[mask])]
            self._write(f"UNWIND $rows AS r CREATE (n:{quote(label)} {{id: r.id, name: r.name}})", rows, node_type)
        for rel, a, b, src, dst in edge_groups(skb):
            rows = [{"src": int(s), "dst": int(d)} for s, d in zip(src, dst)]
            self._write(
                f"UNWIND $rows AS r MATCH (a:{quote(names.node[a])} {{id: r.src}}), "
                f"(b:{quote(names.node[b])} {{id: r.dst}}) CREATE (a)-[:{quote(names.rel[rel])}]->(b)",
                rows,
                rel,
            )
        self.run(f"MERGE (m:{META}) SET m.schema = $schema", {"schema": json.dumps(skb.schema.to_json())})

    def _write(self, cypher: str, rows: list[dict], what: str) -> None:
        size = self.cfg.batch_size
        for start in tqdm(range(0, len(rows), size), desc=f"neo4j {what}", unit="batch", leave=False):
            self.run(cypher, {"rows": rows[start : start + size]})

    def run(self, cypher: str, params: dict[str, Any] | None = None) -> list[tuple]:
        import neo4j

        try:  # execute_query retries transient failures (a busy server, a dropped connection) before raising
            records = self._driver.execute_query(cypher, params or {}, database_=self.cfg.database).records
        except (neo4j.exceptions.Neo4jError, neo4j.exceptions.DriverError) as exc:
            raise GraphStoreError(redact(f"query failed: {exc}")) from exc
        return [tuple(record.values()) for record in records]

    def _loaded_schema(self) -> Schema | None:
        """The schema of the graph ``load`` wrote last (on the ``GraspMeta`` node), None when there is none."""
        rows = self.run(f"MATCH (m:{META}) RETURN m.schema")
        return Schema.from_json(json.loads(rows[0][0]), "neo4j GraspMeta") if rows else None

    def counts(self) -> dict[str, dict[str, int]]:
        schema = self._loaded_schema()
        if schema is None:
            raise GraphStoreError("the Neo4j database holds no GRASP graph; load an SKB first")
        names = table_names(schema)
        nodes = {t: self.run(f"MATCH (n:{quote(n)}) RETURN count(n)")[0][0] for t, n in names.node.items()}
        edges = {r: self.run(f"MATCH ()-[e:{quote(n)}]->() RETURN count(e)")[0][0] for r, n in names.rel.items()}
        return {"nodes": nodes, "edges": edges}

    def close(self) -> None:
        self._driver.close()

"""Pipeline steps of the graph branch: node embeddings, vector indexes, graph store, entity tables."""

from __future__ import annotations

import time

import numpy as np

from grasp_core.components import Components
from grasp_core.io import atomic_dir, write_json


def node_embeddings_step(ws: Components) -> dict:
    from grasp_core.embed.node_embeddings import build_node_embeddings

    start = time.perf_counter()
    out = build_node_embeddings(ws.graph, ws.encoder, ws.art.path("node_embeddings"), ws.profile.encoder)
    seconds = time.perf_counter() - start
    return {
        "num_nodes": ws.graph.num_nodes,
        "dim": ws.encoder.dim,
        "encoder": ws.encoder.identity,
        "seconds": round(seconds, 1),
        "nodes_per_second": round(2 * ws.graph.num_nodes / max(seconds, 1e-9), 1),
        "path": str(out),
    }


def vector_indexes_step(ws: Components) -> dict:
    from grasp_core.embed.vector_index import NodeIndex

    start = time.perf_counter()
    index = NodeIndex.build(ws.graph, ws.embeddings, ws.profile.index)
    index.save(ws.art.path("vector_indexes"))
    return {
        "indexes": {f"{t}/{k}": int(idx.ntotal) for (t, k), idx in index.indexes.items()},
        "seconds": round(time.perf_counter() - start, 2),
        "path": str(ws.art.path("vector_indexes")),
    }


def graph_store_step(ws: Components) -> dict:
    from grasp_core.graph.open import open_graph_store

    start = time.perf_counter()
    store = open_graph_store(ws.profile.graph_store, ws.art.path("graph_store"))
    try:
        store.load(ws.graph)
        counts = store.counts()
    finally:
        store.close()
    seconds = time.perf_counter() - start
    return {
        "backend": ws.profile.graph_store.backend,
        "nodes_per_type": counts["nodes"],
        "edges_per_relation": counts["edges"],
        "load_seconds": round(seconds, 2),
        "edges_per_second": round(len(ws.graph.edges) / max(seconds, 1e-9)),
        "path": str(ws.art.path("graph_store")),
    }


def entity_tables_step(ws: Components) -> dict:
    from grasp_core.entities.coverage import anchor_coverage
    from grasp_core.entities.tables_io import write_tables

    start = time.perf_counter()
    queries = ws.skb.queries
    tables = ws.extractor.extract(queries["query"].tolist())
    seconds = time.perf_counter() - start
    with atomic_dir(ws.art.path("entity_tables")) as tmp:
        write_tables(tmp / "tables.jsonl", queries["qid"].tolist(), tables)
        coverage = anchor_coverage(tables, queries, ws.skb)
        write_json(tmp / "coverage.json", coverage)
    rows = np.array([len(t.rows) for t in tables])
    return {
        "num_queries": len(tables),
        "mean_rows": round(float(rows.mean()), 2) if len(rows) else 0.0,
        "empty_tables": int((rows == 0).sum()),
        "coverage": coverage,
        "queries_per_second": round(len(tables) / max(seconds, 1e-9), 1),
        "path": str(ws.art.path("entity_tables")),
    }

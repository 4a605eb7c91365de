"""Pipeline steps of the graph branch: node embeddings, vector indexes, graph store, entity tables."""

from __future__ import annotations

import time

import numpy as np

from grasp_core.components import EXTRACTOR, Components
from grasp_core.io import atomic_dir, write_json
from grasp_core.pipeline.step import step


@step("node_embeddings", reads=("encoder",))
def node_embeddings_step(components: Components) -> dict:
    from grasp_core.embed.node_embeddings import build_node_embeddings

    start = time.perf_counter()
    out = build_node_embeddings(
        components.graph, components.encoder, components.art.path("node_embeddings"), components.profile.encoder
    )
    seconds = time.perf_counter() - start
    return {
        "num_nodes": components.graph.num_nodes,
        "dim": components.encoder.dim,
        "encoder": components.encoder.identity,
        "seconds": round(seconds, 1),
        "nodes_per_second": round(2 * components.graph.num_nodes / max(seconds, 1e-9), 1),
        "path": str(out),
    }


@step("vector_indexes", reads=("index",))
def vector_indexes_step(components: Components) -> dict:
    from grasp_core.embed.vector_index import NodeIndex

    start = time.perf_counter()
    index = NodeIndex.build(components.graph, components.embeddings, components.profile.index)
    index.save(components.art.path("vector_indexes"))
    return {
        "indexes": {f"{t}/{k}": int(idx.ntotal) for (t, k), idx in index.indexes.items()},
        "seconds": round(time.perf_counter() - start, 2),
        "path": str(components.art.path("vector_indexes")),
    }


@step("graph_store", reads=("graph_store",))
def graph_store_step(components: Components) -> dict:
    from grasp_core.graph.open import open_graph_store

    start = time.perf_counter()
    cfg, path = components.profile.graph_store, components.art.path("graph_store")
    store = open_graph_store(cfg, path)
    try:
        store.load(components.graph)
        counts = store.counts()
    finally:
        store.close()
    seconds = time.perf_counter() - start
    if cfg.backend != "ladybug":  # a server holds the graph: the artifact records which one, and its counts
        from grasp_core.redact import redact

        with atomic_dir(path) as tmp:
            server = {"backend": cfg.backend, "uri": redact(cfg.neo4j_auth()[0]), "database": cfg.database}
            write_json(tmp / "server.json", {**server, **counts, "load_seconds": round(seconds, 2)})
    return {
        "backend": cfg.backend,
        "nodes_per_type": counts["nodes"],
        "edges_per_relation": counts["edges"],
        "load_seconds": round(seconds, 2),
        "edges_per_second": round(len(components.graph.edges) / max(seconds, 1e-9)),
        "path": str(components.art.path("graph_store")),
    }


@step("entity_tables", reads=EXTRACTOR)
def entity_tables_step(components: Components) -> dict:
    from grasp_core.entities.coverage import anchor_coverage
    from grasp_core.entities.dictionary import FILE, write_dictionary
    from grasp_core.entities.tables_io import write_tables

    start = time.perf_counter()
    queries = components.skb.queries
    tables = components.extractor.extract(queries["query"].tolist())
    seconds = time.perf_counter() - start
    with atomic_dir(components.art.path("entity_tables")) as tmp:
        write_tables(tmp / "tables.jsonl", queries["qid"].tolist(), tables)
        coverage = anchor_coverage(tables, queries, components.skb)
        write_json(tmp / "coverage.json", coverage)
        key = components.dictionary_key()
        if key is not None:  # the gazetteer's dictionary, for a process that answers questions to read
            write_dictionary(tmp / FILE, components.gazetteer.dictionary, key)
    rows = np.array([len(t.rows) for t in tables])
    return {
        "num_queries": len(tables),
        "mean_rows": round(float(rows.mean()), 2) if len(rows) else 0.0,
        "empty_tables": int((rows == 0).sum()),
        "coverage": coverage,
        "queries_per_second": round(len(tables) / max(seconds, 1e-9), 1),
        "path": str(components.art.path("entity_tables")),
    }

"""Pipeline steps for the data layer: the SKB graph and its queries as two artifacts.

Each step is a plain function ``(artifacts, dataset, config) -> metadata`` that writes its artifact
atomically; Dagster assets and the ``grasp`` CLI both call these.
"""

from __future__ import annotations

import time

from grasp_core.artifacts import Artifacts
from grasp_core.datasets import DatasetConfig, build_graph, build_queries
from grasp_core.skb.format import SKB, read_skb, validate, write_queries, write_skb


def build_skb_artifact(art: Artifacts, dataset: str, cfg: DatasetConfig) -> dict:
    """Build the dataset's graph and write it to ``<root>/<dataset>/skb`` (queries kept apart)."""
    start = time.perf_counter()
    graph = build_graph(dataset, cfg)
    built = time.perf_counter() - start
    write_skb(SKB(graph.schema, graph.nodes, graph.edges, graph.queries.iloc[0:0]), art.path("skb"))
    if len(graph.queries):  # sources that ship their queries (STaRK, user SKBs) keep them for the queries step
        write_queries(graph.queries, art.path("skb") / "source_queries.parquet")
    return {
        "num_nodes": graph.num_nodes,
        "num_edges": len(graph.edges),
        "nodes_per_type": graph.node_type_counts(),
        "edges_per_relation": graph.edge_counts(),
        "build_seconds": round(built, 2),
        "path": str(art.path("skb")),
    }


def build_queries_artifact(art: Artifacts, dataset: str, cfg: DatasetConfig) -> dict:
    """Synthesize (hpo, synth-*) or copy (STaRK, user) the queries into ``<root>/<dataset>/queries``."""
    skb_dir = art.require("skb")
    shipped = skb_dir / "source_queries.parquet"
    graph = read_skb(skb_dir, queries_file=shipped) if shipped.exists() else read_skb(skb_dir)
    queries = build_queries(dataset, graph, cfg)
    validate(SKB(graph.schema, graph.nodes, graph.edges, queries))
    from grasp_core.io import atomic_dir

    with atomic_dir(art.path("queries")) as tmp:
        write_queries(queries, tmp / "queries.parquet")
    counts = queries["split"].value_counts().sort_index()
    n_answers = queries["answer_ids"].map(len)
    return {
        "num_queries": len(queries),
        "queries_per_split": {str(k): int(v) for k, v in counts.items()},
        "mean_answers": round(float(n_answers.mean()), 2),
        "max_answers": int(n_answers.max()),
        "path": str(art.path("queries")),
    }


def load_dataset(art: Artifacts) -> SKB:
    """The dataset's SKB with its queries, read from the two finished artifacts."""
    return read_skb(art.require("skb"), queries_file=art.require("queries") / "queries.parquet")

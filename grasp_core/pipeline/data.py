"""Pipeline steps for the data layer: the SKB graph and its queries as two artifacts.

Each step is a plain function ``(artifacts, dataset, config) -> metadata`` that writes its artifact
atomically; Dagster assets and the ``grasp`` CLI both call these.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import pandas as pd

from grasp_core.artifacts import Artifacts
from grasp_core.components import Components
from grasp_core.datasets import DatasetConfig, build_graph, build_queries
from grasp_core.errors import GraspError
from grasp_core.feedback import store_path
from grasp_core.pipeline.step import step
from grasp_core.questions.feedback_queries import ConfirmedQuestion, feedback_queries, read_confirmed
from grasp_core.retrain_config import FeedbackConfig
from grasp_core.skb.format import (
    BUILT_FROM,
    FINGERPRINT,
    SKB,
    read_skb,
    validate,
    write_queries,
    write_skb,
)


def build_skb_artifact(art: Artifacts, dataset: str, cfg: DatasetConfig) -> dict:
    """Build the dataset's graph and write it to ``<root>/<dataset>/skb`` (queries kept apart)."""
    start = time.perf_counter()
    graph = build_graph(dataset, cfg)
    built = time.perf_counter() - start
    # sources that ship their queries (STaRK, user SKBs) keep them for the queries step, in the same directory
    write_skb(
        SKB(graph.schema, graph.nodes, graph.edges, graph.queries.iloc[0:0]),
        art.path("skb"),
        source_queries=graph.queries if len(graph.queries) else None,
    )
    return {
        "num_nodes": graph.num_nodes,
        "num_edges": len(graph.edges),
        "nodes_per_type": graph.node_type_counts(),
        "edges_per_relation": graph.edge_counts(),
        "build_seconds": round(built, 2),
        "path": str(art.path("skb")),
    }


def build_queries_artifact(
    art: Artifacts,
    dataset: str,
    cfg: DatasetConfig,
    feedback: Sequence[ConfirmedQuestion] = (),
    feedback_cfg: FeedbackConfig = FeedbackConfig(),
) -> dict:
    """Synthesize (hpo, synth-*) or copy (STaRK, user) the queries into ``<root>/<dataset>/queries``, with the
    questions confirmed in use (``feedback``) as ``train`` and held-out ``feedback`` questions."""
    skb_dir = art.require("skb")
    shipped = skb_dir / "source_queries.parquet"
    graph = read_skb(skb_dir, queries_file=shipped) if shipped.exists() else read_skb(skb_dir)
    queries = build_queries(dataset, graph, cfg)
    if len(queries) == 0:
        raise GraspError(f"no queries for {dataset!r}: the source ships none and none were synthesized")
    from_use = feedback_queries(feedback, queries, graph.num_nodes, feedback_cfg)
    if len(from_use):
        queries = pd.concat([queries, from_use], ignore_index=True)
    validate(SKB(graph.schema, graph.nodes, graph.edges, queries))
    from grasp_core.io import atomic_dir, write_json

    with atomic_dir(art.path("queries")) as tmp:
        write_queries(queries, tmp / "queries.parquet")
        if (skb_dir / FINGERPRINT).exists():
            write_json(tmp / BUILT_FROM, {"skb": (skb_dir / FINGERPRINT).read_text().strip()})
    counts = queries["split"].value_counts().sort_index()
    n_answers = queries["answer_ids"].map(len)
    return {
        "num_queries": len(queries),
        "queries_per_split": {str(k): int(v) for k, v in counts.items()},
        "mean_answers": round(float(n_answers.mean()), 2),
        "max_answers": int(n_answers.max()),
        "feedback_questions": len(from_use),
        "path": str(art.path("queries")),
    }


@step("skb", reads=("dataset",))
def skb_step(components: Components) -> dict:
    return build_skb_artifact(components.art, components.dataset, components.profile.dataset)


@step("queries", reads=("dataset", "feedback"))
def queries_step(components: Components) -> dict:
    feedback = read_confirmed(store_path(components.dataset), components.dataset)
    return build_queries_artifact(
        components.art, components.dataset, components.profile.dataset, feedback, components.profile.feedback
    )


def load_dataset(art: Artifacts) -> SKB:
    """The dataset's SKB with its queries, read from the two finished artifacts."""
    return read_skb(art.require("skb"), queries_file=art.require("queries") / "queries.parquet")

"""Graph-branch assets: node embeddings, vector indexes, the graph store, entity tables."""

import dagster as dg

from grasp_assets.partitions import dataset_partitions
from grasp_assets.resources import MLflowTracking, SettingsResource
from grasp_assets.stages import GRAPH_STORE, QUERIES, SKB
from grasp_assets.steps import HEAVY, RETRY, run_step
from grasp_core.pipeline import graph as steps

COMMON = dict(partitions_def=dataset_partitions, group_name="graph_branch", retry_policy=RETRY)


@dg.asset(deps=[SKB], pool="heavy", op_tags=HEAVY, **COMMON)
def node_embeddings(context: dg.AssetExecutionContext, settings: SettingsResource, mlflow: MLflowTracking):
    """Name and document vectors of every node (float16, keyed by encoder identity and text hashes; resumable)."""
    return run_step(context, settings, mlflow, steps.node_embeddings_step)


@dg.asset(deps=[node_embeddings], **COMMON)
def vector_indexes(context: dg.AssetExecutionContext, settings: SettingsResource, mlflow: MLflowTracking):
    """Per node type, an exact inner-product faiss index over names and one over documents."""
    return run_step(context, settings, mlflow, steps.vector_indexes_step)


@dg.asset(
    deps=[SKB],
    check_specs=[
        dg.AssetCheckSpec("counts_match_skb", asset=GRAPH_STORE, description="node/edge counts equal the SKB's")
    ],
    **COMMON,
)
def graph_store(context: dg.AssetExecutionContext, settings: SettingsResource, mlflow: MLflowTracking):
    """The SKB loaded into the graph store (embedded LadybugDB by default, Neo4j by configuration)."""

    def checks(result: dict) -> list[dg.AssetCheckResult]:
        from grasp_core.skb.format import read_skb

        graph = read_skb(settings.artifacts(context.partition_key).require("skb"), with_queries=False)
        ok = (
            result["nodes_per_type"] == graph.node_type_counts() and result["edges_per_relation"] == graph.edge_counts()
        )
        return [
            dg.AssetCheckResult(
                check_name="counts_match_skb",
                passed=ok,
                metadata={
                    "nodes": sum(result["nodes_per_type"].values()),
                    "edges": sum(result["edges_per_relation"].values()),
                },
            )
        ]

    return run_step(context, settings, mlflow, steps.graph_store_step, check_results=checks)


@dg.asset(deps=[QUERIES, vector_indexes], **COMMON)
def entity_tables(context: dg.AssetExecutionContext, settings: SettingsResource, mlflow: MLflowTracking):
    """Every query's entity table (gazetteer extraction + linking), with gold-path anchor coverage."""
    return run_step(context, settings, mlflow, steps.entity_tables_step)

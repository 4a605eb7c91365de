"""Data assets: the SKB graph and its queries, with checks computed in the same step."""

import dagster as dg
import numpy as np

from grasp_assets.freshness import feedback_source, skb_source
from grasp_assets.partitions import dataset_of, dataset_partitions
from grasp_assets.resources import MLflowTracking, SettingsResource
from grasp_assets.stages import QUERIES, SKB
from grasp_assets.steps import RETRY, run_step
from grasp_core.pipeline.data import load_dataset, queries_step, skb_step
from grasp_core.skb.format import read_skb

COMMON = dict(partitions_def=dataset_partitions, group_name="data", retry_policy=RETRY)


@dg.asset(
    deps=[skb_source],
    check_specs=[
        dg.AssetCheckSpec("schema_valid", asset=SKB, description="nodes and edges conform to schema.json"),
        dg.AssetCheckSpec("no_dangling_edges", asset=SKB, description="every edge endpoint is a node"),
    ],
    **COMMON,
)
def skb(context: dg.AssetExecutionContext, settings: SettingsResource, mlflow: MLflowTracking) -> dg.MaterializeResult:
    """The dataset's graph (schema.json, nodes.parquet, edges.parquet) in the on-disk SKB format."""
    art = settings.artifacts(dataset_of(context))

    def checks(result: dict) -> list[dg.AssetCheckResult]:
        graph = read_skb(art.path("skb"), with_queries=False)  # validates schema, types, relation endpoints, keys
        ends = graph.edges[["src", "dst"]].to_numpy()
        dangling = int(((ends < 0) | (ends >= graph.num_nodes)).sum())
        return [
            dg.AssetCheckResult(
                check_name="schema_valid", passed=True, metadata={"node_types": len(graph.schema.node_types)}
            ),
            dg.AssetCheckResult(check_name="no_dangling_edges", passed=dangling == 0, metadata={"dangling": dangling}),
        ]

    return run_step(
        context,
        settings,
        mlflow,
        skb_step,
        check_results=checks,
    )


@dg.asset(
    deps=[skb, feedback_source],
    check_specs=[
        dg.AssetCheckSpec("answers_exist", asset=QUERIES, description="every answer id is a node"),
        dg.AssetCheckSpec(
            "split_sizes",
            asset=QUERIES,
            description="train/val/test are non-empty; no val/test/test-human/val-human/feedback text is a train text",
        ),
    ],
    **COMMON,
)
def queries(
    context: dg.AssetExecutionContext, settings: SettingsResource, mlflow: MLflowTracking
) -> dg.MaterializeResult:
    """The dataset's queries (qid, split, query, answer_ids) with train/val/test splits, and the questions confirmed
    in use: `train`, and the held-out `feedback` split."""
    art = settings.artifacts(dataset_of(context))

    def checks(result: dict) -> list[dg.AssetCheckResult]:
        data = load_dataset(art)
        answers = np.concatenate([np.asarray(a) for a in data.queries["answer_ids"]])
        missing = int(((answers < 0) | (answers >= data.num_nodes)).sum())
        per_split = result["queries_per_split"]
        held_out = ("val", "test", "test-human", "val-human", "feedback")
        texts = {s: set(data.split(s)["query"]) for s in ("train", *held_out)}
        overlap = sum(len(texts["train"] & texts[s]) for s in held_out)
        sizes_ok = all(per_split.get(s, 0) > 0 for s in ("train", "val", "test")) and overlap == 0
        return [
            dg.AssetCheckResult(check_name="answers_exist", passed=missing == 0, metadata={"missing": missing}),
            dg.AssetCheckResult(
                check_name="split_sizes",
                passed=sizes_ok,
                metadata={**{k: int(v) for k, v in per_split.items()}, "shared_texts": overlap},
            ),
        ]

    return run_step(
        context,
        settings,
        mlflow,
        queries_step,
        check_results=checks,
    )

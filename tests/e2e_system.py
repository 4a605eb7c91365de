"""The tiny trained system the end-to-end modules start from: a user SKB imported from CSV files (the tiny
synth-prime graph as a user's export would have it, with no queries, so the pipeline synthesizes them from the
schema) and the whole DAG materialized through Dagster with the `smoke` profile. Each end-to-end module builds its
own (a module fixture calling :func:`trained_system`), so the modules run on parallel workers and a module that
changes its build never disturbs another's."""

import pytest

from grasp_core.artifacts import Artifacts

DATASET = "mykb"  # a user SKB, imported from CSV files


def csv_files(tmp):
    """nodes.csv / edges.csv of the tiny synth-prime graph, as a user's export would have them."""
    from grasp_core.sources.synth import build_synth_skb

    skb = build_synth_skb("prime", "tiny", seed=0)
    skb.nodes.rename(columns={"key": "id"}).drop(columns="node_id").to_csv(tmp / "nodes.csv", index=False)
    keys = skb.nodes["key"].to_numpy()
    edges = skb.edges.assign(src=keys[skb.edges["src"]], dst=keys[skb.edges["dst"]])
    edges[["src", "rel", "dst"]].to_csv(tmp / "edges.csv", index=False)
    return tmp / "nodes.csv", tmp / "edges.csv"


def trained_system(tmp_path_factory):
    """Import the SKB and build everything in a fresh instance (DAGSTER_HOME, MLflow store, user SKBs under one
    temporary folder); yields ``(folder, the pipeline's stage timings)`` and restores the environment after."""
    tmp = tmp_path_factory.mktemp("e2e")
    mp = pytest.MonkeyPatch()
    mp.setenv("DAGSTER_HOME", str(tmp / "dagster_home"))
    mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp / 'mlflow.db'}")
    mp.setenv("GRASP_USER_SKBS", str(tmp / "user_skbs"))
    (tmp / "dagster_home").mkdir()
    from grasp_assets.run import run_pipeline
    from grasp_core.cli import main

    nodes, edges = csv_files(tmp)
    assert main(["data", "import", DATASET, "--nodes", str(nodes), "--edges", str(edges)]) == 0
    (tmp / "user_skbs" / DATASET / "queries.parquet").unlink()  # a user SKB directory with no queries at all

    timings = run_pipeline(DATASET, profile="smoke", root=str(tmp / "artifacts"))
    yield tmp, timings
    mp.undo()


def a_test_question(root) -> str:
    """The first test question of the build's queries."""
    import pandas as pd

    queries = pd.read_parquet(Artifacts.for_dataset(DATASET, root).path("queries") / "queries.parquet")
    return str(queries.loc[queries["split"] == "test", "query"].iloc[0])

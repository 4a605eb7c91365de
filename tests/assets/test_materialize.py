"""A real Dagster materialization of the data assets, with their checks and the MLflow run they log."""

import dagster as dg
import pytest
from mlflow.tracking import MlflowClient

from grasp_assets.assets import data
from grasp_assets.resources import MLflowTracking, SettingsResource
from grasp_core.artifacts import Artifacts
from grasp_core.pipeline.data import load_dataset


@pytest.fixture
def env(tmp_path):
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("dataset", ["synth-prime"])
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    resources = {
        "settings": SettingsResource(
            profile="cpu", artifacts_root=str(tmp_path / "artifacts"), scale="tiny", n_queries=60
        ),
        "mlflow": MLflowTracking(tracking_uri=uri, experiment="test"),
    }
    return instance, resources, tmp_path, uri


def test_skb_and_queries_materialize_with_passing_checks_and_mlflow_runs(env):
    instance, resources, tmp_path, uri = env
    result = dg.materialize(
        [data.skb, data.queries], instance=instance, resources=resources, partition_key="synth-prime"
    )
    assert result.success
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {"schema_valid": True, "no_dangling_edges": True, "answers_exist": True, "split_sizes": True}

    skb = load_dataset(Artifacts.for_dataset("synth-prime", tmp_path / "artifacts"))
    meta = result.asset_materializations_for_node("skb")[0].metadata
    assert meta["num_nodes"].value == skb.num_nodes and meta["num_edges"].value == len(skb.edges)
    qmeta = result.asset_materializations_for_node("queries")[0].metadata
    # beside them, for train/val: term look-ups and search-box questions (look-ups, findings lists)
    synthesized = ~skb.queries["template"].str.startswith(("term>", "intent:"))
    assert qmeta["num_queries"].value == len(skb.queries) and synthesized.sum() == 60

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("test")
    runs = {r.data.tags["step"]: r for r in client.search_runs([exp.experiment_id])}
    assert set(runs) == {"skb", "queries"}
    assert runs["skb"].data.metrics["num_nodes"] == skb.num_nodes
    assert runs["skb"].data.tags["dataset"] == "synth-prime"


def test_unknown_dataset_fails_without_retry(env):
    instance, resources, _, _ = env
    instance.add_dynamic_partitions("dataset", ["no-such-dataset"])
    result = dg.materialize(
        [data.skb], instance=instance, resources=resources, partition_key="no-such-dataset", raise_on_error=False
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "unknown dataset 'no-such-dataset'" in str(failure.event_specific_data.error)
    assert not any(e.event_type_value == "STEP_UP_FOR_RETRY" for e in result.all_events)


def test_a_user_skb_with_bad_queries_is_never_marked_complete_nor_retried(env, monkeypatch):
    """String qids in a user SKB: the skb step fails at once (no retry) and leaves no complete artifact."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from grasp_core.io import is_complete
    from grasp_core.skb.format import write_skb
    from tests.skb.test_format import toy_skb

    instance, resources, tmp_path, _ = env
    monkeypatch.setenv("GRASP_USER_SKBS", str(tmp_path / "user"))
    path = write_skb(toy_skb(), tmp_path / "user" / "toy")
    frame = pq.read_table(path / "queries.parquet").to_pandas()
    frame["qid"] = pd.Series(["q7", "q8"], dtype=object)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path / "queries.parquet")
    instance.add_dynamic_partitions("dataset", ["toy"])
    result = dg.materialize(
        [data.skb], instance=instance, resources=resources, partition_key="toy", raise_on_error=False
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "row 0: qid 'q7' is not an integer" in str(failure.event_specific_data.error)
    assert not any(e.event_type_value == "STEP_UP_FOR_RETRY" for e in result.all_events)
    assert not is_complete(Artifacts.for_dataset("toy", tmp_path / "artifacts").path("skb"))


def test_a_password_appears_in_no_mlflow_param_tag_dagster_event_or_log_line(env, monkeypatch, capfd, caplog):
    import dataclasses

    from grasp_assets import resources as resources_module
    from grasp_assets.assets import graph
    from grasp_core.graph.config import GraphStoreConfig

    secret = "S3cr3t-pw-4711"
    instance, resources, tmp_path, uri = env
    assert dg.materialize([data.skb], instance=instance, resources=resources, partition_key="synth-prime").success
    monkeypatch.setenv("NEO4J_PASSWORD", secret)
    real = resources_module.get_profile
    neo4j = GraphStoreConfig(backend="neo4j", uri=f"bolt://neo4j:{secret}@127.0.0.1:9")  # nothing listens there
    monkeypatch.setattr(
        resources_module, "get_profile", lambda name: dataclasses.replace(real(name), graph_store=neo4j)
    )
    result = dg.materialize(
        [graph.graph_store],
        instance=instance,
        resources=resources,
        partition_key="synth-prime",
        raise_on_error=False,
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "cannot connect to Neo4j at bolt://neo4j:***@127.0.0.1:9" in str(failure.event_specific_data.error)

    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("test").experiment_id])
    store_run = next(r for r in runs if r.data.tags["step"] == "graph_store")
    assert store_run.data.params["graph_store.uri"] == "bolt://neo4j:***@127.0.0.1:9"
    for run in runs:
        assert all(secret not in str(v) for v in [*run.data.params.values(), *run.data.tags.values()])
    for record in instance.all_logs(result.run_id):
        assert secret not in repr(record)
    out, err = capfd.readouterr()
    assert secret not in out + err + caplog.text

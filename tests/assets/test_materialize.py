"""A real Dagster materialization of the data assets, with their checks and the MLflow run they log."""

import dagster as dg
import pytest
from mlflow.tracking import MlflowClient

from grasp_assets.assets import data
from grasp_assets.resources import GraspSettings, MLflowTracking
from grasp_core.artifacts import Artifacts
from grasp_core.pipeline.data import load_dataset


@pytest.fixture
def env(tmp_path):
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("dataset", ["synth-prime"])
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    resources = {
        "settings": GraspSettings(
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
    assert qmeta["num_queries"].value == len(skb.queries) == 60

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

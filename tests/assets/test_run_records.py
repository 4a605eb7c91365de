"""Step times read back from a real Dagster instance's event log: per asset and partition, the latest success."""

import time

import dagster as dg

from grasp_assets.partitions import dataset_partitions, dataset_round_partitions
from grasp_assets.run_records import step_seconds

SLEEP = {"hpo": 1.0, "synth-mag": 0.0}


@dg.asset(partitions_def=dataset_partitions)
def slow(context: dg.AssetExecutionContext) -> None:
    time.sleep(SLEEP[context.partition_key])


@dg.asset_check(asset=slow)
def slow_is_done() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=True)


@dg.asset(partitions_def=dataset_round_partitions)
def per_round(context: dg.AssetExecutionContext) -> None:
    time.sleep(0.2)


def test_latest_success_per_asset_and_partition():
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("dataset", ["hpo", "synth-mag"])
    for key in ("hpo", "synth-mag"):
        assert dg.materialize([slow], instance=instance, partition_key=key).success
    round_key = dg.MultiPartitionKey({"dataset": "hpo", "round": "2"})
    assert dg.materialize([per_round], instance=instance, partition_key=round_key).success
    steps = step_seconds("hpo", instance)
    assert set(steps) == {"slow", "per_round/2"}
    assert 1.0 <= steps["slow"] < 6 and 0.2 <= steps["per_round/2"] < 5
    SLEEP["hpo"] = 0.0  # a later, faster success replaces the earlier one
    assert dg.materialize([slow], instance=instance, partition_key="hpo").success
    assert step_seconds("hpo", instance)["slow"] < 1.0
    assert set(step_seconds("synth-mag", instance)) == {"slow"}
    assert step_seconds("synth-prime", instance) == {}


def test_asset_checks_are_not_steps_of_an_asset():
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("dataset", ["hpo"])
    result = dg.materialize([slow, slow_is_done], instance=instance, partition_key="hpo")
    assert result.success and result.get_asset_check_evaluations()
    assert set(step_seconds("hpo", instance)) == {"slow"}

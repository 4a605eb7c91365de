"""Step times read back from a real Dagster instance's event log: per asset and partition, the latest success."""

import time

import dagster as dg

from grasp_assets.partitions import dataset_partitions, dataset_round_partitions
from grasp_assets.run_records import step_seconds

SLEEP = {"hpo": 1.0, "synth-mag": 0.0}
REUSE = {"hpo": False}


@dg.asset(partitions_def=dataset_partitions)
def slow(context: dg.AssetExecutionContext) -> None:
    time.sleep(SLEEP[context.partition_key])


@dg.asset_check(asset=slow)
def slow_is_done() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=True)


@dg.asset(partitions_def=dataset_partitions)
def built_once(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    """Built (1 s) unless told to reuse, as a step of ``grasp_assets.steps`` does when code, inputs and settings
    are unchanged (its materialization then says ``reused_from``)."""
    if REUSE["hpo"]:
        return dg.MaterializeResult(metadata={"reused_from": "hpo (digest)"})
    time.sleep(1.0)
    return dg.MaterializeResult()


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


def test_a_reused_step_keeps_the_time_of_the_step_that_built_it():
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("dataset", ["hpo"])
    REUSE["hpo"] = True  # reused with nothing built before it in this partition (a variant's hard link): its time
    assert dg.materialize([built_once], instance=instance, partition_key="hpo").success
    assert step_seconds("hpo", instance)["built_once"] < 1.0
    REUSE["hpo"] = False
    assert dg.materialize([built_once], instance=instance, partition_key="hpo").success
    REUSE["hpo"] = True  # rematerialized unchanged: the build's time stays
    assert dg.materialize([built_once], instance=instance, partition_key="hpo").success
    assert step_seconds("hpo", instance)["built_once"] >= 1.0

"""The dataset registry sensor, the stage-chaining run-status sensor and the weekly schedule, with real Dagster
instances and runs."""

from datetime import UTC, datetime

import dagster as dg
import pandas as pd
import pytest

from grasp_assets.automation import chain_training_stages, dataset_registry, weekly_retraining
from grasp_assets.definitions import defs
from grasp_assets.partitions import DATASET
from grasp_core.datasets import BUILTIN
from grasp_core.skb.format import SKB, write_skb
from grasp_core.skb.schema import Relation, Schema


def tiny_skb() -> SKB:
    schema = Schema(
        name="shop",
        node_types={"product": ("description",), "brand": ()},
        relations=(Relation("has_brand", "product", "brand"),),
    )
    nodes = pd.DataFrame(
        {
            "node_id": [0, 1, 2],
            "key": ["p1", "p2", "b1"],
            "type": ["product", "product", "brand"],
            "name": ["Shoe", "Stove", "Acme"],
            "description": ["light", "steel", None],
        }
    )
    edges = pd.DataFrame({"src": [0, 1], "rel": ["has_brand", "has_brand"], "dst": [2, 2]})
    queries = pd.DataFrame(
        {"qid": [1, 2], "split": ["train", "test"], "query": ["an Acme shoe", "a stove"], "answer_ids": [[0], [1]]}
    )
    return SKB(schema, nodes, edges, queries)


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        yield inst


@pytest.fixture
def user_skbs(tmp_path, monkeypatch):
    root = tmp_path / "user_skbs"
    write_skb(tiny_skb(), root / "shop")
    (root / "half-copied").mkdir()  # no parquet files yet: not a dataset
    (root / "half-copied" / "schema.json").write_text("{}")
    monkeypatch.setenv("GRASP_USER_SKBS", str(root))
    return root


def _apply(instance, result: dg.SensorResult) -> None:
    """What the daemon does with a tick's dynamic partition requests."""
    for request in result.dynamic_partitions_requests:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))


def test_dataset_registry_registers_builtins_and_user_skb_and_prepares_only_the_user_skb(instance, user_skbs):
    result = dataset_registry(dg.build_sensor_context(instance=instance))
    assert isinstance(result, dg.SensorResult)
    [added] = result.dynamic_partitions_requests
    assert added.partitions_def_name == DATASET
    assert list(added.partition_keys) == [*BUILTIN, "shop"]
    assert [(r.partition_key, r.run_key) for r in result.run_requests] == [("shop", "register-shop")]
    _apply(instance, result)
    assert set(instance.get_dynamic_partitions(DATASET)) == {*BUILTIN, "shop"}
    # the requested run is valid for the real `prepare` job once the partition exists
    prepare = defs.resolve_job_def("prepare")
    assert prepare.partitions_def.has_partition_key("shop", dynamic_partitions_store=instance)

    again = dataset_registry(dg.build_sensor_context(instance=instance))
    assert isinstance(again, dg.SkipReason)

    write_skb(tiny_skb(), user_skbs / "shop-v2")
    third = dataset_registry(dg.build_sensor_context(instance=instance))
    assert list(third.dynamic_partitions_requests[0].partition_keys) == ["shop-v2"]
    assert [r.partition_key for r in third.run_requests] == ["shop-v2"]


def _stand_in(name: str) -> dg.JobDefinition:
    """A no-op job with the real job's name and partitions, so its runs carry the tags Dagster gives that job."""

    @dg.op
    def noop():
        return None

    @dg.job(name=name, partitions_def=defs.resolve_job_def(name).partitions_def)
    def job():
        noop()

    return job


def _succeed(instance, job_name: str, partition_key: str):
    """Run the stage to success and evaluate the chaining sensor on its success event."""
    result = _stand_in(job_name).execute_in_process(instance=instance, partition_key=partition_key)
    assert result.success
    context = dg.build_run_status_sensor_context(
        sensor_name=chain_training_stages.name,
        dagster_instance=instance,
        dagster_run=result.dagster_run,
        dagster_event=result.get_run_success_event(),
    )
    return result.run_id, chain_training_stages(context)


def test_chain_training_stages_prepare_round1_round2_finish(instance):
    instance.add_dynamic_partitions(DATASET, ["hpo", "synth-prime"])
    run_id, to_r1 = _succeed(instance, "prepare", "synth-prime")
    assert to_r1.job_name == "rl_round" and to_r1.run_key == f"{run_id}-r1"
    assert to_r1.partition_key.keys_by_dimension == {DATASET: "synth-prime", "round": "1"}

    run_id, to_r2 = _succeed(instance, "rl_round", to_r1.partition_key)
    assert to_r2.job_name == "rl_round" and to_r2.run_key == f"{run_id}-r2"
    assert to_r2.partition_key.keys_by_dimension == {DATASET: "synth-prime", "round": "2"}

    run_id, to_finish = _succeed(instance, "rl_round", to_r2.partition_key)
    assert (to_finish.job_name, to_finish.partition_key, to_finish.run_key) == (
        "finish",
        "synth-prime",
        f"{run_id}-finish",
    )

    _, after_finish = _succeed(instance, "finish", to_finish.partition_key)
    assert isinstance(after_finish, dg.SkipReason)


def test_weekly_retraining_one_run_per_registered_dataset(instance):
    tick = datetime(2025, 1, 5, 3, 0, tzinfo=UTC)  # a Sunday 03:00
    assert list(weekly_retraining(dg.build_schedule_context(instance=instance, scheduled_execution_time=tick))) == []
    instance.add_dynamic_partitions(DATASET, ["hpo", "synth-prime", "shop"])
    requests = list(weekly_retraining(dg.build_schedule_context(instance=instance, scheduled_execution_time=tick)))
    assert sorted((r.partition_key, r.run_key) for r in requests) == [
        ("hpo", "hpo-20250105"),
        ("shop", "shop-20250105"),
        ("synth-prime", "synth-prime-20250105"),
    ]
    assert dg.DefaultScheduleStatus.STOPPED == weekly_retraining.default_status

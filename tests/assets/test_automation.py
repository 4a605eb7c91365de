"""The dataset registry sensor, the stage-chaining run-status sensor and the weekly schedule, with real Dagster
instances and runs."""

from datetime import UTC, datetime

import dagster as dg
import pandas as pd
import pytest

from grasp_assets.automation import (
    chain_training_stages,
    continue_after_a_failed_gate,
    dataset_registry,
    weekly_retraining,
)
from grasp_assets.definitions import defs
from grasp_assets.freshness import next_work
from grasp_assets.partitions import DATASET
from grasp_assets.stages import FINISH, GATE_CHECK, PLANNER, PREPARE, RL_ROUND, STAGE_ASSETS, Step
from grasp_core.artifacts import Artifacts
from grasp_core.datasets import BUILTIN
from grasp_core.io import atomic_dir
from grasp_core.planner.rounds import Gate
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
        repository_def=defs.get_repository_def(),
    )
    return result.run_id, chain_training_stages(context)


@pytest.fixture
def no_artifacts(tmp_path, monkeypatch):
    monkeypatch.setenv("GRASP_HOME", str(tmp_path / "artifacts"))
    return Artifacts.for_dataset("synth-prime", tmp_path / "artifacts")


def test_next_work_is_the_first_wave_of_the_first_stage_with_something_to_rebuild(instance, no_artifacts):
    graph = defs.resolve_asset_graph()
    prepare, finish = set(STAGE_ASSETS[PREPARE]), set(STAGE_ASSETS[FINISH])
    assert next_work(instance, graph, no_artifacts) == (Step(PREPARE), {"skb": "missing"})
    # the same stage again while it has assets the last run did not build, then the next stage with any
    assert next_work(instance, graph, no_artifacts, Step(PREPARE), {"skb"}) == (
        Step(PREPARE),
        {"graph_store": "missing", "node_embeddings": "missing", "queries": "missing"},
    )
    assert next_work(instance, graph, no_artifacts, Step(PREPARE), prepare) == (
        Step(RL_ROUND, "1"),
        {"rft_samples": "missing"},
    )
    assert next_work(instance, graph, no_artifacts, Step(RL_ROUND, "2"), {"rft_samples", "planner"}) == (
        Step(FINISH),
        {"reranker_hard_negatives": "missing"},
    )
    assert next_work(instance, graph, no_artifacts, Step(FINISH), finish) is None


def test_chain_training_stages_requests_the_next_wave(instance, no_artifacts):
    instance.add_dynamic_partitions(DATASET, ["hpo", "synth-prime"])
    run_id, again = _succeed(instance, "prepare", "synth-prime")  # a run that built nothing: prepare's first wave
    assert (again.job_name, again.partition_key, again.run_key) == ("prepare", "synth-prime", f"{run_id}-prepare")
    assert again.asset_selection == [dg.AssetKey("skb")] and again.tags["grasp/why"] == "skb: missing"

    run_id, round_1 = _succeed(instance, "rl_round", dg.MultiPartitionKey({DATASET: "synth-prime", "round": "1"}))
    assert round_1.job_name == "rl_round" and round_1.run_key == f"{run_id}-r1"
    assert round_1.partition_key.keys_by_dimension == {DATASET: "synth-prime", "round": "1"}
    assert round_1.asset_selection == [dg.AssetKey("rft_samples")]


def _round_run(instance, passed: bool | None):
    """A real run of an `rl_round`-named job for synth-prime round 1 whose `planner` asset carries the blocking gate
    check: it fails at the gate (passed False), passes it, or fails before it (None: the asset raises)."""
    partitions = defs.resolve_job_def(RL_ROUND).partitions_def

    @dg.asset(
        name=PLANNER,
        partitions_def=partitions,
        check_specs=[dg.AssetCheckSpec(GATE_CHECK, asset=PLANNER, blocking=True)],
    )
    def planner():
        if passed is None:
            raise RuntimeError("GRPO ran out of memory")
        return dg.MaterializeResult(check_results=[dg.AssetCheckResult(check_name=GATE_CHECK, passed=passed)])

    job = dg.Definitions(assets=[planner], jobs=[dg.define_asset_job(RL_ROUND, partitions_def=partitions)])
    key = dg.MultiPartitionKey({DATASET: "synth-prime", "round": "1"})
    result = job.resolve_job_def(RL_ROUND).execute_in_process(
        instance=instance, partition_key=key, raise_on_error=False
    )
    event = result.get_run_failure_event() if passed is not True else result.get_run_success_event()
    context = dg.build_run_status_sensor_context(
        sensor_name=continue_after_a_failed_gate.name,
        dagster_instance=instance,
        dagster_run=result.dagster_run,
        dagster_event=event,
        repository_def=defs.get_repository_def(),
    )
    return result, context


def test_a_round_stopped_by_its_gate_passes_over_later_rounds_to_finish(instance, no_artifacts):
    """As `grasp pipeline`: after round 1's gate fails (a tie) the daemon launches `finish`, never round 2; a round
    that failed before its gate launches nothing."""
    instance.add_dynamic_partitions(DATASET, ["synth-prime"])
    with atomic_dir(no_artifacts.path(PLANNER, "1")) as tmp:
        Gate(val_fused_hit1=30.0, previous=30.0).write(tmp)
    result, context = _round_run(instance, passed=False)
    assert not result.success
    request = continue_after_a_failed_gate(context)
    assert (request.job_name, request.partition_key) == ("finish", "synth-prime")
    assert request.run_key == f"{result.run_id}-finish"
    assert request.asset_selection == [dg.AssetKey("reranker_hard_negatives")]
    graph = defs.resolve_asset_graph()
    assert next_work(instance, graph, no_artifacts)[0] == Step(PREPARE)  # the passing-over is next_work's
    assert next_work(instance, graph, no_artifacts, Step(RL_ROUND, "2"))[0] == Step(FINISH)

    crashed, context = _round_run(instance, passed=None)
    assert not crashed.success
    assert isinstance(continue_after_a_failed_gate(context), dg.SkipReason)


def test_weekly_retraining_one_run_per_registered_dataset_for_what_is_stale(instance, no_artifacts):
    tick = datetime(2025, 1, 5, 3, 0, tzinfo=UTC)  # a Sunday 03:00

    def ticked():
        context = dg.build_schedule_context(
            instance=instance, scheduled_execution_time=tick, repository_def=defs.get_repository_def()
        )
        return list(weekly_retraining(context))

    assert ticked() == []
    instance.add_dynamic_partitions(DATASET, ["synth-mag", "synth-prime"])
    requests = ticked()
    assert sorted((r.partition_key, r.run_key) for r in requests) == [
        ("synth-mag", "synth-mag-20250105"),
        ("synth-prime", "synth-prime-20250105"),
    ]
    assert all(r.asset_selection == [dg.AssetKey("skb")] for r in requests)
    assert dg.DefaultScheduleStatus.STOPPED == weekly_retraining.default_status

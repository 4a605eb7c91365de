"""`grasp pipeline` materializes exactly the assets whose artifact is missing or incomplete, and their downstream."""

import os

import dagster as dg
import pytest

from grasp_assets import stages
from grasp_assets.definitions import defs
from grasp_assets.run import _missing
from grasp_core.artifacts import Artifacts
from grasp_core.io import COMPLETE_MARKER, atomic_dir
from grasp_core.planner.rounds import Gate

PREPARE, RL_ROUND = stages.Step(stages.PREPARE).selection, stages.Step(stages.RL_ROUND, "1").selection


def _names(selection: dg.AssetSelection | None) -> set[str] | None:
    return None if selection is None else {k.to_user_string() for k in selection.resolve(defs.resolve_asset_graph())}


def _complete(art: Artifacts, name: str, round_key: str | None = None) -> None:
    with atomic_dir(art.path(name, round_key)) as tmp:
        (tmp / "data.txt").write_text(name)


@pytest.fixture
def art(tmp_path) -> Artifacts:
    return Artifacts.for_dataset("hpo", tmp_path)


def test_missing_and_interrupted_assets_and_their_downstream(art):
    everything = _names(PREPARE)
    for name in everything - {"teacher_plans", "mfar_model"}:
        _complete(art, name)
    art.path("mfar_model").mkdir(parents=True)  # an interrupted run left it without its completion marker
    assert _names(_missing(PREPARE, art, None, force=False)) == {
        "teacher_plans",
        "planner_base",
        "sft_adapter",
        "reward_table",  # teacher_plans and downstream
        "mfar_model",
        "text_rankings",  # mfar_model and downstream (sft_adapter, reward_table already in)
    }


def test_nothing_missing_is_none_and_force_is_everything(art):
    for name in _names(PREPARE):
        _complete(art, name)
    assert _missing(PREPARE, art, None, force=False) is None
    assert _names(_missing(PREPARE, art, None, force=True)) == _names(PREPARE)


def test_downstream_stays_inside_the_stage(art):
    assert _names(_missing(PREPARE, art, None, force=False)) == _names(PREPARE)  # nothing built: the whole stage
    assert "rft_samples" not in _names(_missing(PREPARE, art, None, force=False))


def test_round_assets_are_checked_per_round(art):
    _complete(art, "rft_samples", "1")
    _complete(art, "planner", "1")
    _complete(art, "planner", "2")
    assert _missing(RL_ROUND, art, "1", force=False) is None
    assert _names(_missing(RL_ROUND, art, "2", force=False)) == {"rft_samples", "planner"}
    _complete(art, "rft_samples", "2")
    (art.path("planner", "2") / COMPLETE_MARKER).unlink()  # round 2's planner interrupted
    assert _names(_missing(RL_ROUND, art, "2", force=False)) == {"planner"}


def test_rounds_after_a_failed_gate_are_skipped_on_every_run(tmp_path, monkeypatch, capsys):
    from grasp_assets.run import run_pipeline

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    art = Artifacts.for_dataset("hpo", tmp_path / "artifacts")
    _complete(art, "rft_samples", "1")
    with atomic_dir(art.path("planner", "1")) as tmp:
        Gate(val_fused_hit1=25.0, previous=30.0).write(tmp)
    assert run_pipeline("hpo", root=str(tmp_path / "artifacts"), stages=("rl",)) == {}  # nothing materialized
    out = capsys.readouterr().out
    assert "RL round 1: up to date" in out and "RL round 2: skipped, round 1's validation gate failed" in out


def test_runs_of_dead_processes_are_failed_and_free_their_pool_slots(tmp_path):
    from dagster._core.storage.dagster_run import DagsterRun, DagsterRunStatus

    from grasp_assets.run import PID_TAG, release_dead_runs

    instance = dg.DagsterInstance.local_temp(str(tmp_path))
    storage = instance.event_log_storage
    storage.set_concurrency_slots("heavy", 1)
    dead = DagsterRun(job_name="j", status=DagsterRunStatus.STARTED, tags={PID_TAG: "999999999"})
    alive = DagsterRun(job_name="j", status=DagsterRunStatus.STARTED, tags={PID_TAG: str(os.getpid())})
    for run in (dead, alive):
        instance.add_run(run)
    assert storage.claim_concurrency_slot("heavy", dead.run_id, "sft_adapter").is_claimed
    assert not storage.claim_concurrency_slot("heavy", alive.run_id, "mfar_model").is_claimed  # blocked by the dead run

    assert release_dead_runs(instance) == [dead.run_id]
    assert instance.get_run_by_id(dead.run_id).status == DagsterRunStatus.FAILURE
    assert instance.get_run_by_id(alive.run_id).status == DagsterRunStatus.STARTED
    assert storage.claim_concurrency_slot("heavy", alive.run_id, "mfar_model").is_claimed
    instance.dispose()

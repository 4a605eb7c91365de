"""`grasp pipeline` materializes exactly the assets whose artifact is missing or incomplete, and their downstream."""

import os

import dagster as dg
import pytest

from grasp_assets import stages
from grasp_assets.definitions import defs
from grasp_assets.run import _missing
from grasp_core.artifacts import Artifacts
from grasp_core.io import atomic_dir
from grasp_core.manifest import MANIFEST_FILE
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
    (art.path("planner", "2") / MANIFEST_FILE).unlink()  # round 2's planner interrupted
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


def test_a_killed_materialization_does_not_block_the_next(tmp_path, monkeypatch):
    """kill -9 of a real `dagster asset materialize` holding the `heavy` pool slot; the next materialization of
    that pool runs at once after the start-up check (it would otherwise wait for the slot forever)."""
    import shutil
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from dagster._core.events import DagsterEventType
    from dagster._core.storage.dagster_run import DagsterRunStatus

    from grasp_assets.dead_runs import release_dead_runs
    from tests.assets.sleeper import sleeper

    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(Path(__file__).resolve().parents[2] / "dagster_home" / "dagster.yaml", home)  # pools: limit 1
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    instance = dg.DagsterInstance.get()  # creates the storage before the subprocess opens it
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    dagster = str(Path(sys.executable).parent / "dagster")
    config = '{"ops": {"sleeper": {"config": {"seconds": 600}}}}'
    proc = subprocess.Popen(
        [dagster, "asset", "materialize", "-m", "tests.assets.sleeper", "--select", "sleeper", "--config-json", config],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 180
        while not instance.get_event_records(dg.EventRecordsFilter(DagsterEventType.STEP_START), limit=1):
            assert proc.poll() is None and time.monotonic() < deadline, "the first materialization never started"
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the CLI and its step worker
        proc.wait()
    (first,) = instance.get_runs()
    assert first.status == DagsterRunStatus.STARTED  # what a kill leaves: the run holds the pool slot

    start = time.monotonic()
    released = release_dead_runs(instance)
    while not released and time.monotonic() - start < 20:  # the killed processes take a moment to vanish
        time.sleep(0.5)
        released = release_dead_runs(instance)
    assert released == [first.run_id]
    result = dg.materialize([sleeper], instance=instance, run_config={"ops": {"sleeper": {"config": {"seconds": 0}}}})
    assert result.success and time.monotonic() - start < 60
    assert instance.get_run_by_id(first.run_id).status == DagsterRunStatus.FAILURE
    instance.dispose()

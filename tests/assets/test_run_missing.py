"""What `grasp pipeline` rebuilds without a Dagster record or with a damaged artifact (:func:`to_rebuild`), in
waves that never build an asset before what it reads (:func:`wave`); the gate skips later rounds."""

import os

import dagster as dg
import pytest

from grasp_assets import stages
from grasp_assets.definitions import defs
from grasp_assets.freshness import to_rebuild, wave
from grasp_core.artifacts import Artifacts
from grasp_core.io import atomic_dir
from grasp_core.manifest import MANIFEST_FILE
from grasp_core.planner.rounds import Gate

PREPARE = list(stages.STAGE_ASSETS[stages.PREPARE])
GRAPH = defs.resolve_asset_graph()


def _complete(art: Artifacts, name: str, round_key: str | None = None) -> None:
    with atomic_dir(art.path(name, round_key)) as tmp:
        (tmp / "data.txt").write_text(name)


@pytest.fixture
def art(tmp_path) -> Artifacts:
    return Artifacts.for_dataset("hpo", tmp_path)


def test_missing_incomplete_corrupt_and_unrecorded_artifacts_are_rebuilt_with_their_reason(art):
    instance = dg.DagsterInstance.ephemeral()
    for name in PREPARE:
        _complete(art, name)
    (art.path("mfar_model") / MANIFEST_FILE).unlink()  # an interrupted run left it without its manifest
    (art.path("skb") / "data.txt").write_text("xyz")  # same size, other bytes
    (art.path("queries") / "data.txt").write_text("cut")
    todo = to_rebuild(instance, GRAPH, PREPARE, art)
    assert todo["mfar_model"] == "incomplete"
    assert todo["skb"].startswith("corrupt: ") and "data.txt" in todo["skb"]
    assert todo["queries"].startswith("corrupt: ")
    assert todo["teacher_plans"] == "never materialized here"  # complete on disk, but no record of what built it
    assert set(todo) == set(PREPARE)
    missing = to_rebuild(instance, GRAPH, PREPARE, Artifacts.for_dataset("hpo", art.root / "none"))
    assert set(missing.values()) == {"missing"}


def test_a_wave_holds_no_asset_whose_ancestor_is_to_be_rebuilt():
    todo = dict.fromkeys(PREPARE, "missing")
    assert wave(GRAPH, todo) == ["skb"]
    assert wave(GRAPH, {n: "x" for n in ("queries", "graph_store", "teacher_plans", "text_index")}) == [
        "graph_store",
        "queries",
        "text_index",
    ]


@pytest.mark.parametrize("val", [25.0, 30.0])  # below the round's start, and a tie: both fail the gate
def test_rounds_after_a_failed_gate_are_skipped_on_every_run(tmp_path, monkeypatch, capsys, val):
    from grasp_assets import run
    from grasp_assets.run import run_pipeline

    monkeypatch.setattr(run, "to_rebuild", lambda *args: {})  # round 1 is built: only the gate decides here

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    art = Artifacts.for_dataset("hpo", tmp_path / "artifacts")
    _complete(art, "rft_samples", "1")
    with atomic_dir(art.path("planner", "1")) as tmp:
        Gate(val_fused_hit1=val, previous=30.0).write(tmp)
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

"""SIGTERM to a running `grasp pipeline` stops it within seconds, marks its Dagster run failed and frees the run,
so the next `grasp pipeline` is not blocked (Dagster's in-process execution alone holds the signal until the step
ends)."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.events import DagsterEventType
from dagster._core.storage.dagster_run import DagsterRunStatus


@pytest.mark.slow
def test_sigterm_stops_the_pipeline_and_fails_its_run(tmp_path, monkeypatch):
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(Path(__file__).resolve().parents[2] / "dagster_home" / "dagster.yaml", home)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    instance = dg.DagsterInstance.get()  # creates the storage before the subprocess opens it
    env = {**os.environ, "DAGSTER_HOME": str(home), "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    grasp = str(Path(sys.executable).parent / "grasp")
    args = [grasp, "--profile", "smoke", "--root", str(tmp_path / "artifacts"), "pipeline", "synth-prime"]
    proc = subprocess.Popen(args, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 240
        while not instance.get_event_records(dg.EventRecordsFilter(DagsterEventType.STEP_START), limit=1):
            assert proc.poll() is None and time.monotonic() < deadline, "the pipeline never started a step"
            time.sleep(0.5)
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        stopped_in = time.monotonic() - start
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = out.decode(errors="replace")
    assert proc.returncode == 2 and "stopped by SIGTERM" in text, text[-2000:]
    assert stopped_in < 30, stopped_in
    runs = instance.get_runs()
    assert runs and all(r.status != DagsterRunStatus.STARTED for r in runs), [r.status for r in runs]
    assert any(r.status == DagsterRunStatus.FAILURE for r in runs)
    instance.dispose()

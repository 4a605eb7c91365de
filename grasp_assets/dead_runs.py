"""Runs whose worker died (kill -9, OOM, a crash) are marked failed and give back their pool slots."""

from __future__ import annotations

import os

import dagster as dg
from dagster_docker.docker_run_launcher import DOCKER_CONTAINER_ID_TAG


def release_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark every STARTED run none of whose worker processes is alive (killed, crashed) as failed and free its pool
    slots, which Dagster would otherwise hold forever (a later heavy step then waits for the `heavy` pool).

    Whoever launched the run (`grasp pipeline`, `dagster asset materialize`, the UI): its workers are the
    processes that logged its run and step starts (Dagster records their pids). Dagster's own run monitoring does
    not cover the default run launcher, hence this check; `grasp pipeline` runs it at start-up and the
    ``release_dead_runs`` sensor every minute while the daemon runs (`dagster dev`). Runs in containers are left
    to that run monitoring (deploy/host/dagster.yaml): their pids are the container's, not this host's."""
    from dagster._core.events import DagsterEventType
    from dagster._core.storage.dagster_run import DagsterRunStatus, RunsFilter

    released = []
    for run in instance.get_runs(filters=RunsFilter(statuses=[DagsterRunStatus.STARTED])):
        if DOCKER_CONTAINER_ID_TAG in run.tags:
            continue
        records = instance.get_records_for_run(
            run.run_id, of_type={DagsterEventType.RUN_START, DagsterEventType.STEP_START}
        ).records
        pids = {r.event_log_entry.dagster_event.pid for r in records if r.event_log_entry.dagster_event} - {None}
        if not pids or any(_alive(pid) for pid in pids):
            continue
        instance.report_run_failed(run, f"its worker process(es) {sorted(pids)} are gone (killed or crashed)")
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        released.append(run.run_id)
    return released


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, killed but not yet reaped by its parent, is dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:  # no procfs (macOS): signal 0 went through
        return True

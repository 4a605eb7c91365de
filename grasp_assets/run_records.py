"""What the Dagster instance's run records (its event log) say: step times of a dataset's assets, failed checks."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from grasp_assets.partitions import DATASET

PARTITION_TAG = "dagster/partition"


def step_seconds(dataset: str, instance: dg.DagsterInstance | None = None) -> dict[str, float]:
    """Seconds of the latest successful step of every asset of ``dataset`` (``asset`` or ``asset/round`` for the
    RL rounds), from the STEP_SUCCESS events of the instance at $DAGSTER_HOME (default: the checkout's). Steps that
    are not an asset's (an asset check run as its own step, as ``dagster asset materialize`` does) are left out. A
    step that reused an artifact (its materialization says ``reused_from``) does not replace the time of an earlier
    step that built it: rematerializing an unchanged asset is not what it costs to build."""
    if instance is None:
        os.environ.setdefault("DAGSTER_HOME", str(Path(__file__).resolve().parent.parent / "dagster_home"))
        instance = dg.DagsterInstance.get()
    records = instance.get_event_records(
        dg.EventRecordsFilter(event_type=dg.DagsterEventType.STEP_SUCCESS), ascending=True
    )
    reused = {
        (record.event_log_entry.run_id, record.event_log_entry.dagster_event.step_key)
        for record in instance.get_event_records(
            dg.EventRecordsFilter(event_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
        )
        if record.asset_materialization is not None and "reused_from" in record.asset_materialization.metadata
    }
    assets = {"__".join(key.path) for key in instance.get_asset_keys()}  # an asset's step key
    partitions: dict[str, tuple[str | None, str | None]] = {}
    out: dict[str, float] = {}
    for record in records:  # oldest first: a later success of the same asset and partition replaces an earlier one
        entry = record.event_log_entry
        if entry.run_id not in partitions:
            run = instance.get_run_by_id(entry.run_id)
            tags = run.tags if run is not None else {}
            partitions[entry.run_id] = (
                tags.get(f"{PARTITION_TAG}/{DATASET}", tags.get(PARTITION_TAG)),
                tags.get(f"{PARTITION_TAG}/round"),
            )
        ds, round_key = partitions[entry.run_id]
        step = entry.dagster_event.step_key
        if ds != dataset or step not in assets:
            continue
        key = step if round_key is None else f"{step}/{round_key}"
        if key in out and (entry.run_id, step) in reused:
            continue
        out[key] = entry.dagster_event.event_specific_data.duration_ms / 1000
    return {k: round(v, 1) for k, v in out.items()}


def failed_check(instance: dg.DagsterInstance, run_id: str, check_name: str) -> bool:
    """True when the run evaluated the asset check ``check_name`` and it failed (a blocking check stops the run)."""
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION).records
    return any(
        event.check_name == check_name and not event.passed
        for record in records
        if record.event_log_entry.dagster_event is not None
        for event in [record.event_log_entry.dagster_event.event_specific_data]
    )

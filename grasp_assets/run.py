"""`grasp pipeline DATASET`: materialize the whole DAG for one dataset through Dagster, in stage order.

Runs are recorded in the Dagster instance at $DAGSTER_HOME (dagster_home/ by default), so they appear in the
UI with their metadata, checks and lineage. By default only assets whose artifact is missing (or left
incomplete by an interrupted run), and everything downstream of them, are materialized; ``--force``
rebuilds all. Code and configuration changes are seen in the UI, which marks the assets they touch stale
(see :mod:`grasp_assets.versions`).
"""

from __future__ import annotations

import os
import time

import dagster as dg

from grasp_assets.dead_runs import release_dead_runs
from grasp_assets.definitions import build_definitions, defs
from grasp_assets.partitions import DATASET, ROUND
from grasp_assets.resources import GraspSettings, MLflowTracking
from grasp_assets.stages import FINISH, ORDER, PLANNER, PREPARE, RL_ROUND, ROUND_ASSETS
from grasp_core.artifacts import Artifacts
from grasp_core.datasets import check_dataset
from grasp_core.errors import GraspError
from grasp_core.home import CHECKOUT_HOME
from grasp_core.io import is_complete
from grasp_core.planner.rounds import gate_failed, previous_round
from grasp_core.quiet import quiet_libraries


def _missing(
    selection: dg.AssetSelection, art: Artifacts, round_key: str | None, force: bool
) -> dg.AssetSelection | None:
    graph = defs.resolve_asset_graph()
    keys = selection.resolve(graph)
    if force:
        return selection
    missing = [
        k
        for k in keys
        if not is_complete(art.path(k.to_user_string(), round_key if k.to_user_string() in ROUND_ASSETS else None))
    ]
    if not missing:
        return None
    return dg.AssetSelection.assets(*missing).downstream() & selection


def run_pipeline(
    dataset: str,
    profile: str = "cpu",
    root: str | None = None,
    force: bool = False,
    stages=("prepare", "rl", "finish"),
    scale: str = "",
    n_queries: int = 0,
) -> dict:
    check_dataset(dataset)
    os.environ.setdefault("DAGSTER_HOME", str(CHECKOUT_HOME))
    quiet_libraries()
    instance = dg.DagsterInstance.get()
    for run_id in release_dead_runs(instance):
        print(f"[grasp] run {run_id} of a process that died was marked failed and its pool slots freed")
    if not instance.has_dynamic_partition(DATASET, dataset):
        instance.add_dynamic_partitions(DATASET, [dataset])
    settings = GraspSettings(profile=profile, artifacts_root=root or "", scale=scale or "", n_queries=n_queries or 0)
    art = settings.artifacts(dataset)
    resources = {"settings": settings, "mlflow": MLflowTracking()}
    assets = list(build_definitions(settings.get_profile()).assets)  # code versions of this run's profile
    wanted = {"prepare": PREPARE, "rl": RL_ROUND, "finish": FINISH}
    plan = [step for step in ORDER if step.stage in {wanted[s] for s in stages}]
    timings = {}
    break_rounds = False
    for step in plan:
        name, selection, round_key = step.label, step.selection, step.round_key
        partition = dg.MultiPartitionKey({DATASET: dataset, ROUND: round_key}) if round_key else dataset
        if break_rounds and round_key is not None:
            continue
        previous = previous_round(round_key) if round_key is not None else None
        if previous is not None and gate_failed(art.path(PLANNER, previous)):
            # a kept planner whose gate failed: later rounds never start from it
            print(
                f"[grasp] {name}: skipped, round {previous}'s validation gate failed (the last passing planner is served)"
            )
            break_rounds = True
            continue
        todo = _missing(selection, art, round_key, force)
        if todo is None:
            print(f"[grasp] {name}: up to date")
            continue
        print(
            f"[grasp] {name}: materializing {', '.join(sorted(k.to_user_string() for k in todo.resolve(defs.resolve_asset_graph())))}"
        )
        t0 = time.perf_counter()
        result = dg.materialize(
            assets,
            selection=todo,
            partition_key=partition,
            instance=instance,
            resources=resources,
            raise_on_error=False,
            tags={"grasp/stage": name},
        )
        timings[name] = time.perf_counter() - t0
        if not result.success and round_key is not None and gate_failed(art.path(PLANNER, round_key)):
            print(
                f"[grasp] {name}: validation fused Hit@1 fell, the gate stopped the round; later rounds are skipped "
                f"and the last passing planner is served"
            )
            break_rounds = True
            continue
        if not result.success:
            raise GraspError(
                f"stage {name!r} failed for {dataset!r}; see the run {result.run_id} in the Dagster UI "
                f"(`dagster dev -w workspace.yaml`) for the failing step's logs. Finished assets are kept; "
                f"rerunning resumes from the first missing one."
            )
        print(f"[grasp] {name}: done in {timings[name]:.0f}s")
    return timings

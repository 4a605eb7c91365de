"""Run a library pipeline step inside an asset: components, MLflow run, metadata — the same for every asset."""

import dataclasses
from collections.abc import Callable

import dagster as dg

from grasp_assets.metadata import log_result, to_metadata
from grasp_assets.partitions import dataset_of
from grasp_assets.resources import GraspSettings, MLflowTracking
from grasp_assets.stages import PREVIOUS_ROUND_READS, ROUND_ASSETS
from grasp_assets.versions import code_version
from grasp_core import manifest
from grasp_core.artifacts import Artifacts
from grasp_core.components import Components
from grasp_core.errors import GraspError
from grasp_core.io import withdraw
from grasp_core.pipeline.step import STEPS, Step, section_values
from grasp_core.planner.rounds import ROUNDS, previous_round
from grasp_core.redact import one_line_error, redact

CODE_VERSION_TAG = "dagster/code_version"  # the materialization's code version (Dagster's system tag)
HEAVY = {"grasp/heavy": "true"}  # run-level tag: dagster.yaml allows one heavy run at a time
RETRY = dg.RetryPolicy(max_retries=2, delay=15, backoff=dg.Backoff.EXPONENTIAL)


def run_step(
    context: dg.AssetExecutionContext,
    settings: GraspSettings,
    mlflow: MLflowTracking,
    fn: Callable[..., dict],
    *args,
    round_key: str | None = None,
    profile_changes: dict | None = None,
    wants_log: bool = False,
    check_results: Callable[[dict], list[dg.AssetCheckResult]] | None = None,
) -> dg.MaterializeResult:
    """Call the asset's step ``fn(ws, *args[, log_fn])`` for the run's dataset on components that give out only
    the profile sections and artifacts it declares; log params/metrics to MLflow and return metadata.

    Steps of an RL round log into a run nested under the parent run of that dataset × round.
    """
    declared = declared_step(context, fn)
    step = declared.name
    dataset = dataset_of(context)
    profile = settings.get_profile()
    if profile_changes:
        profile = profile.replace(**profile_changes)
    art = dataclasses.replace(settings.artifacts(dataset), readable=readable(context, step))
    ws = Components(art, profile, reads=declared.reads)
    tracker = mlflow.tracker()
    tags = {"dataset": dataset, "step": step, "profile": profile.name, "dagster_run_id": context.run_id}
    parent = None
    if round_key is not None:
        tags["round"] = round_key
        parent = tracker.parent_run(f"{dataset}/round-{round_key}", {"dataset": dataset, "round": round_key})
    name = f"{step}/{dataset}" + (f"/round-{round_key}" if round_key else "")
    with tracker.run(name, params=_params(profile, declared), tags=tags, parent_run_id=parent) as run:

        def log_fn(step_no: int, metrics: dict) -> None:
            run.log_metrics(metrics, step=step_no)

        context.log.info(f"{step}: dataset {dataset}" + (f", round {round_key}" if round_key else ""))
        try:
            result = fn(ws, *args, log_fn) if wants_log else fn(ws, *args)
        except GraspError as exc:  # a user-facing, deterministic error: retrying cannot help
            raise dg.Failure(description=redact(str(exc)), allow_retries=False) from None
        except Exception as exc:
            if redact(str(exc)) != str(exc):  # a credential in the message: it must not reach the event log
                raise dg.Failure(description=f"{type(exc).__name__}: {redact(str(exc))}") from None
            raise
        finally:
            ws.close()
        checks = _checked(context, ws.art.path(step, round_key), result, check_results)
        log_result(run, result)
        run.set_tags({"mlflow_run_url_hint": f"experiment {tracker.experiment_id}"})
    # a run-config override builds the artifact of another code version than the definition's: record that one,
    # so Dagster reports the asset stale against the profile's settings (and MLflow holds the override's values)
    version = (
        code_version(declared, profile)
        if profile_changes
        else context.assets_def.code_versions_by_key[context.asset_key]
    )
    sealed = manifest.write(ws.art.path(step, round_key), version or "", _input_digests(context, ws.art, round_key))
    return dg.MaterializeResult(
        metadata={
            **to_metadata(result),
            "mlflow_run_id": dg.MetadataValue.text(run.run_id),
            "digest": dg.MetadataValue.text(sealed.digest),
        },
        check_results=checks,
        data_version=dg.DataVersion(sealed.digest),  # the content: an identical rebuild changes nothing downstream
        tags={CODE_VERSION_TAG: version} if profile_changes and version else None,
    )


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


def profile_override(settings: GraspSettings, section: str, config: dg.Config) -> dict | None:
    """``profile_changes`` for :func:`run_step`: the run config's set fields replace that profile section's values."""
    changes = {k: v for k, v in config.model_dump().items() if v is not None}
    if not changes:
        return None
    return {section: dataclasses.replace(getattr(settings.get_profile(), section), **changes)}


def _params(profile, step: Step) -> dict:
    """The profile sections a step reads, flattened for MLflow params."""
    out = {"profile": profile.name}
    for section, value in section_values(profile, step.reads).items():
        for key, v in value.items() if isinstance(value, dict) else [("", value)]:
            out[f"{section}.{key}" if key else section] = v
    return out

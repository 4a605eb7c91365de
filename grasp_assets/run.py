"""`grasp pipeline DATASET`: materialize the whole DAG for one dataset through Dagster, in stage order.

Runs are recorded in the Dagster instance at $DAGSTER_HOME (dagster_home/ by default), so they appear in the
UI with their metadata, checks and lineage. The dataset's source is observed first; then each stage rebuilds
what :func:`grasp_assets.freshness.to_rebuild` names (missing, corrupt, or stale in Dagster: code changed,
source changed, an input's content changed), wave after wave until nothing in it is stale, printing each asset
with its reason; ``--force`` rebuilds every asset of every stage once.

``--variant NAME`` builds the partition ``DATASET+NAME`` with the profile of ``experiments/NAME.toml``
(:mod:`grasp_core.experiments`): its artifacts live under ``<root>/DATASET+NAME/``, every asset whose code version
and inputs equal an existing artifact's is hard-linked from it (:mod:`grasp_core.reuse`), and freshness is decided
on the variant's code versions. Each build that runs a stage is one MLflow parent run (:class:`BuildRun`).

Each stage runs in a child process: Dagster's in-process execution holds SIGINT and SIGTERM until a step ends,
so on either signal ``grasp pipeline`` stops the child, marks its run failed (freeing its pool slots) and exits;
finished artifacts are kept and the next run resumes from the first missing one.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from multiprocessing import reduction
from multiprocessing.connection import Connection

import dagster as dg

from grasp_assets.dead_runs import release_dead_runs
from grasp_assets.definitions import build_definitions
from grasp_assets.freshness import observe_feedback, observe_source, to_rebuild, wave
from grasp_assets.partitions import DATASET, ROUND
from grasp_assets.resources import MLflowTracking, SettingsResource
from grasp_assets.run_records import failed_check
from grasp_assets.stages import FINISH, ORDER, PLANNER, PREPARE, PROMOTION_CHECK, RELEASE, RL_ROUND, STAGE_ASSETS
from grasp_assets.steps import MLFLOW_PARENT_TAG, REUSE_TAG
from grasp_core.datasets import check_dataset
from grasp_core.errors import GraspError
from grasp_core.experiments import BASE, flat_settings, headline_metrics, split_key, variant_file, variant_key
from grasp_core.home import CHECKOUT_HOME
from grasp_core.planner.rounds import gate_failed, previous_round
from grasp_core.preflight import check_ready
from grasp_core.quiet import quiet_libraries
from grasp_core.tracking import TrackedRun


def run_pipeline(
    dataset: str,
    profile: str = "cpu",
    root: str | None = None,
    force: bool = False,
    stages=("prepare", "rl", "finish"),
    scale: str = "",
    n_queries: int = 0,
    graph_store: str = "",
    traversal: str = "",
    variant: str | None = None,
) -> dict:
    """Build the partition of ``dataset`` (or of its ``variant``: ``experiments/<variant>.toml``, the partition
    ``<dataset>+<variant>``, whose unchanged artifacts are linked from any partition that built them); returns the
    seconds of each stage that ran."""
    if variant is None:
        dataset, variant = split_key(dataset)
    key = variant_key(dataset, variant)
    check_dataset(dataset)
    os.environ.setdefault("DAGSTER_HOME", str(CHECKOUT_HOME))
    settings_fields = {
        "profile": profile,
        "artifacts_root": root or "",
        "scale": scale or "",
        "n_queries": n_queries or 0,
        "graph_store": graph_store or "",
        "traversal": traversal or "",
    }
    settings = SettingsResource(**settings_fields)
    resolved = settings.get_profile(key)  # a variant's file is read and checked here, before anything runs
    quiet_libraries()
    instance = dg.DagsterInstance.get()
    for run_id in release_dead_runs(instance):
        print(f"[grasp] run {run_id} of a process that died was marked failed and its pool slots freed")
    if not instance.has_dynamic_partition(DATASET, key):
        instance.add_dynamic_partitions(DATASET, [key])
    check_ready(resolved, dataset)  # every missing model, device and endpoint, before any stage
    art = settings.artifacts(key)
    graph = build_definitions(resolved).resolve_asset_graph()  # code versions of this partition's profile
    if observe_source(instance, key, resolved.dataset):
        print(f"[grasp] source of {dataset!r}: new fingerprint recorded (its files changed, or were never observed)")
    if (grown := observe_feedback(instance, key)) and grown[0]:
        print(f"[grasp] feedback of {dataset!r}: {grown[0]} confirmed questions ({grown[1]} new) become training data")
    wanted = {"prepare": PREPARE, "rl": RL_ROUND, "finish": FINISH}
    plan = [step for step in ORDER if step.stage in {wanted[s] for s in stages}]
    timings: dict[str, float] = {}
    build = BuildRun(key, resolved)
    try:
        _run_plan(instance, graph, settings_fields, art, key, plan, force, build, timings)
    except BaseException:
        build.end("FAILED")
        raise
    build.end("FINISHED", art)
    return timings


def release_refused(instance: dg.DagsterInstance, run_id: str | None, art) -> str | None:
    """Why the promotion guard kept the served release, when the run failed only because of it (its blocking check
    failed), else None."""
    from grasp_core.io import read_json
    from grasp_core.pipeline.release import DECISION_FILE

    if run_id is None or not failed_check(instance, run_id, PROMOTION_CHECK):
        return None
    return read_json(art.path(RELEASE) / DECISION_FILE)["reason"]


def _run_plan(instance, graph, settings_fields, art, key, plan, force, build, timings) -> None:
    break_rounds = False
    for step in plan:
        name, round_key = step.label, step.round_key
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
        names = list(STAGE_ASSETS[step.stage])
        todo = dict.fromkeys(names, "--force") if force else to_rebuild(instance, graph, names, art, round_key)
        if not todo:
            print(f"[grasp] {name}: up to date")
            continue
        tags = {MLFLOW_PARENT_TAG: build.start()} | ({REUSE_TAG: "false"} if force else {})
        t0 = time.perf_counter()
        success, run_id, run_ids = _run_stage(instance, settings_fields, todo, (key, round_key), name, tags)
        build.dagster_runs += run_ids
        timings[name] = time.perf_counter() - t0
        if not success and round_key is not None and gate_failed(art.path(PLANNER, round_key)):
            print(
                f"[grasp] {name}: validation fused Hit@1 did not rise, the gate stopped the round; later rounds are skipped "
                f"and the last passing planner is served"
            )
            break_rounds = True
            continue
        if not success and step.stage == FINISH and (refused := release_refused(instance, run_id, art)):
            print(f"[grasp] {name}: the build was not promoted, {refused}")
            continue
        if not success:
            where = (
                f"the run {run_id} in the Dagster UI (`dagster dev -w workspace.yaml`) has the step's logs"
                if run_id
                else "its process died before Dagster recorded a run"
            )
            dataset, variant = split_key(key)
            again = f"grasp pipeline {dataset}" + (f" --variant {variant}" if variant else "")
            print(
                f"[grasp] {name}: failed for {key!r}; {where}. Finished assets are kept; rerunning (`{again}`) "
                f"resumes from the first missing one."
            )
            raise GraspError(step_error(instance, run_id) or f"stage {name!r} failed (its process died)")
        print(f"[grasp] {name}: done in {timings[name]:.0f}s")


class BuildRun:
    """The MLflow parent run of one `grasp pipeline` build of a partition, in the dataset's experiment
    (``grasp/<dataset>``): tagged with the variant, dataset, Dagster run ids and commit; params = the whole resolved
    settings, flattened (``section.field``); metrics = the headline results of every evaluated split. The asset runs
    nest under it (the run tag ``grasp/mlflow_parent``). Started when the first stage runs; a build with nothing to
    do starts one only when the partition has none yet (so every built partition has one to compare)."""

    def __init__(self, key: str, profile):
        self.key, self.profile = key, profile
        self.run_id: str | None = None
        self.dagster_runs: list[str] = []
        self._tracker = None

    @property
    def tracker(self):
        if self._tracker is None:
            self._tracker = MLflowTracking().tracker(self.key)
        return self._tracker

    def start(self) -> str:
        if self.run_id is None:
            from grasp_core.provenance import code_commit

            dataset, variant = split_key(self.key)
            tags = {
                "grasp.kind": "pipeline",
                "dataset": dataset,
                "variant": variant or BASE,
                "partition": self.key,
                "profile": self.profile.name,
                "commit": code_commit(),
            }
            if variant:
                tags["variant_file"] = str(variant_file(variant))
            client = self.tracker.client
            self.run_id = client.create_run(self.tracker.experiment_id, run_name=self.key, tags=tags).info.run_id
            TrackedRun(client, self.run_id).log_params(flat_settings(self.profile))
        return self.run_id

    def _log_release(self, run, art) -> None:
        """The promotion guard's decision of this build, when it ran: before/after Hit@1 per question set and
        whether the build is served (metrics ``release/…``), and its reason (tag ``release_reason``)."""
        from grasp_core.io import is_complete, read_json
        from grasp_core.pipeline.release import DECISION_FILE

        if self.run_id is None or not is_complete(art.path(RELEASE)):
            return
        decision = read_json(art.path(RELEASE) / DECISION_FILE)
        metrics = {"release/promoted": float(decision["promoted"])}
        for when, key in (("after", "hit1_candidate"), ("before", "hit1_served_before")):
            metrics |= {f"release/{s}_hit1_{when}": v for s, v in (decision[key] or {}).items()}
        run.log_metrics(metrics)
        run.set_tags({"release_reason": decision["reason"][:5000]})

    def end(self, status: str, art=None) -> None:
        if self.run_id is None and status == "FINISHED" and art is not None and self._first_build():
            self.start()
        if self.run_id is None:
            return
        run = TrackedRun(self.tracker.client, self.run_id)
        if self.dagster_runs:
            run.set_tags({"dagster_run_ids": ",".join(self.dagster_runs)[:5000]})
        if art is not None:
            try:
                run.log_metrics(headline_metrics(art))
            except GraspError as exc:  # an evaluation that cannot be read: the build's run says so
                run.set_tags({"headline_metrics_error": str(exc)})
            self._log_release(run, art)
        self.tracker.client.set_terminated(self.run_id, status)

    def _first_build(self) -> bool:
        filt = f"tags.`grasp.kind` = 'pipeline' and tags.partition = '{self.key}'"
        return not self.tracker.client.search_runs([self.tracker.experiment_id], filter_string=filt, max_results=1)


def step_error(instance: dg.DagsterInstance, run_id: str | None) -> str | None:
    """``"<step>: <its own error>"`` of a failed run: the innermost cause of its first step failure (the error the
    step raised, without Dagster's wrapping), or of its first failed blocking check."""
    if run_id is None:
        return None
    for kind in (dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.ASSET_CHECK_EVALUATION):
        for record in instance.get_records_for_run(run_id, of_type=kind).records:
            event = record.event_log_entry.dagster_event
            if event is None:
                continue
            if kind == dg.DagsterEventType.STEP_FAILURE:
                error = event.step_failure_data.error
                while error is not None and error.cause is not None:
                    error = error.cause
                if error is not None:
                    message = error.message.strip()
                    prefix = f"{error.cls_name}: "
                    return f"{event.step_key}: {message[len(prefix) :] if message.startswith(prefix) else message}"
            else:
                check = event.event_specific_data
                if not check.passed:
                    return f"{check.asset_key.to_user_string()}: blocking check {check.check_name} failed"
    return None


class _Stopped(Exception):
    """SIGINT or SIGTERM reached `grasp pipeline` while a stage ran."""


def _run_stage(
    instance: dg.DagsterInstance,
    settings: dict,
    todo: dict[str, str],
    partition: tuple[str, str | None],
    name: str,
    tags: dict[str, str] | None = None,
) -> tuple[bool, str | None, list[str]]:
    """Rebuild ``todo`` (asset -> why) for ``partition``, then what became stale, in a child process; on SIGINT/SIGTERM
    stop it and release its run. Returns (success, the last run's id, every run's id); ``tags`` go on every run."""
    ctx = _stage_context()
    receive, send = ctx.Pipe(duplex=False)
    caller = (dict(os.environ), _Fd(1), _Fd(2))
    args = (caller, settings, todo, partition, name, send, tags or {})
    child = ctx.Process(target=_stage_child, args=args, name=f"grasp {name}")

    def stop(signum, _frame):
        raise _Stopped(signal.Signals(signum).name)

    handlers = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        child.start()
        send.close()
        child.join()
    except _Stopped as exc:
        child.terminate()  # Dagster holds SIGTERM until the step ends: give it a moment, then kill
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join()
        for run_id in release_dead_runs(instance):
            print(f"[grasp] run {run_id} was marked failed and its pool slots freed")
        raise GraspError(
            f"stopped by {exc} during stage {name!r}; finished assets are kept, rerun the same command to resume"
        ) from None
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    try:
        return receive.recv()
    except EOFError:  # the child died before reporting (its run, if any, is released at the next start-up)
        return False, None, []
    finally:
        receive.close()


def _stage_context() -> multiprocessing.context.ForkServerContext:
    """Stage children fork from a server process that imported the code location once (torch, transformers,
    dagster: seconds per child under spawn); the server holds no thread, connection or state of the caller."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["grasp_assets.definitions"])  # no effect once the server runs
    return ctx


class _Fd:
    """One of the caller's file descriptors as it is now, duplicated into the child when the child starts."""

    def __init__(self, fd: int):
        self.fd = fd

    def __reduce__(self):
        return _detach, (reduction.DupFd(self.fd),)


def _detach(dup) -> int:
    return dup.detach()


def _stage_child(
    caller: tuple[dict[str, str], int, int],
    settings: dict,
    todo: dict[str, str],
    partition: tuple[str, str | None],
    name: str,
    send: Connection,
    tags: dict[str, str],
) -> None:
    """Materialize the stage in waves: a wave holds the assets to rebuild that have no ancestor to rebuild (so no
    asset is built before what it reads); after each, what became stale (an input's digest changed) is the next.
    ``caller`` is the caller's environment, standard output and error now (the fork server's are those it started
    with: a caller may have redirected its output since, as pytest's capture does)."""
    environ, stdout, stderr = caller
    os.environ.clear()
    os.environ.update(environ)
    for fd, target in ((stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
        os.close(fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C reaches the whole group: the parent decides
    quiet_libraries()
    dataset, round_key = partition
    resource = SettingsResource(**settings)
    defs = build_definitions(resource.get_profile(dataset))  # code versions of this partition's profile
    graph = defs.resolve_asset_graph()
    instance, art = dg.DagsterInstance.get(), resource.artifacts(dataset)
    stage = [n for step in ORDER if step.label == name for n in STAGE_ASSETS[step.stage]]
    run_id, result, run_ids = None, None, []
    for _ in range(2 * len(stage) + 1):  # each wave rebuilds at least one asset whose ancestors are all fresh
        if not todo:
            break
        now = wave(graph, todo)
        print(f"[grasp] {name}: materializing {', '.join(f'{n} ({todo[n]})' for n in now)}", flush=True)
        result = dg.materialize(
            list(defs.assets),
            selection=dg.AssetSelection.assets(*now),
            partition_key=dg.MultiPartitionKey({DATASET: dataset, ROUND: round_key}) if round_key else dataset,
            instance=instance,
            resources={"settings": resource, "mlflow": MLflowTracking()},
            raise_on_error=False,
            tags={"grasp/stage": name, **tags},
        )
        run_id = result.run_id
        run_ids.append(run_id)
        if not result.success:
            break
        todo = to_rebuild(instance, graph, stage, art, round_key)
    if todo and (result is None or result.success):
        print(f"[grasp] {name}: still stale after rebuilding: {todo}; see the Dagster UI", flush=True)
        result = None
    send.send((result is not None and result.success, run_id, run_ids))
    send.close()

"""Operations: jobs, the retraining schedule, the stage-chaining sensor, the source, feedback and dataset registry
sensors.

The stages and their order are :mod:`grasp_assets.stages`; what a run rebuilds is decided by one check,
:func:`grasp_assets.freshness.next_work` (missing, corrupt or stale assets, a wave at a time), the same one
`grasp pipeline` uses. The weekly schedule launches, per registered dataset, `prepare` for its assets to
rebuild; `source_changes` observes every dataset's source and launches `prepare` when it changed;
`feedback_growth` observes the confirmed questions from use and launches `prepare` once they grew by
`retrain.retrain_after`; `chain_training_stages` launches the next wave when a run succeeds: the same stage while it has assets to
rebuild, then the next stage that has; a round whose validation gate fails does not succeed (the `planner`
asset's blocking check stops it): `continue_after_a_failed_gate` then passes over the later rounds and launches
`finish`, as `grasp pipeline` does. Dagster's run queue (dagster_home/dagster.yaml) lets one heavy run at a time
use the machine; failed steps retry with exponential backoff.
"""

import dagster as dg

from grasp_assets.dead_runs import release_dead_runs
from grasp_assets.freshness import next_work, observe_feedback, observe_source
from grasp_assets.partitions import DATASET, ROUND, dataset_partitions
from grasp_assets.resources import SettingsResource
from grasp_assets.run_records import failed_check
from grasp_assets.stages import FINISH, GATE_CHECK, ORDER, PREPARE, RL_ROUND, Step
from grasp_assets.steps import HEAVY
from grasp_assets.versions import with_code_version
from grasp_core.datasets import BUILTIN, DatasetConfig, user_skb_dirs
from grasp_core.errors import GraspError
from grasp_core.experiments import split_key
from grasp_core.pipeline.step import STEPS

# Every stage trains something, so each run carries the run-level HEAVY tag the run queue limits to one at
# a time (asset op_tags do not reach run tags; without these job tags the queue limit never applied).
prepare_job = dg.define_asset_job(
    PREPARE,
    selection=Step(PREPARE).selection,
    partitions_def=dataset_partitions,
    tags=HEAVY,
    description="data, indexes, text branch, entity tables, teacher, SFT, reward table",
)
rl_round_job = dg.define_asset_job(
    RL_ROUND,
    selection=Step(RL_ROUND).selection,
    tags=HEAVY,
    description="one RL round: sampling, RFT, GRPO (dataset × round)",
)
finish_job = dg.define_asset_job(
    FINISH,
    selection=Step(FINISH).selection,
    partitions_def=dataset_partitions,
    tags=HEAVY,
    description="reranker training and evaluation",
)


def _graph(graph, dataset: str):
    """The asset graph whose code versions decide what is stale in ``dataset``'s partition: the code location's, or
    for a variant's partition key (``hpo+rerank-k20``) the same assets with the code versions of the variant's
    profile (as `grasp pipeline --variant` decides)."""
    if graph is None or split_key(dataset)[1] is None:
        return graph
    profile = SettingsResource().get_profile(dataset)
    assets = [
        with_code_version(a, profile) if len(a.keys) == 1 and next(iter(a.keys)).to_user_string() in STEPS else a
        for a in graph.assets_defs
        if a.keys
    ]
    return dg.Definitions(assets=assets).resolve_asset_graph()


def _request(step: Step, dataset: str, todo: dict[str, str], run_key: str, cause: str = "") -> dg.RunRequest:
    """The run of ``step`` for ``dataset`` that rebuilds ``todo``; the tag ``grasp/why`` (shown in the UI's run list)
    says why: ``cause`` (what triggered it), then each asset's reason."""
    partition = dg.MultiPartitionKey({DATASET: dataset, ROUND: step.round_key}) if step.round_key else dataset
    why = "; ".join(f"{n}: {why}" for n, why in sorted(todo.items()))
    return dg.RunRequest(
        run_key=run_key,
        job_name=step.stage,
        partition_key=partition,
        asset_selection=[dg.AssetKey(n) for n in todo],
        tags={"grasp/why": (f"{cause}. {why}" if cause else why)[:4000]},
    )


@dg.schedule(job=prepare_job, cron_schedule="0 3 * * 0", default_status=dg.DefaultScheduleStatus.STOPPED)
def weekly_retraining(context: dg.ScheduleEvaluationContext):
    """Every Sunday 03:00: per registered dataset, the feedback observed (any new confirmed question) and
    `prepare`'s assets to rebuild (then `chain_training_stages` continues with what is stale after them); nothing
    for a dataset whose `prepare` is fresh. Start it in the UI
    or with `dagster schedule start`."""
    graph = context.repository_def.asset_graph
    for dataset in context.instance.get_dynamic_partitions(DATASET):
        try:
            grown = observe_feedback(context.instance, dataset)  # any new confirmed question counts, weekly
            work = next_work(
                context.instance, _graph(graph, dataset), SettingsResource().artifacts(dataset), Step(PREPARE)
            )
        except GraspError as exc:  # a variant whose file was removed or broken: nothing to retrain
            context.log.info(f"{dataset}: {exc}")
            continue
        if work is not None and work[0] == Step(PREPARE):
            cause = f"weekly: {grown[1]} new confirmed feedback questions" if grown else "weekly"
            yield _request(work[0], dataset, work[1], f"{dataset}-{context.scheduled_execution_time:%Y%m%d}", cause)


def _next_wave(context: dg.RunStatusSensorContext, again: bool = True):
    """The next wave for the dataset the ended run was about: the same stage while assets it did not build are to
    be rebuilt (``again``; else from the next stage on), then prepare → round 1 → round 2 → finish, passing over
    stages with nothing to rebuild and the rounds after a failed gate."""
    run = context.dagster_run
    tags = run.tags
    if run.job_name in (prepare_job.name, finish_job.name):
        done, dataset = Step(run.job_name), tags.get("dagster/partition")
    else:
        dataset, round_key = tags.get(f"dagster/partition/{DATASET}"), tags.get(f"dagster/partition/{ROUND}")
        if dataset is None or round_key is None:
            return dg.SkipReason("not a dataset × round run")
        done = Step(RL_ROUND, round_key)
    if dataset is None:
        return dg.SkipReason("not a dataset run")
    built = {k.to_user_string() for k in run.asset_selection or ()}
    graph = _graph(context.repository_def.asset_graph if context.repository_def else None, dataset)
    start, built = (done, built) if again else (ORDER[ORDER.index(done) + 1], set())
    work = next_work(context.instance, graph, SettingsResource().artifacts(dataset), start, built) if graph else None
    if work is None:
        return dg.SkipReason(f"nothing left to rebuild for {dataset} after {done.label}")
    step, todo = work
    suffix = f"r{step.round_key}" if step.round_key else step.stage
    return _request(step, dataset, todo, f"{run.run_id}-{suffix}")


jobs = [prepare_job, rl_round_job, finish_job]


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    monitored_jobs=jobs,
    request_jobs=jobs,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def chain_training_stages(context: dg.RunStatusSensorContext):
    """When a stage's run succeeds: the next wave for its dataset (see ``_next_wave``)."""
    return _next_wave(context)


def stopped_by_gate(instance: dg.DagsterInstance, run_id: str) -> bool:
    """True when the run's `planner` failed its blocking validation gate (`val_hit1_improved`)."""
    return failed_check(instance, run_id, GATE_CHECK)


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.FAILURE,
    monitored_jobs=[rl_round_job],
    request_jobs=[finish_job],
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def continue_after_a_failed_gate(context: dg.RunStatusSensorContext):
    """When a round's run failed because its validation gate failed: the round is over, the later rounds are passed
    over and `finish` is launched if it has work (the served planner is the last that passed), as `grasp pipeline`
    goes on. A run that failed for any other reason launches nothing (rerun it once the cause is fixed)."""
    if not stopped_by_gate(context.instance, context.dagster_run.run_id):
        return dg.SkipReason("the round failed before its gate: nothing is launched")
    return _next_wave(context, again=False)


@dg.sensor(job=prepare_job, minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.RUNNING)
def dataset_registry(context: dg.SensorEvaluationContext):
    """Registers the built-in datasets and every new user SKB directory as a `dataset` partition;
    a new user SKB is materialized (its `prepare` run is requested) as soon as it appears."""
    known = set(context.instance.get_dynamic_partitions(DATASET))
    users = user_skb_dirs(DatasetConfig())
    new = [d for d in (*BUILTIN, *users) if d not in known]
    if not new:
        return dg.SkipReason("no new dataset")
    return dg.SensorResult(
        run_requests=[dg.RunRequest(run_key=f"register-{d}", partition_key=d) for d in new if d in users],
        dynamic_partitions_requests=[dataset_partitions.build_add_request(new)],
    )


@dg.sensor(job=prepare_job, minimum_interval_seconds=300, default_status=dg.DefaultSensorStatus.RUNNING)
def source_changes(context: dg.SensorEvaluationContext):
    """Observes every registered dataset's source (``skb_source``); a changed one launches `prepare` for what it
    makes stale (`skb`, then, wave after wave through `chain_training_stages`, what reads what changed)."""
    graph = context.repository_def.asset_graph if context.repository_def else None
    requests = []
    for dataset in context.instance.get_dynamic_partitions(DATASET) if graph else ():
        cfg = SettingsResource().get_profile().dataset
        try:
            fingerprint = observe_source(context.instance, dataset, cfg)
        except GraspError as exc:  # e.g. a user SKB directory removed: nothing to observe
            context.log.info(f"{dataset}: {exc}")
            continue
        try:
            work = (
                next_work(context.instance, _graph(graph, dataset), SettingsResource().artifacts(dataset))
                if fingerprint
                else None
            )
        except GraspError as exc:  # a variant whose file was removed or broken
            context.log.info(f"{dataset}: {exc}")
            continue
        if work is not None:
            requests.append(_request(work[0], dataset, work[1], f"source-{dataset}-{fingerprint}"))
    return requests or dg.SkipReason("no source changed")


@dg.sensor(job=prepare_job, minimum_interval_seconds=300, default_status=dg.DefaultSensorStatus.STOPPED)
def feedback_growth(context: dg.SensorEvaluationContext):
    """Observes every registered dataset's feedback store (``feedback_source``); once the confirmed questions have
    grown by `retrain.retrain_after` since the last observation, launches `prepare` for what they make stale
    (`queries`, then wave after wave the text branch, the planner rounds, the reranker, the evaluation and the
    guarded release). Stopped by default, like the weekly schedule: start it in the UI or with `dagster sensor
    start feedback_growth` (the daemon must run)."""
    graph = context.repository_def.asset_graph if context.repository_def else None
    requests = []
    for dataset in context.instance.get_dynamic_partitions(DATASET) if graph else ():
        try:
            after = SettingsResource().get_profile(dataset).retrain.retrain_after
            grown = observe_feedback(context.instance, dataset, min_growth=after)
            work = (
                next_work(context.instance, _graph(graph, dataset), SettingsResource().artifacts(dataset))
                if grown
                else None
            )
        except GraspError as exc:  # a variant whose file was removed or broken, an unreadable store
            context.log.info(f"{dataset}: {exc}")
            continue
        if grown and work is not None:
            cause = f"feedback grew by {grown[1]} confirmed questions ({grown[0]} in all; retrain after {after})"
            requests.append(_request(work[0], dataset, work[1], f"feedback-{dataset}-{grown[0]}", cause))
    return requests or dg.SkipReason("no dataset's confirmed feedback grew enough")


@dg.sensor(minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.RUNNING)
def release_dead_runs_sensor(context: dg.SensorEvaluationContext):
    """Fails the runs whose worker processes are gone and frees their pool slots (see ``release_dead_runs``)."""
    released = release_dead_runs(context.instance)
    return dg.SkipReason(f"released {len(released)} dead run(s): {released}" if released else "no dead run")


schedules = [weekly_retraining]
sensors = [
    chain_training_stages,
    continue_after_a_failed_gate,
    dataset_registry,
    source_changes,
    feedback_growth,
    release_dead_runs_sensor,
]

"""Operations: jobs, the retraining schedule, the stage-chaining sensor, and the dataset registry sensor.

The stages and their order are :mod:`grasp_assets.stages`. The weekly schedule launches `prepare` for every
registered dataset; `chain_training_stages` launches the next step when one succeeds (a round whose
validation gate fails does not succeed: the `planner` asset's blocking check stops it). Dagster's run queue
(dagster_home/dagster.yaml) lets one heavy run at a time use the machine; failed steps retry with
exponential backoff.
"""

import dagster as dg

from grasp_assets.dead_runs import release_dead_runs
from grasp_assets.partitions import DATASET, ROUND, dataset_partitions
from grasp_assets.stages import FINISH, PREPARE, RL_ROUND, Step, next_step
from grasp_assets.steps import HEAVY
from grasp_core.datasets import BUILTIN, DatasetConfig, user_skb_dirs

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


@dg.schedule(job=prepare_job, cron_schedule="0 3 * * 0", default_status=dg.DefaultScheduleStatus.STOPPED)
def weekly_retraining(context: dg.ScheduleEvaluationContext):
    """Every Sunday 03:00: retrain every registered dataset (start it in the UI or `dagster schedule start`)."""
    for dataset in context.instance.get_dynamic_partitions(DATASET):
        yield dg.RunRequest(run_key=f"{dataset}-{context.scheduled_execution_time:%Y%m%d}", partition_key=dataset)


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    monitored_jobs=[prepare_job, rl_round_job],
    request_jobs=[rl_round_job, finish_job],
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def chain_training_stages(context: dg.RunStatusSensorContext):
    """prepare → round 1 → round 2 → finish, for the dataset the finished run was about."""
    run = context.dagster_run
    tags = run.tags
    if run.job_name == prepare_job.name:
        done, dataset = Step(PREPARE), tags.get("dagster/partition")
    else:
        dataset, round_key = tags.get(f"dagster/partition/{DATASET}"), tags.get(f"dagster/partition/{ROUND}")
        if dataset is None or round_key is None:
            return dg.SkipReason("not a dataset × round run")
        done = Step(RL_ROUND, round_key)
    step = next_step(done)
    if step is None:
        return dg.SkipReason("the last stage finished")
    partition = dg.MultiPartitionKey({DATASET: dataset, ROUND: step.round_key}) if step.round_key else dataset
    suffix = f"r{step.round_key}" if step.round_key else step.stage
    return dg.RunRequest(run_key=f"{run.run_id}-{suffix}", job_name=step.stage, partition_key=partition)


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


@dg.sensor(minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.RUNNING)
def release_dead_runs_sensor(context: dg.SensorEvaluationContext):
    """Fails the runs whose worker processes are gone and frees their pool slots (see ``release_dead_runs``)."""
    released = release_dead_runs(context.instance)
    return dg.SkipReason(f"released {len(released)} dead run(s): {released}" if released else "no dead run")


jobs = [prepare_job, rl_round_job, finish_job]
schedules = [weekly_retraining]
sensors = [chain_training_stages, dataset_registry, release_dead_runs_sensor]

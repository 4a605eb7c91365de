"""The tiny trained system (:mod:`tests.e2e_system`: the whole DAG through Dagster on a user SKB imported from CSV
files with no queries, `smoke` profile) as a pipeline: every asset built with what it must hold, nothing held out
seen in training, the MLflow runs, a second run that rebuilds nothing, a variant that reuses what it does not
change, the promotion guard, and what a change of a setting or of the run config marks stale.

Every asset materializes for real (tiny models, a few training steps), which is the only way to know the stages
fit together; every step runs on components that refuse a profile section it does not declare
(``@step(reads=...)``), so the build also checks the declarations.
"""

import dataclasses
import json

import pytest
from mlflow.tracking import MlflowClient

from grasp_core.artifacts import Artifacts
from grasp_core.io import is_complete
from tests.e2e_system import DATASET, a_test_question, trained_system

# the module's first test also pays for the build (a whole pipeline, a few minutes alone on 2 cores; the two modules
# build side by side): more than the suite's 900 s per test where the machine is shared
pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """This module's own build of the tiny system (:mod:`tests.e2e_system`)."""
    yield from trained_system(tmp_path_factory)


def test_every_asset_is_built(trained):
    tmp, timings = trained
    art = Artifacts.for_dataset(DATASET, tmp / "artifacts")
    for name in (
        "skb",
        "queries",
        "node_embeddings",
        "vector_indexes",
        "graph_store",
        "entity_tables",
        "text_index",
        "mfar_model",
        "text_rankings",
        "teacher_plans",
        "planner_base",
        "sft_adapter",
        "reward_table",
        "reranker_hard_negatives",
        "reranker",
        "eval_metrics",
        "ablations",
        "latency",
        "release",
    ):
        assert is_complete(art.path(name)), name
    assert is_complete(art.path("rft_samples", "1")) and is_complete(art.path("planner", "1"))


def test_the_user_skb_got_synthesized_queries_for_every_relation(trained):
    tmp, _ = trained
    import pandas as pd

    from grasp_core.skb.format import read_skb

    queries = pd.read_parquet(Artifacts.for_dataset(DATASET, tmp / "artifacts").path("queries") / "queries.parquet")
    looked_up = queries["template"].str.startswith(("term>", "intent:"))  # train/val look-ups and findings lists
    assert set(queries.loc[looked_up, "split"]) == {"train", "val"} and looked_up.sum() > 40
    queries = queries[~looked_up]
    assert set(queries["split"]) == {"train", "val", "test"} and len(queries) == 120  # the smoke profile's count
    assert set(queries["register"]) == {"question", "request", "conversational", "terse"}
    asked = {r.split("|")[0] for t in queries["template"] for p in t.split(" & ") for r in p.split(">")[1::2]}
    relations = set(read_skb(tmp / "user_skbs" / DATASET, with_queries=False).schema.relation_names)
    assert len(asked) >= len(relations) // 2 and asked <= relations


def test_report_writes_the_results_document_from_the_assets_and_run_records(trained, capsys):
    tmp, _ = trained
    from grasp_assets.cli import main
    from grasp_core.components import Components
    from grasp_core.profiles import get_profile

    art = Artifacts.for_dataset(DATASET, tmp / "artifacts")
    out = tmp / "dagster_home" / "reports"  # the instance's ($DAGSTER_HOME): no --results-dir
    assert main(["--profile", "smoke", "--root", str(tmp / "artifacts"), "report", DATASET]) == 0
    md = capsys.readouterr().out
    doc = json.loads((out / f"pipeline_{DATASET}.json").read_text())
    assert doc["split"] == "test" and doc["profile"] == "smoke" and doc["dataset"] == DATASET
    assert doc["n_queries"] == len(Components(art, get_profile("smoke")).split("test")) > 12  # every test query
    rounds = ["rl1"] + (["rl2"] if is_complete(art.path("planner", "2")) else [])
    required = {"text", "graph", "teacher", "sft", *rounds, "served", "served+rerank"}
    assert required <= set(doc["settings"])
    assert {"no entity table", "no relevance text", "fixed-ratio fusion", "router", "bm25", "dense", "mfar"} <= set(
        doc["settings"]
    )
    assert all(0 <= v <= 100 for m in doc["settings"].values() for v in m.values())
    assert doc["settings"]["mfar"] == doc["settings"]["text"]  # the smoke profile's text branch is mFAR
    assert {"served vs text", "served vs sft", "served+rerank vs served"} <= set(doc["mcnemar"])
    assert all(0 <= p <= 1 for p in doc["mcnemar"].values())
    assert {"text", "planning", "reranking", "total"} <= set(doc["latency"])
    assert {"skb", "teacher_plans", "sft_adapter", "planner/1", "reranker", "eval_metrics", "ablations"} <= set(
        doc["steps"]
    )
    assert all(v > 0 for v in doc["steps"].values())
    served = doc["settings"]["served"]
    assert f"| served | {served['hit@1']:.1f} | {served['hit@5']:.1f} |" in md and "| eval_metrics |" in md


def test_no_trained_artifact_saw_a_held_out_query(trained):
    """The inputs of everything trained (the LM planner's tokenizer examples, the policy's SFT queries and executed
    candidates, RFT samples, the reranker's queries) hold training queries only."""
    tmp, _ = trained
    import pandas as pd

    from grasp_core.components import Components
    from grasp_core.pipeline.planner_lm import tokenizer_examples
    from grasp_core.pipeline.planner_policy import PolicyData
    from grasp_core.profiles import get_profile

    art = Artifacts.for_dataset(DATASET, tmp / "artifacts")
    components = Components(art, get_profile("smoke"))
    assert components.profile.planner == "policy"
    queries = components.skb.queries
    train = set(queries.loc[queries["split"] == "train", "qid"].astype(int))
    train_text = set(queries.loc[queries["split"] == "train", "query"])
    held_out = set(queries.loc[queries["split"].isin(["val", "test", "test-human"]), "query"]) - train_text
    assert held_out
    prompts, plans = tokenizer_examples(components)
    assert len(prompts) > 0
    assert not [q for q in held_out if any(q in t for t in prompts)]
    sft_qids = PolicyData(components).train_qids
    assert sft_qids and set(sft_qids) <= train
    executed = pd.read_parquet(art.require("teacher_plans") / "executed.parquet")
    assert len(executed) and set(executed["qid"].astype(int)) <= train
    for r in ("1", "2"):
        if is_complete(art.path("rft_samples", r)):
            assert set(pd.read_parquet(art.path("rft_samples", r) / "samples.parquet")["qid"].astype(int)) <= train
    negatives = pd.read_parquet(art.require("reranker_hard_negatives") / "hard_negatives.parquet")
    assert set(negatives["qid"].astype(int)) <= train
    # the test split's teacher plans exist (the oracle-guided setting) but only training ones were taught from
    teacher = pd.read_parquet(art.require("teacher_plans") / "plans.parquet")
    assert set(teacher["split"]) == {"train", "test"}


def test_the_rerankers_training_lists_come_from_choosers_that_never_saw_their_questions(trained, monkeypatch):
    """With a plan chooser, each fold of the training questions is answered by the served policy with its chooser
    refit on the other folds only (a chooser fit on a question picks better for it than for a new one, and the
    reranker would learn from lists better than those it reranks)."""
    from grasp_core.components import Components
    from grasp_core.pipeline import planner_policy
    from grasp_core.profiles import get_profile

    components = Components(Artifacts.for_dataset(DATASET, trained[0] / "artifacts"), get_profile("smoke"))
    _, checkpoint = components.final_planner()
    policy = components.planner(checkpoint)
    assert policy.chooser is not None  # the smoke build's served planner is an RL round with a chooser
    fitted_on: list[int] = []
    fit = planner_policy.fit_chooser
    monkeypatch.setattr(planner_policy, "fit_chooser", lambda lists, *a: fitted_on.append(len(lists)) or fit(lists, *a))
    train = components.split("train")["qid"].astype(int).tolist()
    folds = planner_policy.out_of_fold_planners(components, policy, checkpoint, train, 3)
    assert sorted(q for qids, _ in folds for q in qids) == sorted(train)
    with_gold = {q for q in train if components.answers([q])[0]}
    for (qids, planner), n in zip(folds, fitted_on, strict=True):
        assert n == len(with_gold - set(qids))  # every training question with an answer, but this fold's
        assert planner.head is policy.head and planner.chooser.booster is not policy.chooser.booster
        assert planner.chooser.k == policy.chooser.k


def test_the_reranker_reads_the_choosers_pool_and_the_fused_answer_stays_the_chosen_plans(trained):
    """The reranker's candidates are the chooser's pool; the answer without the reranker is unchanged by it."""
    from grasp_core.answer import AnswerOptions, AnswerPath
    from grasp_core.components import Components
    from grasp_core.profiles import get_profile

    components = Components(Artifacts.for_dataset(DATASET, trained[0] / "artifacts"), get_profile("smoke"))
    queries = components.split("test")["query"].head(8).tolist()
    pooled = AnswerPath(components, AnswerOptions(rerank=False, reranker_candidates=True)).answer(queries)
    plain = AnswerPath(components, AnswerOptions(rerank=False)).answer(queries)
    assert pooled.execution is not None and pooled.execution.pools is not None
    assert plain.execution is not None and plain.execution.pools is None
    for x, pool in zip(pooled.rerank_inputs(), pooled.execution.pools, strict=True):
        assert x.fused.node_ids.tolist() == pool.node_ids.tolist()
    for a, b in zip(pooled.fusion.rankings, plain.fusion.rankings, strict=True):
        assert a.node_ids.tolist() == b.node_ids.tolist()
    # the pool holds the chosen plan's fused list, and more where a runner-up returns other nodes
    for fused, pool in zip(pooled.fusion.rankings, pooled.execution.pools, strict=True):
        assert set(fused.node_ids[:5].tolist()) <= set(pool.node_ids.tolist())


def test_rl_runs_nest_under_a_parent_run_per_round(trained):
    """In the dataset's MLflow experiment, the build of `grasp pipeline` is one parent run; the asset runs nest under
    it, the RL steps under a parent run per round nested under it."""
    tmp, _ = trained
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp / 'mlflow.db'}")
    exp = client.get_experiment_by_name(f"grasp/{DATASET}")
    runs = client.search_runs([exp.experiment_id], max_results=500)
    [build] = [r for r in runs if r.data.tags.get("grasp.kind") == "pipeline"]
    parents = {r.info.run_id: r for r in runs if r.info.run_name == f"{DATASET}/round-1"}
    assert len(parents) == 1
    assert [p.data.tags["mlflow.parentRunId"] for p in parents.values()] == [build.info.run_id]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") in parents]
    assert {r.data.tags["step"] for r in children} >= {"rft_samples", "planner"}
    nested = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == build.info.run_id]
    assert {"skb", "teacher_plans", "sft_adapter", "reranker", "eval_metrics"} <= {
        r.data.tags.get("step") for r in nested
    }
    sft = next(r for r in runs if r.data.tags.get("step") == "sft_adapter")
    assert len(client.get_metric_history(sft.info.run_id, "loss")) >= 1


def test_second_run_rebuilds_nothing(trained):
    tmp, _ = trained
    from grasp_assets.run import run_pipeline

    assert run_pipeline(DATASET, profile="smoke", root=str(tmp / "artifacts")) == {}


def _materializations(instance, key: str) -> dict[str, list]:
    """Every materialization event of partition ``key`` (rounds: ``asset/round``), from Dagster's event log."""
    import dagster as dg

    from grasp_core.pipeline.step import STEPS
    from grasp_core.planner.rounds import ROUNDS

    out = {}
    for asset in STEPS:
        parts = {asset: key} | {f"{asset}/{r}": str(dg.MultiPartitionKey({"dataset": key, "round": r})) for r in ROUNDS}
        for label, partition in parts.items():
            records = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition]), limit=100
            ).records
            if records:
                out[label] = [r.asset_materialization for r in records]
    return out


def test_a_variant_that_changes_the_rerankers_k_builds_only_the_reranker_and_the_evaluation(trained, capsys):
    """`grasp pipeline mykb --variant k5` (reranker K 10 -> 5, a variant file in the instance) after the base build:
    every asset is materialized in the partition `mykb+k5`, but only the reranker's and the evaluation's are built
    (counted from Dagster's materialization events); every other artifact is the base's files hard-linked (the same
    inodes: byte-identical, stored once), says `reused_from` and logs no MLflow run. The MLflow parent runs of both
    builds hold the whole settings as params and the headline metrics; `grasp compare` prints both variants with
    McNemar p; `grasp query --variant` answers from the variant; `grasp gc` deletes it and frees only its own files."""
    import os

    import dagster as dg

    from grasp_assets.cli import main
    from grasp_assets.run import run_pipeline
    from grasp_assets.stages import FINISH, STAGE_ASSETS
    from grasp_core import manifest
    from grasp_core.experiments import artifacts_for

    tmp, _ = trained
    root = tmp / "artifacts"
    variant, key = "k5", f"{DATASET}+k5"
    (tmp / "dagster_home" / "experiments").mkdir(exist_ok=True)
    (tmp / "dagster_home" / "experiments" / "k5.toml").write_text("[rerank]\ntop_k = 5\n")
    (tmp / "dagster_home" / "experiments" / "typo.toml").write_text("[rerank]\ntopk = 5\n")
    cli = ["--profile", "smoke", "--root", str(root)]
    assert main([*cli, "pipeline", DATASET, "--variant", "typo"]) == 2
    [error] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert "typo.toml: [rerank] has no setting 'topk'; its settings: grid_k, grid_w, k, top_k, w" in error

    timings = run_pipeline(DATASET, profile="smoke", root=str(root), variant=variant)
    assert set(timings) >= {"prepare", "finish"}
    instance = dg.DagsterInstance.get()
    events = _materializations(instance, key)
    base = Artifacts.for_dataset(DATASET, root)
    built_in_base = {name if r is None else f"{name}/{r}" for name, r in base.built()}
    assert set(events) == built_in_base  # every artifact of the base has its variant's materialization
    built = {a for a, ms in events.items() if any("reused_from" not in m.metadata for m in ms)}
    # the reranker and the evaluation; the served lists the reranker learns from do not depend on K
    assert built == set(STAGE_ASSETS[FINISH]) - {"reranker_hard_negatives"}
    art = artifacts_for(key, root)
    for label in built_in_base - built:
        name, _, r = label.partition("/")
        here, there = base.path(name, r or None), art.path(name, r or None)
        [event] = events[label]
        assert event.metadata["reused_from"].value.startswith(DATASET)
        assert event.metadata["digest"].value == manifest.read(here).digest == manifest.verify(there, deep=True).digest
        files = [p.relative_to(here) for p in here.rglob("*") if p.is_file() and p.name != "_MANIFEST.json"]
        assert files and all(os.stat(here / f).st_ino == os.stat(there / f).st_ino for f in files), label
    assert manifest.read(art.path("reranker")).digest != manifest.read(base.path("reranker")).digest
    assert run_pipeline(DATASET, profile="smoke", root=str(root), variant=variant) == {}  # decided on its profile

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp / 'mlflow.db'}")
    exp = client.get_experiment_by_name(f"grasp/{DATASET}")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    builds = {r.data.tags["partition"]: r for r in runs if r.data.tags.get("grasp.kind") == "pipeline"}
    assert set(builds) == {DATASET, key}  # the no-op rebuilds started none
    ours, theirs = builds[key].data, builds[DATASET].data
    assert ours.tags["variant"] == variant and theirs.tags["variant"] == "base" and ours.tags["dagster_run_ids"]
    assert (ours.params["rerank.top_k"], theirs.params["rerank.top_k"]) == ("5", "10")
    assert {k for k in ours.params if ours.params[k] != theirs.params.get(k)} == {"rerank.top_k"}
    assert len(ours.params) > 200 and ours.tags["commit"]
    for metric in ("test/served/hit_at_1", "test/served_rerank/hit_at_5", "test/text/mrr", "test/served/recall_at_20"):
        assert metric in ours.metrics and metric in theirs.metrics, metric
    assert ours.metrics["test/served/hit_at_1"] == theirs.metrics["test/served/hit_at_1"]  # the same planner
    nested = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == builds[key].info.run_id]
    assert {r.data.tags["step"] for r in nested} == built  # reused assets logged no run

    assert main([*cli, "compare", DATASET, "base", variant]) == 0
    out = capsys.readouterr().out
    assert "| served+rerank | base |" in out and "| served+rerank | k5 |" in out and "McNemar p vs base" in out
    assert "| rerank.top_k | `10` | `5` |" in out
    assert main([*cli, "compare", DATASET, "base", key, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    cells = doc["splits"]["test"]["settings"]["served+rerank"]
    assert doc["variants"] == ["base", variant] and 0 <= cells[variant]["p"] <= 1 and "p" not in cells["base"]

    question = a_test_question(root)
    assert main([*cli, "query", DATASET, question, "--variant", variant]) == 0
    assert "Answers:" in capsys.readouterr().out

    assert main([*cli, "gc", key]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"removed {key}:") and "MiB stay (linked from other partitions)" in said
    assert not art.path("skb").exists() and not instance.has_dynamic_partition("dataset", key)
    for name, r in base.built():  # the base keeps every file
        base.verify(name, r)


def test_the_first_build_is_served_as_a_release_of_hard_links(trained):
    """The build's `release` promoted it (nothing was served before): every artifact of the release is the build's
    own files (the same inodes), and the retriever answers from the release."""
    from grasp_core.releases import ReleaseArtifacts, served_artifacts, served_record
    from grasp_core.retriever import GraspRetriever

    tmp, _ = trained
    root = tmp / "artifacts"
    record = served_record(DATASET, root)
    assert record["release"] >= 1 and set(record["metrics"]) >= {"val"}
    served, art = served_artifacts(DATASET, root), Artifacts.for_dataset(DATASET, root)
    assert isinstance(served, ReleaseArtifacts)
    assert {n for n, _ in served.built()} == {n for n, _ in art.built()} - {"release"}
    ranker = served.path("reranker") / "ranker.txt"
    assert ranker.stat().st_ino == (art.path("reranker") / "ranker.txt").stat().st_ino
    retriever = GraspRetriever.from_artifacts(DATASET, root, "smoke")
    assert retriever.components.art.path("reranker") == served.path("reranker")


def test_the_promotion_guard_keeps_the_served_release_when_the_retrained_planner_is_worse(trained, tmp_path):
    """A copy of the trained partition whose served planner is made worse on purpose (its scores negated, its chooser
    removed: it picks the plans it ranked last): `release` answers the guard's questions with it and with the served
    release, refuses it, and says why; the served release stays. Unharmed, the copy was promoted first (nothing was
    served there)."""
    import torch

    from grasp_core import manifest
    from grasp_core.components import Components
    from grasp_core.io import link_dir
    from grasp_core.pipeline.release import release_step
    from grasp_core.planner.policy.chooser import META_FILE, MODEL_FILE
    from grasp_core.planner.policy.model import WEIGHTS
    from grasp_core.profiles import get_profile
    from grasp_core.releases import served_record

    tmp, _ = trained
    source = Artifacts.for_dataset(DATASET, tmp / "artifacts")
    root = tmp_path / "artifacts"
    art = Artifacts.for_dataset(DATASET, root)
    for name, r in source.built():  # a copy of the build (hard links: nothing of the module's build changes)
        link_dir(source.path(name, r), art.path(name, r))
    profile = get_profile("smoke")
    profile = profile.replace(retrain=dataclasses.replace(profile.retrain, guard_tolerance=0.0))

    first = release_step(Components(art, profile))
    assert first["promoted"] and first["reason"] == "first release of this partition"
    assert served_record(DATASET, root)["release"] == 1

    _, checkpoint = Components(art, profile).final_planner()
    old = manifest.read(checkpoint)
    weights = torch.load(checkpoint / WEIGHTS, weights_only=True)
    (checkpoint / WEIGHTS).unlink()  # a new file: the module's build keeps its own through the other link
    torch.save({k: -v for k, v in weights.items()}, checkpoint / WEIGHTS)
    for chooser_file in (MODEL_FILE, META_FILE):
        (checkpoint / chooser_file).unlink(missing_ok=True)
    manifest.write(checkpoint, old.code_version, old.inputs)

    worse = release_step(Components(art, profile))
    assert not worse["promoted"], worse
    assert worse["reason"].startswith("kept the served release: Hit@1 fell by more than 0 points on val")
    assert worse["val_hit1_after"] < worse["val_hit1_before"] and worse["served_release"] == 1
    assert served_record(DATASET, root)["release"] == 1  # still serving the first
    decision = json.loads((art.path("release") / "decision.json").read_text())
    assert decision["promoted"] is False and decision["hit1_served_before"]["val"] == first["val_hit1_after"]


# ---- what a change marks stale and rebuilds (these run last: they change the artifacts) -------------------------


def _stale(profile) -> set[str]:
    """The assets Dagster reports stale (any built partition) for ``profile``'s definitions."""
    import dagster as dg
    from dagster._core.definitions.data_version import StaleStatus

    from grasp_assets.definitions import build_definitions
    from grasp_assets.freshness import stale_resolver
    from grasp_core.planner.rounds import ROUNDS

    defs = build_definitions(profile)
    graph = defs.resolve_asset_graph()
    resolver = stale_resolver(dg.DagsterInstance.get(), graph)
    stale = set()
    for key in graph.materializable_asset_keys:
        multi = isinstance(graph.get(key).partitions_def, dg.MultiPartitionsDefinition)
        parts = [dg.MultiPartitionKey({"dataset": DATASET, "round": r}) for r in ROUNDS] if multi else [DATASET]
        statuses = {resolver.get_status(key, p) for p in parts}
        assert statuses != {StaleStatus.MISSING}, key
        stale |= {key.to_user_string()} if StaleStatus.STALE in statuses else set()
    return stale


def _changed(value):
    """``value`` with one setting changed (None when there is none to change generically)."""
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            new = _changed(getattr(value, f.name))
            if new is not None:
                return dataclasses.replace(value, **{f.name: new})
        return None
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value + "-x"
    if isinstance(value, tuple) and value:
        return value[:-1]
    return None


def test_every_profile_setting_marks_exactly_the_assets_that_read_it_stale(trained):
    """Each field of Profile in turn (from the dataclass): Dagster reports stale exactly the assets whose step
    declares it; the declarations are complete because every step of this module's run ran on components that
    refuse any other section."""
    import dataclasses

    from grasp_core.pipeline.step import STEPS
    from grasp_core.profiles import Profile, get_profile

    smoke = get_profile("smoke")
    assert _stale(smoke) == set()
    readers = {}
    for f in dataclasses.fields(Profile):
        changed = _changed(getattr(smoke, f.name))
        assert changed is not None, f.name
        readers[f.name] = _stale(smoke.replace(**{f.name: changed}))
        assert readers[f.name] == {name for name, step in STEPS.items() if f.name in step.reads}, f.name
    # every plan execution reads `execution` (anchor linking, top-k, traversal); the evaluation fuses with `reward`
    assert {"teacher_plans", "rft_samples", "planner", "reranker_hard_negatives", "eval_metrics"} <= readers[
        "execution"
    ]
    assert {"eval_metrics", "ablations"} <= readers["reward"]


def test_a_run_config_override_is_recorded_as_another_code_version(trained):
    """`mfar_model` rematerialized with `epochs` overridden in the run config: the materialization records the
    code version of the overridden settings, so Dagster reports it stale against the profile's."""
    import dataclasses

    import dagster as dg

    from grasp_assets.definitions import build_definitions
    from grasp_assets.resources import MLflowTracking, SettingsResource
    from grasp_assets.versions import code_version
    from grasp_core.pipeline.step import STEPS
    from grasp_core.profiles import get_profile

    tmp, _ = trained
    smoke = get_profile("smoke")
    defs = build_definitions(smoke)
    result = dg.materialize(
        list(defs.assets),
        selection=["mfar_model"],
        partition_key=DATASET,
        instance=dg.DagsterInstance.get(),
        resources={
            "settings": SettingsResource(profile="smoke", artifacts_root=str(tmp / "artifacts")),
            "mlflow": MLflowTracking(),
        },
        run_config={"ops": {"mfar_model": {"config": {"epochs": smoke.mfar.epochs + 1}}}},
    )
    assert result.success
    [event] = result.asset_materializations_for_node("mfar_model")
    overridden = smoke.replace(mfar=dataclasses.replace(smoke.mfar, epochs=smoke.mfar.epochs + 1))
    assert event.tags["dagster/code_version"] == code_version(STEPS["mfar_model"], overridden)
    assert event.tags["dagster/code_version"] != code_version(STEPS["mfar_model"], smoke)
    assert "mfar_model" in _stale(smoke)

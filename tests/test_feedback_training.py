"""Feedback as training data: confirmed questions become `train` and held-out `feedback` questions of `queries`, the
`feedback_source` observation makes `queries` stale, and the `feedback_growth` sensor requests the retrain once the
confirmed questions grew by `retrain.retrain_after` (Dagster's own staleness, real materializations in a test
instance)."""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg
import pandas as pd
import pytest

from grasp_assets.automation import feedback_growth, weekly_retraining
from grasp_assets.definitions import defs
from grasp_assets.freshness import observe_feedback, observe_source
from grasp_assets.partitions import DATASET
from grasp_assets.resources import MLflowTracking, SettingsResource
from grasp_core.artifacts import Artifacts
from grasp_core.feedback import FeedbackStore, skb_keys
from grasp_core.questions.feedback_queries import (
    FEEDBACK_SPLIT,
    ConfirmedQuestion,
    confirmed_questions,
    feedback_queries,
    fingerprint,
    is_held_out,
)
from grasp_core.retrain_config import FeedbackConfig
from grasp_core.skb.format import SKB, write_skb
from tests.assets.test_automation import tiny_skb


def _row(question, node, relevant):
    return {"question": question, "node_id": node, "relevant": relevant}


def test_the_latest_judgement_of_a_question_and_answer_counts():
    rows = [
        _row("Which shoe?", 0, True),
        _row("which  shoe", 1, True),  # the same question once normalized
        _row("which shoe?", 1, False),  # then rejected
        _row("a stove", 2, False),  # never confirmed: not a question
        _row(None, 0, True),  # question logging was off: no text to train on
    ]
    assert confirmed_questions(rows) == [ConfirmedQuestion("which shoe", (0,))]


def test_feedback_questions_never_repeat_a_dataset_question_and_hold_out_a_stable_share():
    queries = pd.DataFrame(
        {"qid": [1, 2], "split": ["train", "test"], "query": ["an acme shoe", "A stove?"], "answer_ids": [[0], [1]]}
    )
    asked = [ConfirmedQuestion(f"question {i}", (i % 3,)) for i in range(200)]
    asked += [ConfirmedQuestion("a stove", (1,)), ConfirmedQuestion("far away", (99,))]  # a test text; no such node
    rows = feedback_queries(asked, queries, num_nodes=3, cfg=FeedbackConfig(holdout_share=0.2))
    assert len(rows) == 200 and rows["qid"].min() == 3 and rows["qid"].is_unique
    assert "a stove" not in set(rows["query"])
    held = rows["split"] == FEEDBACK_SPLIT
    assert 25 <= held.sum() <= 55 and set(rows["split"]) == {"train", FEEDBACK_SPLIT}
    # a question's split is a function of its text alone: more feedback never moves one
    assert all(is_held_out(q, 0.2) == h for q, h in zip(rows["query"], held))
    fewer = feedback_queries(asked[:50], queries, num_nodes=3, cfg=FeedbackConfig(holdout_share=0.2))
    assert dict(zip(fewer["query"], fewer["split"])) == {
        q: s for q, s in zip(rows["query"], rows["split"]) if q in set(fewer["query"])
    }
    assert fingerprint(asked[:50]) != fingerprint(asked) and fingerprint(asked) == fingerprint(list(asked))


def _shop() -> SKB:
    """The automation tests' tiny shop, with a val question too (the feedback must never repeat one)."""
    skb = tiny_skb()
    queries = pd.DataFrame(
        {
            "qid": [1, 2, 3],
            "split": ["train", "val", "test"],
            "query": ["an Acme shoe", "acme goods", "a stove"],
            "answer_ids": [[0], [0, 1], [1]],
        }
    )
    return SKB(skb.schema, skb.nodes, skb.edges, queries)


@pytest.fixture
def shop(tmp_path, monkeypatch):
    """A registered user SKB in a test instance, its `skb` and `queries` materialized for real."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.setenv("GRASP_HOME", str(tmp_path / "artifacts"))
    monkeypatch.setenv("GRASP_USER_SKBS", str(tmp_path / "user_skbs"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    write_skb(_shop(), tmp_path / "user_skbs" / "shop")
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(DATASET, ["shop"])
        observe_source(instance, "shop", SettingsResource().get_profile().dataset)
        assert observe_feedback(instance, "shop") == (0, 0)  # the first observation: no feedback yet
        _materialize(instance, "skb", "queries")
        yield instance, Artifacts.for_dataset("shop", tmp_path / "artifacts")


def _materialize(instance, *names):
    assets = [defs.get_assets_def(n) for n in names]
    result = dg.materialize(
        assets,
        instance=instance,
        partition_key="shop",
        resources={"settings": SettingsResource(), "mlflow": MLflowTracking()},
        selection=list(names),
    )
    assert result.success


def _confirm(art, questions):
    with FeedbackStore("shop", skb_keys(art)) as store:
        store.add([{"query": q, "answer_key": "p1", "relevant": True} for q in questions], "import")


def test_feedback_growth_requests_the_retrain_of_what_it_makes_stale(shop):
    instance, art = shop
    tick = lambda: feedback_growth(dg.build_sensor_context(instance=instance, repository_def=defs.get_repository_def()))  # noqa: E731
    assert isinstance(tick(), dg.SkipReason)
    _confirm(art, [f"light shoe number {i}" for i in range(49)] + ["a stove"])  # "a stove" is a test question
    [request] = tick()  # 50 new confirmed questions: `retrain.retrain_after` (50) reached
    assert (request.job_name, request.partition_key) == ("prepare", "shop")
    # the SKB is unchanged; `queries` is stale because of the feedback (the rest of the wave was never built here)
    assert dg.AssetKey("queries") in request.asset_selection and dg.AssetKey("skb") not in request.asset_selection
    why = request.tags["grasp/why"]
    assert why.startswith("feedback grew by 50 confirmed questions (50 in all; retrain after 50)")
    assert "queries: feedback grew" in why
    assert isinstance(tick(), dg.SkipReason)  # observed: the same feedback requests nothing again

    _confirm(art, [f"heavy stove number {i}" for i in range(10)])
    assert isinstance(tick(), dg.SkipReason)  # 10 new: not yet
    # the weekly schedule retrains on any new confirmed question
    sunday = datetime(2025, 1, 5, 3, 0, tzinfo=UTC)
    context = dg.build_schedule_context(
        instance=instance, scheduled_execution_time=sunday, repository_def=defs.get_repository_def()
    )
    [weekly] = list(weekly_retraining(context))
    assert weekly.tags["grasp/why"].startswith("weekly: 10 new confirmed feedback questions")

    _materialize(instance, "queries")
    queries = pd.read_parquet(art.path("queries") / "queries.parquet")
    from_use = queries[queries["qid"] > 3]
    assert len(from_use) == 59 and "a stove" not in set(from_use["query"])  # the test question never trains
    assert set(from_use["split"]) == {"train", FEEDBACK_SPLIT} and all(list(a) == [0] for a in from_use["answer_ids"])
    assert set(queries.loc[queries["qid"] <= 3, "split"]) == {"train", "val", "test"}

"""The feedback store and `grasp feedback add/import/list` on a real SKB artifact (the tiny synth-prime graph, built
in a second by `grasp data build`). The HTTP side, on a real `grasp serve`, and the kill test are in
``tests/test_end_to_end.py``."""

from __future__ import annotations

import json
import sqlite3

import pandas as pd
import pytest

from grasp_core.artifacts import Artifacts
from grasp_core.cli import main
from grasp_core.feedback import FeedbackError, FeedbackStore, skb_keys, store_path

DATASET = "synth-prime"


@pytest.fixture(scope="module")
def instance(tmp_path_factory):
    home = tmp_path_factory.mktemp("feedback") / "dagster_home"
    mp = pytest.MonkeyPatch()
    mp.setenv("DAGSTER_HOME", str(home))
    mp.delenv("GRASP_HOME", raising=False)
    assert main(["data", "build", DATASET, "--scale", "tiny", "--no-queries"]) == 0
    nodes = pd.read_parquet(Artifacts.for_dataset(DATASET).skb / "nodes.parquet")
    yield home, nodes["key"].tolist()
    mp.undo()


@pytest.fixture
def fresh(instance):
    """A dataset's store, emptied before the test."""
    home, keys = instance
    for suffix in ("", "-wal", "-shm"):
        store_path(DATASET).with_name(f"{DATASET}.sqlite{suffix}").unlink(missing_ok=True)
    return home, keys


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    return err


def test_the_store_lives_in_the_instance_and_commits_durably(fresh):
    home, _ = fresh
    with FeedbackStore(DATASET, skb_keys(Artifacts.for_dataset(DATASET))) as store:
        assert store.path == home / "feedback" / f"{DATASET}.sqlite"
        assert store._db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert store._db.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL: the WAL is synced at each commit


def test_served_requests_take_feedback_by_id_and_question_logging_can_be_turned_off(fresh):
    _, keys = fresh
    known = skb_keys(Artifacts.for_dataset(DATASET))
    with FeedbackStore(DATASET, known) as logged, FeedbackStore(DATASET, known, log_questions=False) as quiet:
        (rid_logged,) = logged.record_requests("query", [("which drug treats gout?", keys[:5])])
        (rid_quiet,) = quiet.record_requests("query", [("a private question", keys[5:10])])
        ids = quiet.add(
            [
                {"request_id": rid_logged, "answer_key": keys[2], "relevant": True},
                {"request_id": rid_quiet, "answer_key": keys[7], "relevant": False},
                {"request_id": rid_quiet, "answer_key": keys[20], "relevant": True},  # not served: no rank
                {"query": "  gout drugs ", "answer_key": keys[3], "relevant": True},
            ],
            "http",
        )
        rows = logged.rows()
        questions = dict(logged._db.execute("SELECT request_id, query FROM requests").fetchall())
    assert questions == {rid_logged: "which drug treats gout?", rid_quiet: None}
    assert [r["id"] for r in rows] == ids
    assert [(r["question"], r["answer_key"], r["node_id"], r["relevant"], r["rank"]) for r in rows] == [
        ("which drug treats gout?", keys[2], known[keys[2]], True, 3),
        (None, keys[7], known[keys[7]], False, 3),
        (None, keys[20], known[keys[20]], True, None),
        ("gout drugs", keys[3], known[keys[3]], True, None),
    ]
    assert [r["query"] for r in rows] == [None, None, None, "gout drugs"]


@pytest.mark.parametrize(
    ("record", "status", "message"),
    [
        ("not a record", 400, "not a JSON object"),
        ({"answer_key": "x", "relevant": True}, 400, 'needs "request_id"'),
        ({"query": "q", "answer_key": "x", "relevant": True, "answer": "y"}, 400, "unknown field 'answer'"),
        ({"query": "q", "answer_key": "KEY", "relevant": "yes"}, 400, '"relevant" must be true or false'),
        ({"query": "q", "answer_key": 7, "relevant": True}, 400, '"answer_key" must be the key of an answer'),
        ({"query": "   ", "answer_key": "KEY", "relevant": True}, 400, '"query" is empty'),
        ({"query": "q", "answer_key": "no-such-key", "relevant": True}, 422, "is not a node of dataset"),
        ({"request_id": "feed", "answer_key": "KEY", "relevant": True}, 404, "request_id 'feed' is unknown"),
    ],
)
def test_bad_feedback_is_refused_in_one_line_and_a_refused_batch_writes_nothing(fresh, record, status, message):
    _, keys = fresh
    if isinstance(record, dict):
        record = {f: keys[0] if v == "KEY" else v for f, v in record.items()}
    good = {"query": "q", "answer_key": keys[0], "relevant": True}
    with FeedbackStore(DATASET, skb_keys(Artifacts.for_dataset(DATASET))) as store:
        with pytest.raises(FeedbackError) as refused:
            store.add([good, record], "http")
        assert store.counts()["feedback"] == 0
    assert refused.value.status == status and message in str(refused.value) and "\n" not in str(refused.value)
    assert str(refused.value).startswith("record 2: ")


def test_cli_adds_imports_and_lists_feedback(fresh, tmp_path, capsys):
    _, keys = fresh
    assert main(["feedback", "add", DATASET, "--query", "what treats gout?", "--answer", keys[1]]) == 0
    assert main(["feedback", "add", DATASET, "--query", "what treats gout?", "--answer", keys[2], "--irrelevant"]) == 0
    assert "feedback 2 recorded" in capsys.readouterr().out

    assert main(["feedback", "add", DATASET, "--query", "q", "--answer", "no-such-key"]) == 2
    assert "'no-such-key' is not a node of dataset" in _one_line_error(capsys)
    assert main(["feedback", "add", DATASET, "--request-id", "abc", "--answer", keys[1]]) == 2
    assert "request_id 'abc' is unknown" in _one_line_error(capsys)

    lines = [
        json.dumps({"query": "symptoms of gout", "answer_key": keys[3], "relevant": True}),
        json.dumps({"query": "q", "answer_key": "no-such-key", "relevant": True}),
        "{broken",
        "",
        json.dumps({"query": "q", "answer_key": keys[4], "relevant": 1}),
        json.dumps({"query": "gout", "answer_key": keys[5], "relevant": False}),
    ]
    src = tmp_path / "feedback.jsonl"
    src.write_text("\n".join(lines) + "\n")
    assert main(["feedback", "import", DATASET, str(src)]) == 2
    out, err = capsys.readouterr()
    assert "imported 2 feedback records" in out
    assert err.splitlines() == [
        "  line 2: answer_key 'no-such-key' is not a node of dataset 'synth-prime'",
        "  line 3: not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))",
        '  line 5: "relevant" must be true or false, not 1',
        f"error: 3 of 5 lines of {src} were refused (listed above); the other 2 were kept",
    ]

    assert main(["feedback", "list", DATASET, "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["id"], r["question"], r["answer_key"], r["relevant"], r["source"]) for r in rows] == [
        (1, "what treats gout?", keys[1], True, "cli"),
        (2, "what treats gout?", keys[2], False, "cli"),
        (3, "symptoms of gout", keys[3], True, "import"),
        (4, "gout", keys[5], False, "import"),
    ]
    assert main(["feedback", "list", DATASET, "--limit", "1"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 1 and out.split()[0] == "4" and "irrelevant" in out
    assert "4 feedback records (2 relevant)" in err

    with sqlite3.connect(store_path(DATASET)) as db:  # what another reader (a training step) sees
        assert db.execute("SELECT COUNT(*) FROM feedback").fetchone() == (4,)


def test_feedback_on_a_dataset_without_its_skb_says_to_build_it(fresh, capsys):
    assert main(["feedback", "add", "synth-amazon", "--query", "q", "--answer", "x"]) == 2
    assert "has not been built yet" in _one_line_error(capsys)
    assert main(["feedback", "list", "synth-amazon"]) == 0
    assert "no feedback for 'synth-amazon' yet" in capsys.readouterr().err

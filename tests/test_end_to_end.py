"""The whole DAG through Dagster on a tiny SKB with the `smoke` profile, then the product API and CLI on it.

This is the slowest test (a few minutes on 2 cores): every asset materializes for real (tiny models, a few
training steps), which is the only way to know the stages fit together.
"""

import json

import pytest
from mlflow.tracking import MlflowClient

from grasp_core.artifacts import Artifacts
from grasp_core.io import is_complete, read_json

DATASET = "synth-prime"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("e2e")
    mp = pytest.MonkeyPatch()
    mp.setenv("DAGSTER_HOME", str(tmp / "dagster_home"))
    mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp / 'mlflow.db'}")
    (tmp / "dagster_home").mkdir()
    from grasp_assets.run import run_pipeline

    timings = run_pipeline(DATASET, profile="smoke", root=str(tmp / "artifacts"))
    yield tmp, timings
    mp.undo()


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
    ):
        assert is_complete(art.path(name)), name
    assert is_complete(art.path("rft_samples", "1")) and is_complete(art.path("planner", "1"))
    metrics = read_json(art.path("eval_metrics") / "metrics.json")
    assert {r["reranker"] for r in metrics["rows"]} == {"no", "yes"}
    assert [r["setting"].rsplit(" ", 1)[-1] for r in metrics["rows"][1:]] == ["K=10", "K=5"]  # deepest first
    assert all(r["s/query"] > 0 for r in metrics["rows"][1:])  # each depth timed, the shallower one without the cache
    # every pair the reranker scored is kept for the ablations; the served top K is made of such pairs
    import pandas as pd

    run = pd.read_parquet(art.path("eval_metrics") / "test_run.parquet")
    for nodes, scores, served in zip(run["pair_nodes"], run["pair_scores"], run["reranked_ids"]):
        assert len(nodes) == len(scores) == len(set(nodes)) and set(served[: len(nodes)]) == set(nodes)
    settings = {r["setting"] for r in read_json(art.path("ablations") / "ablations.json")["rows"]}
    assert {
        "text only",
        "graph only",
        "no entity table",
        "no relevance text (whole query)",
        "SFT only",
        "teacher (oracle-guided)",
        "fixed-ratio fusion (AF-Retriever)",
        "router (HybGRAG)",
    } <= settings
    progression = read_json(art.path("ablations") / "ablations.json")["progression"]
    assert [(r["split"], r["planner"]) for r in progression] == [
        (split, p)
        for split in ("val", "test")
        for p in ("text only", "teacher (oracle-guided)", "SFT", "SFT + RL round 1", "SFT + RL round 2")
        if p != "SFT + RL round 2" or is_complete(art.path("planner", "2"))
    ]
    assert all(0 <= r["fused hit@1"] <= 100 for r in progression)


def test_rl_runs_nest_under_a_parent_run_per_round(trained):
    tmp, _ = trained
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp / 'mlflow.db'}")
    exp = client.get_experiment_by_name("grasp")
    runs = client.search_runs([exp.experiment_id], max_results=500)
    parents = {r.info.run_id: r for r in runs if r.info.run_name == f"{DATASET}/round-1"}
    assert len(parents) == 1
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") in parents]
    assert {r.data.tags["step"] for r in children} >= {"rft_samples", "planner"}
    sft = next(r for r in runs if r.data.tags.get("step") == "sft_adapter")
    assert len(client.get_metric_history(sft.info.run_id, "loss")) >= 1


def test_second_run_rebuilds_nothing(trained):
    tmp, _ = trained
    from grasp_assets.run import run_pipeline

    assert run_pipeline(DATASET, profile="smoke", root=str(tmp / "artifacts")) == {}


def test_retriever_explains_and_batch_retrieval_returns_known_keys(trained, capsys):
    tmp, _ = trained
    from grasp_core.cli import main

    root = str(tmp / "artifacts")
    art = Artifacts.for_dataset(DATASET, root)
    import pandas as pd

    nodes = pd.read_parquet(art.path("skb") / "nodes.parquet")
    queries = pd.read_parquet(art.path("queries") / "queries.parquet").head(3)
    assert main(["--profile", "smoke", "--root", root, "query", DATASET, queries["query"][0]]) == 0
    out = capsys.readouterr().out
    assert "Plan (" in out and "found by" in out and "Answers:" in out

    src = tmp / "in.jsonl"
    lines = [json.dumps({"qid": int(q), "query": t}) for q, t in zip(queries["qid"], queries["query"])]
    src.write_text("\n".join(lines[:2] + ["{broken", lines[2]]) + "\n")
    assert (
        main(
            [
                "--profile",
                "smoke",
                "--root",
                root,
                "retrieve",
                DATASET,
                "--queries",
                str(src),
                "--out",
                str(tmp / "out.jsonl"),
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in (tmp / "out.jsonl").read_text().splitlines()]
    assert [r["qid"] for r in rows] == [int(q) for q in queries["qid"]]
    keys = set(nodes["key"])
    assert all(r["ranking"] and all(item["key"] in keys for item in r["ranking"]) for r in rows)
    assert "in.jsonl:3: not JSON" in capsys.readouterr().err


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_answers_like_the_cli_and_rejects_bad_requests(trained, tmp_path, capsys):
    import os
    import signal
    import subprocess
    import sys
    import time

    import httpx
    import pandas as pd

    from grasp_core.cli import main

    tmp, _ = trained
    root = str(tmp / "artifacts")
    queries = pd.read_parquet(Artifacts.for_dataset(DATASET, root).path("queries") / "queries.parquet").head(2)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "grasp_core.cli", "--profile", "smoke", "--root", root, "serve", DATASET]
    server = subprocess.Popen([*cmd, "--port", str(port)], env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, "grasp serve exited"
            try:
                health = httpx.get(f"{url}/health", timeout=2).json()
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "grasp serve did not come up"
                time.sleep(0.5)
        assert health["status"] == "ok" and health["dataset"] == DATASET and health["profile"] == "smoke"
        assert {"skb", "mfar_model", "graph_store", "reranker", "planner/1"} <= set(health["artifacts"])

        # a batch with bad records: the good ones are answered exactly as one CLI batch of them
        good = [{"qid": int(q), "query": t} for q, t in zip(queries["qid"], queries["query"])]
        body = [good[0], {"qid": "e", "query": "   "}, "not a record", {"query": good[1]["query"]}]
        response = httpx.post(f"{url}/retrieve", json=body, timeout=120)
        assert response.status_code == 200
        out = response.json()
        assert [r["qid"] for r in out] == [good[0]["qid"], "e", 3, 4]
        assert out[1] == {"qid": "e", "error": "the query is empty"} and "query" in out[2]["error"]
        src = tmp_path / "in.jsonl"
        src.write_text(json.dumps(good[0]) + "\n" + json.dumps({"qid": 4, "query": good[1]["query"]}) + "\n")
        cli = ["--profile", "smoke", "--root", root, "retrieve", DATASET, "--batch-size", "2"]
        assert main([*cli, "--queries", str(src), "--out", str(tmp_path / "out.jsonl")]) == 0
        assert [out[0], out[3]] == [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
        assert len(out[0]["ranking"]) == 100

        explained = httpx.post(f"{url}/query", json={"query": good[0]["query"], "k": 3}, timeout=120).json()
        assert len(explained["answers"]) == 3 and explained["plan"] and explained["entity_table"] is not None
        assert [a["node_id"] for a in explained["answers"]] == [a["node_id"] for a in out[0]["ranking"][:3]]
        assert all(a["found_by"] in ("text", "graph", "text+graph") for a in explained["answers"])
        assert explained["ms"]["text"] > 0 and explained["ms"]["planning"] > 0

        for method, path, content, status, message in [
            ("POST", "/query", b'{"k": 3}', 400, '"query" must be a non-empty question'),
            ("POST", "/query", b'{"query": "x", "k": 0}', 400, '"k" (answers returned) must be an integer'),
            ("POST", "/query", b"{broken", 400, "the body is not JSON"),
            ("POST", "/retrieve", b'{"qid": 1, "query": "x"}', 400, "the body must be a JSON array"),
            ("POST", "/retrieve", json.dumps([good[0]] * 33).encode(), 413, "send at most 32 per request"),
            ("GET", "/retrieve", b"", 405, "Method Not Allowed"),
            ("GET", "/nothing", b"", 404, "Not Found"),
        ]:
            response = httpx.request(method, f"{url}{path}", content=content, timeout=30)
            error = response.json()["error"]
            assert response.status_code == status and message in error and "\n" not in error, (path, error)
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=60) == 0
    capsys.readouterr()


def test_serve_one_failing_question_never_fails_its_batch(trained):
    from fastapi.testclient import TestClient

    from grasp_core.retriever import GraspRetriever
    from grasp_core.serve import create_app

    tmp, _ = trained
    retriever = GraspRetriever.from_artifacts(DATASET, tmp / "artifacts", "smoke", rerank=False)

    class FailsOnOneQuestion:  # the real retriever, with an internal failure on one question
        branches, use_rerank = retriever.branches, retriever.use_rerank

        def retrieve(self, queries, **kwargs):
            if "boom" in queries:
                raise RuntimeError("boom")
            return retriever.retrieve(queries, **kwargs)

    with TestClient(create_app(FailsOnOneQuestion(), {"dataset": DATASET})) as client:
        out = client.post("/retrieve", json=[{"qid": 1, "query": "which drugs?"}, {"qid": 2, "query": "boom"}]).json()
        assert len(out[0]["ranking"]) == 100
        assert out[1] == {"qid": 2, "error": "internal error (RuntimeError); see the server log"}
        response = client.post("/query", json={"query": "boom"})
        assert response.status_code == 500 and response.json()["error"].startswith("internal error")
        assert client.get("/health").json() == {"status": "ok", "dataset": DATASET}


def test_parallel_branches_give_the_same_answers(trained):
    import pandas as pd

    from grasp_core.retriever import GraspRetriever

    tmp, _ = trained
    root = tmp / "artifacts"
    queries = pd.read_parquet(Artifacts.for_dataset(DATASET, root).path("queries") / "queries.parquet")["query"]
    sequential = GraspRetriever.from_artifacts(DATASET, root, "smoke", rerank=False).retrieve(queries[:4])
    parallel = GraspRetriever.from_artifacts(DATASET, root, "smoke", rerank=False, parallel_branches=True)
    for a, b in zip(sequential, parallel.retrieve(queries[:4])):
        assert [x.to_json() for x in a.answers] == [x.to_json() for x in b.answers] and a.answers
        assert b.seconds["text"] > 0 and b.plan == a.plan


def test_llm_extractor_end_to_end_against_a_local_endpoint(trained, capsys, monkeypatch):
    """`extractor=llm` (profile or `--extractor`) asks the endpoint; mentions it returns are linked and planned on."""
    tmp, _ = trained
    import pandas as pd

    from grasp_core.cli import main
    from grasp_core.entities.llm_extractor import mentions_to_json
    from grasp_core.retriever import GraspRetriever
    from tests.llm.openai_server import OpenAIServer

    root = str(tmp / "artifacts")
    art = Artifacts.for_dataset(DATASET, root)
    queries = pd.read_parquet(art.path("queries") / "queries.parquet").query("split == 'test'")["query"].head(3)
    queries = queries.tolist()
    gazetteer = GraspRetriever.from_artifacts(DATASET, root, "smoke", rerank=False)

    def answer(messages):  # an LLM that answers with the gazetteer's mentions, except for one query
        query = messages[-1]["content"].rsplit("Query: ", 1)[1].removesuffix("\nMentions:")
        if query == queries[2]:
            return "I cannot tell."
        return mentions_to_json(gazetteer.ws.gazetteer.find_mentions([query])[0])

    with OpenAIServer(answer) as server:
        monkeypatch.setenv("GRASP_EXTRACTOR_URL", server.url)
        llm = GraspRetriever.from_artifacts(DATASET, root, "smoke", extractor="llm", rerank=False)
        got, want = llm.retrieve(queries, k=5), gazetteer.retrieve(queries, k=5)
        assert len(server.requests) == 3 and server.requests[0]["model"] == "Qwen3-1.7B"
        demos = len(llm.ws.extractor.demonstrations)
        assert demos > 0 and server.requests[0]["messages"][0]["content"].count("\nMentions: ") == demos
        assert [r.entity_table.to_json() for r in got] == [r.entity_table.to_json() for r in want]
        assert [[a.node_id for a in r.answers] for r in got] == [[a.node_id for a in r.answers] for r in want]
        assert [e.source for e in llm.ws.extractor.extract_detailed(queries)] == ["llm", "llm", "gazetteer"]

        capsys.readouterr()
        assert main(["--profile", "smoke", "--root", root, "query", DATASET, queries[0], "--extractor", "llm"]) == 0
        assert "Entity table:" in capsys.readouterr().out and len(server.requests) == 7

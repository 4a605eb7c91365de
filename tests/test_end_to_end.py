"""The tiny trained system (:mod:`tests.e2e_system`: the whole DAG through Dagster on a user SKB imported from CSV
files, `smoke` profile) used as a product: the Python API, the CLI, `grasp serve` and its feedback, the integrations,
a corrupted artifact, the Bolt server store and runs in containers; then an edited node text, rebuilt and answered
from. What the pipeline itself builds, reuses, promotes and marks stale is in ``tests/test_end_to_end_rebuilds.py``,
which builds its own system on another worker.
"""

import dataclasses
import json
import time

import pytest
from mlflow.tracking import MlflowClient

from grasp_core.artifacts import Artifacts
from grasp_core.io import is_complete
from tests.e2e_system import DATASET, trained_system

# the module's first test also pays for the build (a whole pipeline, a few minutes alone on 2 cores; the two modules
# build side by side): more than the suite's 900 s per test where the machine is shared
pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """This module's own build of the tiny system (:mod:`tests.e2e_system`)."""
    yield from trained_system(tmp_path_factory)


def test_retrieve_answers_every_test_query_as_the_evaluation_ranked_it(trained):
    from grasp_core.components import Components
    from grasp_core.profiles import get_profile
    from tests.answer_parity import assert_retrieve_answers_as_evaluated

    tmp, _ = trained
    components = Components(Artifacts.for_dataset(DATASET, tmp / "artifacts"), get_profile("smoke"))
    assert components.final_planner()[0].startswith("round ")  # the RL planner, as Dagster materialized the evaluation
    assert assert_retrieve_answers_as_evaluated(components) == {"test": len(components.split("test"))}


def test_a_bare_entity_name_returns_that_entity_first(trained):
    """A name typed alone asks for that node: the trained system answers it first (ten names of five types, names
    no other node shares; the smoke profile's reranker trains on a few dozen look-ups, and one of the ten, a
    pathway whose name holds another node's name, is answered second: at least nine of ten)."""
    from grasp_core.retriever import GraspRetriever

    tmp, _ = trained
    retriever = GraspRetriever.from_artifacts(DATASET, tmp / "artifacts", profile="smoke")
    nodes = retriever.components.skb.nodes
    unique = nodes[~nodes["name"].str.lower().duplicated(keep=False) & (nodes["name"].str.split().str.len() <= 4)]
    picked = unique.groupby("type").head(2).head(10)
    results = retriever.retrieve(picked["name"].tolist(), k=5)
    firsts = [r.answers[0].node_id if r.answers else None for r in results]
    right = sum(f == n for f, n in zip(firsts, picked["node_id"]))
    assert len(firsts) == 10 and right >= 9
    text_alone = GraspRetriever.from_artifacts(
        DATASET, tmp / "artifacts", profile="smoke", branches="text", rerank=False
    )
    assert right >= sum(
        r.answers[0].node_id == n for r, n in zip(text_alone.retrieve(picked["name"].tolist(), k=5), picked["node_id"])
    )


def test_retriever_explains_and_batch_retrieval_returns_known_keys(trained, capsys):
    tmp, _ = trained
    from grasp_assets.cli import main

    root = str(tmp / "artifacts")
    art = Artifacts.for_dataset(DATASET, root)
    import pandas as pd

    nodes = pd.read_parquet(art.path("skb") / "nodes.parquet")
    queries = pd.read_parquet(art.path("queries") / "queries.parquet").head(3)
    assert main(["--profile", "smoke", "--root", root, "query", DATASET, queries["query"][0]]) == 0
    out = capsys.readouterr().out
    assert "Plan (" in out and "found by" in out and "Answers:" in out
    assert "reranker score" in out and "reranker: " in out  # the ltr reranker's three largest contributions

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

    from grasp_assets.cli import main
    from grasp_core.releases import served_record

    tmp, _ = trained
    root = str(tmp / "artifacts")
    queries = pd.read_parquet(Artifacts.for_dataset(DATASET, root).path("queries") / "queries.parquet").head(2)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "grasp_assets.cli", "--profile", "smoke", "--root", root, "serve", DATASET]
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
        assert health["release"] == served_record(DATASET, tmp / "artifacts")["release"]  # the served release answers

        # a batch with bad records: the good ones are answered exactly as one CLI batch of them
        good = [{"qid": int(q), "query": t} for q, t in zip(queries["qid"], queries["query"])]
        body = [good[0], {"qid": "e", "query": "   "}, "not a record", {"query": good[1]["query"]}]
        response = httpx.post(f"{url}/retrieve", json=body, timeout=120)
        assert response.status_code == 200
        out = response.json()
        assert [r["qid"] for r in out] == [good[0]["qid"], "e", 3, 4]
        assert out[1] == {"qid": "e", "error": "record 2: the query is empty"} and "query" in out[2]["error"]
        src = tmp_path / "in.jsonl"
        src.write_text(json.dumps(good[0]) + "\n" + json.dumps({"qid": 4, "query": good[1]["query"]}) + "\n")
        cli = ["--profile", "smoke", "--root", root, "retrieve", DATASET, "--batch-size", "2"]
        assert main([*cli, "--queries", str(src), "--out", str(tmp_path / "out.jsonl")]) == 0
        served = [{f: v for f, v in r.items() if f != "request_id"} for r in (out[0], out[3])]  # + an id to rate
        assert served == [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
        assert len(out[0]["ranking"]) == 100 and len({out[0]["request_id"], out[3]["request_id"]}) == 2

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


def test_query_with_server_prints_what_the_local_query_prints(trained, capsys):
    """`grasp query --server URL` asks a running `grasp serve` and prints what `grasp query` prints (but the stage
    times); a server of other settings, or an address where nothing answers, is refused in one line."""
    import signal
    import subprocess
    import sys

    from grasp_assets.cli import main

    def but_times(text: str) -> list[str]:
        return [line for line in text.splitlines() if not line.startswith("Time: ")]

    tmp, _ = trained
    root, question = str(tmp / "artifacts"), "Which drugs treat gout?"
    capsys.readouterr()
    assert main(["--profile", "smoke", "--root", root, "query", DATASET, question, "-k", "5"]) == 0
    local = capsys.readouterr().out
    client = [sys.executable, "-m", "grasp_assets.cli", "--profile", "smoke", "query", DATASET, question, "-k", "5"]
    server, url = _start_serve(root)
    try:
        remote = subprocess.run([*client, "--server", url], capture_output=True, text=True, timeout=120)
        assert remote.returncode == 0, remote.stderr
        assert "Answers:" in local and but_times(remote.stdout) == but_times(local)
        other = subprocess.run([*client, "--no-rerank", "--server", url], capture_output=True, text=True, timeout=60)
        assert other.returncode == 2 and "answers with rerank True (asked: False)" in other.stderr
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=60) == 0
    gone = subprocess.run([*client, "--server", url], capture_output=True, text=True, timeout=60)
    assert gone.returncode == 2 and gone.stderr.startswith(f"error: no grasp serve answers at {url} (")
    assert gone.stderr.count("\n") == 1


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


def _start_serve(root: str, *flags: str):
    """A `grasp serve` process of the trained dataset, once its /health answers, and its URL."""
    import os
    import subprocess
    import sys

    import httpx

    port = _free_port()
    cmd = [sys.executable, "-m", "grasp_assets.cli", "--profile", "smoke", "--root", root, "serve", DATASET, *flags]
    server = subprocess.Popen([*cmd, "--port", str(port)], env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    deadline = time.monotonic() + 180
    while True:
        assert server.poll() is None, "grasp serve exited"
        try:
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).raise_for_status()
            return server, f"http://127.0.0.1:{port}"
        except httpx.TransportError:
            assert time.monotonic() < deadline, "grasp serve did not come up"
            time.sleep(0.5)


def _remove_store(path) -> None:
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        file.unlink(missing_ok=True)


def test_serve_takes_feedback_on_its_answers_and_refuses_bad_feedback_in_one_line(trained, capsys):
    import signal

    import httpx

    from grasp_core.cli import main
    from grasp_core.feedback import store_path

    tmp, _ = trained
    root = str(tmp / "artifacts")
    _remove_store(store_path(DATASET))
    server, url = _start_serve(root)
    try:
        answer = httpx.post(f"{url}/query", json={"query": "Which drugs treat gout?", "k": 5}, timeout=120).json()
        keys = [a["key"] for a in answer["answers"]]
        request_id = answer["request_id"]
        (record,) = httpx.post(f"{url}/retrieve", json=[{"qid": 7, "query": "gout"}], timeout=120).json()
        assert record["qid"] == 7 and len(record["request_id"]) == 32 and len(record["ranking"]) == 100

        one = {"request_id": request_id, "answer_key": keys[1], "relevant": True}
        response = httpx.post(f"{url}/feedback", json=one, timeout=30)
        assert response.status_code == 200 and response.json() == {"accepted": 1, "ids": [1]}
        batch = [
            {"request_id": record["request_id"], "answer_key": record["ranking"][0]["key"], "relevant": False},
            {"query": "gout remedies", "answer_key": keys[0], "relevant": True},
        ]
        assert httpx.post(f"{url}/feedback", json=batch, timeout=30).json() == {"accepted": 2, "ids": [2, 3]}

        refused = [
            (b"{broken", 400, "the body is not JSON"),
            (b'"relevant"', 400, "the body must be a JSON object or an array of them"),
            (b"[]", 400, "the array holds no feedback record"),
            (json.dumps({**one, "answer": "x"}).encode(), 400, "unknown field 'answer'"),
            (json.dumps({**one, "relevant": "yes"}).encode(), 400, '"relevant" must be true or false'),
            (json.dumps({"answer_key": keys[0], "relevant": True}).encode(), 400, 'needs "request_id"'),
            (json.dumps({**one, "request_id": "0" * 32}).encode(), 404, f"request_id '{'0' * 32}' is unknown"),
            (json.dumps([one, {**one, "answer_key": "no-such-key"}]).encode(), 422, "record 2: answer_key"),
            (json.dumps([one] * 101).encode(), 413, "send at most 100 per request"),
        ]
        for content, status, message in refused:
            response = httpx.post(f"{url}/feedback", content=content, timeout=30)
            error = response.json()["error"]
            assert response.status_code == status and message in error and "\n" not in error, (content, error)
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=60) == 0

    capsys.readouterr()
    assert main(["feedback", "list", DATASET, "--json", "--limit", "0"]) == 0  # nothing refused was written
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["question"], r["answer_key"], r["relevant"], r["rank"], r["source"]) for r in rows] == [
        ("Which drugs treat gout?", keys[1], True, 2, "http"),
        ("gout", record["ranking"][0]["key"], False, 1, "http"),
        ("gout remedies", keys[0], True, None, "http"),
    ]


def test_feedback_acknowledged_by_serve_survives_a_kill_mid_stream(trained):
    """SIGKILL `grasp serve` (question logging off) while four clients stream feedback: every record it
    acknowledged is in the store afterwards, and the store is consistent."""
    import signal
    import sqlite3
    import threading

    import httpx

    from grasp_core.feedback import store_path

    tmp, _ = trained
    _remove_store(store_path(DATASET))
    server, url = _start_serve(str(tmp / "artifacts"), "--no-log-questions")
    try:
        assert httpx.get(f"{url}/health").json()["log_questions"] is False
        answer = httpx.post(f"{url}/query", json={"query": "Which drugs treat gout?", "k": 3}, timeout=120).json()
        key = answer["answers"][0]["key"]
        first = {"request_id": answer["request_id"], "answer_key": key, "relevant": True}
        assert httpx.post(f"{url}/feedback", json=first, timeout=30).json()["accepted"] == 1

        acked: dict[int, str] = {}  # feedback id -> the question it was sent with
        lock, stop = threading.Lock(), threading.Event()

        def client(n: int) -> None:
            with httpx.Client(timeout=10) as http:
                for i in range(100_000):
                    if stop.is_set():
                        return
                    question = f"stream {n} question {i}"
                    body = [{"query": question, "answer_key": key, "relevant": i % 3 > 0}]
                    try:
                        response = http.post(f"{url}/feedback", json=body)
                    except httpx.TransportError:  # the server was killed
                        return
                    assert response.status_code == 200, response.text
                    with lock:
                        acked[response.json()["ids"][0]] = question

        clients = [threading.Thread(target=client, args=(n,)) for n in range(4)]
        for c in clients:
            c.start()
        deadline = time.monotonic() + 120
        while len(acked) < 200:
            assert time.monotonic() < deadline and all(c.is_alive() for c in clients), len(acked)
            time.sleep(0.01)
        server.send_signal(signal.SIGKILL)  # mid-stream: requests are in flight
        server.wait(timeout=30)
        stop.set()
        for c in clients:
            c.join(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()

    with sqlite3.connect(store_path(DATASET)) as db:  # what the next process to open the store finds
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        stored = dict(db.execute("SELECT id, query FROM feedback WHERE query IS NOT NULL").fetchall())
        logged = db.execute("SELECT query, answers FROM requests").fetchall()
    assert len(acked) >= 200 and {i: stored.get(i) for i in acked} == acked
    assert logged == [(None, json.dumps([a["key"] for a in answer["answers"]]))]  # no question text kept


def _a_question_with_a_graph_answer(retriever, tmp) -> str:
    """A test question of the trained system whose top 5 hold a graph answer, one the plan's paths reach if there
    is one (the integrations carry the paths in each answer's metadata)."""
    import pandas as pd

    queries = pd.read_parquet(Artifacts.for_dataset(DATASET, tmp / "artifacts").path("queries") / "queries.parquet")
    questions = queries.loc[queries["split"] == "test", "query"].head(8).tolist()
    results = retriever.retrieve(questions, k=5, explain=True)
    with_paths = [r.query for r in results if any(a.paths for a in r.answers)]
    with_graph = [r.query for r in results if any(a.graph_rank is not None for a in r.answers)]
    return (with_paths + with_graph + questions)[0]


def test_langchain_retriever_invokes_to_grasp_answers_as_documents(trained):
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from grasp_core.errors import GraspError
    from grasp_core.integrations.common import answer_metadata
    from grasp_core.integrations.langchain import GraspLangChainRetriever
    from grasp_core.retriever import GraspRetriever

    tmp, _ = trained
    grasp = GraspRetriever.from_artifacts(DATASET, tmp / "artifacts", "smoke")
    question = _a_question_with_a_graph_answer(grasp, tmp)
    expected = grasp.retrieve([question], k=5, explain=True)[0].answers
    retriever = GraspLangChainRetriever(retriever=grasp, k=5)
    assert isinstance(retriever, BaseRetriever)
    docs = retriever.invoke(question)
    assert all(isinstance(d, Document) for d in docs) and len(docs) == 5
    assert [d.id for d in docs] == [d.metadata["key"] for d in docs] == [a.key for a in expected]
    assert [d.metadata for d in docs] == [answer_metadata(grasp, a, r) for r, a in enumerate(expected, 1)]
    assert json.loads(json.dumps([d.metadata for d in docs])) == [d.metadata for d in docs]  # JSON-safe
    assert {"key", "type", "name", "score", "found_by", "text_rank", "graph_rank", "paths"} <= set(docs[0].metadata)
    assert any(d.metadata["paths"] for d in docs) == any(a.paths for a in expected)
    assert all(d.page_content.startswith(f"{a.type}: {a.name}") for d, a in zip(docs, expected))
    two = retriever.batch([question, "which genes?"])  # LangChain's batch, on its thread pool
    assert [d.metadata["key"] for d in two[0]] == [a.key for a in expected] and len(two[1]) == 5
    with pytest.raises(GraspError, match="the query is empty"):
        retriever.invoke("   ")


def test_llamaindex_retriever_retrieves_grasp_answers_as_nodes(trained):
    import asyncio

    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

    from grasp_core.integrations.llamaindex import GraspLlamaIndexRetriever

    tmp, _ = trained
    retriever = GraspLlamaIndexRetriever.from_artifacts(DATASET, tmp / "artifacts", "smoke", k=5)
    assert isinstance(retriever, BaseRetriever)
    question = _a_question_with_a_graph_answer(retriever.retriever, tmp)
    expected = retriever.retriever.retrieve([question], k=5, explain=True)[0].answers
    nodes = retriever.retrieve(question)
    assert all(isinstance(n, NodeWithScore) for n in nodes) and len(nodes) == 5
    assert [n.node.node_id for n in nodes] == [n.node.metadata["key"] for n in nodes] == [a.key for a in expected]
    assert [n.score for n in nodes] == [float(a.score) for a in expected]
    assert [n.node.metadata["found_by"] for n in nodes] == [a.found_by for a in expected]
    assert [n.node.metadata["paths"] for n in nodes] == [a.paths for a in expected]
    top = nodes[0].node
    assert top.get_content() == retriever.retriever.components.skb.document(expected[0].node_id)
    llm_view = top.get_content(metadata_mode=MetadataMode.LLM)
    assert f"key: {expected[0].key}" in llm_view and "reranker_contributions" not in llm_view
    assert top.get_content(metadata_mode=MetadataMode.EMBED) == top.get_content()
    assert [n.node.node_id for n in retriever.retrieve(QueryBundle(question))] == [a.key for a in expected]
    assert [n.node.node_id for n in asyncio.run(retriever.aretrieve(question))] == [a.key for a in expected]


def test_mcp_server_over_stdio_searches_and_explains_as_the_retriever(trained):
    """`grasp mcp DATASET` as an MCP client starts it: a subprocess speaking the protocol on its stdin/stdout."""
    import os
    import sys

    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from grasp_core.integrations.common import answer_metadata
    from grasp_core.retriever import GraspRetriever

    tmp, _ = trained
    root = str(tmp / "artifacts")
    grasp = GraspRetriever.from_artifacts(DATASET, root, "smoke")
    question = _a_question_with_a_graph_answer(grasp, tmp)
    expected = grasp.retrieve([question], k=100, explain=True)[0]
    graph_answer = next((a for a in expected.answers[:5] if a.graph_rank is not None), expected.answers[0])
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "grasp_assets.cli", "--profile", "smoke", "--root", root, "mcp", DATASET],
        env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},
    )

    async def session() -> dict:
        out = {}
        with anyio.fail_after(300):
            async with stdio_client(server) as (read, write), ClientSession(read, write) as client:
                out["init"] = await client.initialize()
                out["tools"] = (await client.list_tools()).tools
                out["search"] = await client.call_tool("search", {"query": question, "k": 5})
                out["explain"] = await client.call_tool("explain", {"query": question, "key": graph_answer.key})
                out["empty"] = await client.call_tool("search", {"query": "  "})
                out["bad k"] = await client.call_tool("search", {"query": question, "k": 0})
                out["no key"] = await client.call_tool("explain", {"query": question, "key": "no-such-key"})
        return out

    out = anyio.run(session)
    assert out["init"].server_info.name == f"grasp-{DATASET}"
    assert {t.name for t in out["tools"]} == {"search", "explain"}
    search = out["search"]
    assert not search.is_error and json.loads(search.content[0].text) == search.structured_content
    answers = search.structured_content["answers"]
    assert [a["key"] for a in answers] == [a.key for a in expected.answers[:5]]
    assert [a["score"] for a in answers] == pytest.approx([a.score for a in expected.answers[:5]], rel=1e-4)
    assert all(a["text"].startswith(f"{a['type']}: {a['name']}") and len(a["text"]) <= 300 for a in answers)
    explained = out["explain"]
    assert not explained.is_error
    body = explained.structured_content
    rank = expected.answers.index(graph_answer) + 1
    want = answer_metadata(grasp, graph_answer, rank)
    assert body["rank"] == rank and body["answer"] == {**want, "score": pytest.approx(want["score"], rel=1e-4)}
    assert body["plan"] == expected.plan and body["cypher"] == expected.cypher and body["entity_table"] is not None
    assert body["ms"]["planning"] > 0
    for name, message in (("empty", "the query is empty"), ("bad k", "k"), ("no key", "has no node with key")):
        assert out[name].is_error and message in out[name].content[0].text, name


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


def test_a_question_runs_the_encoder_once_per_text_across_the_stages(trained, monkeypatch):
    """The text branch, the planner and the reranker read the question, the executor the extractor's mentions: each
    token sequence runs through the model once per answer, and the answers are those of a question answered alone."""
    from grasp_core.embed.encoder import Encoder
    from grasp_core.retriever import GraspRetriever

    tmp, _ = trained
    retriever = GraspRetriever.from_artifacts(DATASET, tmp / "artifacts", "smoke")
    retriever.retrieve(["which drugs treat glaucoma?"])  # loads the parts; the executor's own memo stays cold
    question = "which genes are linked to night blindness?"
    ran: list[list[str]] = []
    encode = Encoder._encode
    monkeypatch.setattr(Encoder, "_encode", lambda self, texts, *a: ran.append(list(texts)) or encode(self, texts, *a))
    result = retriever.retrieve([question])[0]
    assert result.answers and result.entity_table is not None and result.entity_table.rows
    anchors = [row.mention for row in result.entity_table.rows if row.links]
    ids = lambda text: retriever.components.encoder.token_ids([text], 512)[0]  # noqa: E731  what _encode is given
    assert sum(ids(question) in seqs for seqs in ran) == 1, ran  # it was 3: mFAR, the planner and the reranker
    assert anchors and all(sum(ids(a) in seqs for seqs in ran) == 1 for a in anchors), ran  # 2: extractor, executor
    monkeypatch.undo()
    alone = GraspRetriever.from_artifacts(DATASET, tmp / "artifacts", "smoke").retrieve([question])[0]
    assert [x.to_json() for x in alone.answers] == [x.to_json() for x in result.answers]


def test_the_answer_path_runs_one_blas_thread_and_a_question_alone_answers_as_in_a_batch(trained, monkeypatch):
    import pandas as pd
    from threadpoolctl import threadpool_info

    from grasp_core.retriever import GraspRetriever

    def blas_threads() -> set[int]:
        return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}

    tmp, _ = trained
    retriever = GraspRetriever.from_artifacts(DATASET, tmp / "artifacts", "smoke")
    queries = pd.read_parquet(Artifacts.for_dataset(DATASET, tmp / "artifacts").path("queries") / "queries.parquet")
    questions = queries[queries["split"] == "test"]["query"].head(6).tolist()
    seen: list[set[int]] = []
    rank_text = retriever.path.rank_text
    monkeypatch.setattr(retriever.path, "rank_text", lambda q, c: seen.append(blas_threads()) or rank_text(q, c))
    default = blas_threads()
    batch = retriever.retrieve(questions)
    alone = [retriever.retrieve([q])[0] for q in questions]
    assert seen == [{1}] * (1 + len(questions)) and blas_threads() == default
    assert [[a.to_json() for a in r.answers] for r in alone] == [[a.to_json() for a in r.answers] for r in batch]


VIGNETTE = (
    "A 34-year-old woman presents with a three-year history of progressive gait ataxia, dysarthria and "
    "intermittent diplopia. Her mother and maternal uncle had similar symptoms beginning in their forties. "
    "Examination shows nystagmus, limb dysmetria, brisk reflexes with extensor plantar responses, reduced "
    "vibration sense at the ankles and mild cognitive slowing. MRI shows cerebellar and brainstem atrophy. "
    "Nerve conduction studies reveal an axonal sensory neuropathy. Which genes, proteins, diseases or drugs "
    "are most relevant to this presentation, and what would you test next to confirm the diagnosis?"
)


def _retrieve(root: str, src, out, *extra) -> int:
    from grasp_assets.cli import main

    argv = ["--profile", "smoke", "--root", root, "retrieve", DATASET, "--queries", str(src), "--out", str(out)]
    return main([*argv, *extra])


def test_a_long_vignette_is_truncated_per_model_and_answered_with_its_batch(trained, capsys):
    tmp, _ = trained
    root = str(tmp / "artifacts")
    import pandas as pd

    queries = pd.read_parquet(Artifacts.for_dataset(DATASET, root).path("queries") / "queries.parquet")
    src, out = tmp / "vignette.jsonl", tmp / "vignette_out.jsonl"
    long_case = VIGNETTE + " " + VIGNETTE.replace("34-year-old woman", "her 12-year-old son")  # 1,203 characters
    lines = [
        {"qid": 1, "query": queries["query"][0]},
        {"qid": 2, "query": VIGNETTE},
        {"qid": 3, "query": long_case},
        {"qid": 4, "query": queries["query"][1]},
    ]
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert len(VIGNETTE) >= 600 and _retrieve(root, src, out, "--batch-size", "4") == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["qid"] for r in rows] == [1, 2, 3, 4] and all(r.get("ranking") for r in rows)
    assert "truncated" not in rows[0] and "truncated" not in rows[3]
    # the smoke planner is the policy: its encoder reads 64 tokens, 62 of them the query ([CLS] and [SEP])
    assert rows[1]["truncated"]["planner"].startswith("read 62 of ")
    assert rows[2]["truncated"]["planner"].startswith("read 62 of ")

    from grasp_assets.cli import main

    assert main(["--profile", "smoke", "--root", root, "query", DATASET, long_case]) == 0
    assert "Truncated to fit the models' windows: planner read " in capsys.readouterr().out


def test_a_batch_with_broken_text_answers_its_good_lines(trained, capsys):
    tmp, _ = trained
    root = str(tmp / "artifacts")
    src, out = tmp / "surrogate.jsonl", tmp / "surrogate_out.jsonl"
    src.write_bytes(
        b'{"qid": 1, "query": "which genes interact with a protein linked to ataxia?"}\n'
        b'{"qid": 2, "query": "\\ud800 seizures"}\n'
        b'{"qid": 3, "query": "seiz\xff\xfeures"}\n'
        b'{"qid": 4, "query": "drugs that target a gene expressed in the retina"}\n'
    )
    assert _retrieve(root, src, out) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["qid"] for r in rows] == [1, 4] and all(r["ranking"] for r in rows)
    err = capsys.readouterr().err
    assert "surrogate.jsonl:2: lone surrogate \\ud800" in err and "surrogate.jsonl:3: byte 0xff" in err


def test_a_query_that_fails_costs_only_its_own_record(trained, monkeypatch):
    """A failure inside one query's retrieval (here: its text branch) becomes that query's error record."""
    tmp, _ = trained
    root = str(tmp / "artifacts")
    from grasp_core.text.mfar import MFARRetriever

    rank = MFARRetriever.rank

    def fragile(self, queries, k=100):
        if any("ataxia" in q for q in queries):
            raise RuntimeError("text index unreadable (password=hunter2)")
        return rank(self, queries, k)

    monkeypatch.setattr(MFARRetriever, "rank", fragile)
    src, out = tmp / "fragile.jsonl", tmp / "fragile_out.jsonl"
    questions = [
        {"qid": "a", "query": "retina genes"},
        {"qid": "b", "query": "ataxia genes"},
        {"qid": "c", "query": "liver"},
    ]
    src.write_text("".join(json.dumps(x) + "\n" for x in questions))
    assert _retrieve(root, src, out) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["qid"] for r in rows] == ["a", "b", "c"] and rows[0]["ranking"] and rows[2]["ranking"]
    assert rows[1] == {"qid": "b", "error": "RuntimeError: text index unreadable (password=***)"}


def test_llm_extractor_end_to_end_against_a_local_endpoint(trained, capsys, monkeypatch):
    """`extractor=llm` (profile or `--extractor`) asks the endpoint; mentions it returns are linked and planned on."""
    tmp, _ = trained
    import pandas as pd

    from grasp_assets.cli import main
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
        return mentions_to_json(gazetteer.components.gazetteer.find_mentions([query])[0])

    with OpenAIServer(answer) as server:
        monkeypatch.setenv("GRASP_EXTRACTOR_URL", server.url)
        llm = GraspRetriever.from_artifacts(DATASET, root, "smoke", extractor="llm", rerank=False)
        got, want = llm.retrieve(queries, k=5), gazetteer.retrieve(queries, k=5)
        assert len(server.requests) == 3 and server.requests[0]["model"] == "Qwen3-1.7B"
        demos = len(llm.components.extractor.demonstrations)
        assert demos > 0 and server.requests[0]["messages"][0]["content"].count("\nMentions: ") == demos
        assert [r.entity_table.to_json() for r in got] == [r.entity_table.to_json() for r in want]
        assert [[a.node_id for a in r.answers] for r in got] == [[a.node_id for a in r.answers] for r in want]
        assert [e.source for e in llm.components.extractor.extract_detailed(queries)] == ["llm", "llm", "gazetteer"]

        capsys.readouterr()
        assert main(["--profile", "smoke", "--root", root, "query", DATASET, queries[0], "--extractor", "llm"]) == 0
        assert "Entity table:" in capsys.readouterr().out and len(server.requests) == 7


def test_every_artifact_verifies_and_a_corrupted_one_fails_grasp_query_in_one_line(trained, tmp_path, capsys):
    """Nothing a step wrote changed after its manifest sealed it; a flipped byte in a faiss index and a reranker
    model cut in half (on a copy) each stop a cold `grasp query` with one line naming the artifact."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from grasp_core.cli import main
    from grasp_core.releases import served_artifacts

    tmp, _ = trained
    assert main(["--profile", "smoke", "--root", str(tmp / "artifacts"), "verify", DATASET]) == 0
    assert "CORRUPT" not in capsys.readouterr().out
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]), "HF_HUB_OFFLINE": "1"}
    for name, pattern, how in (("vector_indexes", "*.faiss", "flip"), ("reranker", "ranker.txt", "cut")):
        shutil.rmtree(tmp_path / "copy", ignore_errors=True)
        shutil.copytree(tmp / "artifacts", tmp_path / "copy")
        served = served_artifacts(DATASET, tmp_path / "copy")  # what `grasp query` answers with: the release
        file = sorted(served.path(name).glob(pattern))[0]
        data = bytearray(file.read_bytes())
        data = data[: len(data) // 2] if how == "cut" else data[:-8] + bytes(b ^ 0xFF for b in data[-8:])
        file.write_bytes(bytes(data))
        cmd = [sys.executable, "-m", "grasp_core.cli", "--profile", "smoke", "--root", str(tmp_path / "copy")]
        proc = subprocess.run([*cmd, "query", DATASET, "which genes?"], capture_output=True, text=True, env=env)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr + proc.stdout
        lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and f"artifact {name} of dataset {DATASET!r} is corrupt" in lines[0]
        assert file.name in lines[0] and lines[0].endswith(f"grasp pipeline {DATASET}")


def test_the_grasp_executable_prints_the_whole_answer_and_ends_at_once(trained):
    """``grasp query`` ends its process as soon as it has answered (no interpreter teardown): all of the answer is
    written first, also into a pipe, and the exit status is 0."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    tmp, _ = trained
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "grasp_assets.cli", "--profile", "smoke", "--root", str(tmp / "artifacts")]
    proc = subprocess.run([*cmd, "query", DATASET, "which genes?"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert lines[0] == "Query: which genes?" and "Answers:" in lines and lines[-1].startswith("Time: text ")


def test_an_edited_node_text_rebuilds_what_reads_it_and_the_retriever_answers_from_it(trained, capfd):
    """One node renamed in the user SKB's nodes.parquet: `grasp pipeline` sees the source changed, rebuilds `skb`
    and, wave after wave, what reads it; the retriever then finds the node by its new name. Run again: nothing."""
    import pandas as pd

    from grasp_assets.run import run_pipeline
    from grasp_core.components import Components
    from grasp_core.profiles import get_profile
    from grasp_core.retriever import GraspRetriever

    tmp, _ = trained
    root = str(tmp / "artifacts")
    nodes_file = tmp / "user_skbs" / DATASET / "nodes.parquet"
    nodes = pd.read_parquet(nodes_file)
    node = int(nodes["node_id"].iloc[len(nodes) // 2])
    nodes.loc[nodes["node_id"] == node, "name"] = "Zorblax quintessence"
    nodes.to_parquet(nodes_file, index=False)
    capfd.readouterr()
    timings = run_pipeline(DATASET, profile="smoke", root=root)
    out = capfd.readouterr().out
    assert "source of 'mykb': new fingerprint recorded" in out
    assert "prepare: materializing skb (source changed)" in out
    assert "node_embeddings (skb changed)" in out and "graph_store (skb changed)" in out
    assert set(timings) >= {"prepare", "finish"}
    components = Components(Artifacts.for_dataset(DATASET, root), get_profile("smoke"))
    assert (
        components.graph.nodes.loc[components.graph.nodes["node_id"] == node, "name"].item() == "Zorblax quintessence"
    )
    [ranked] = components.text_retriever("bm25").rank(["Zorblax quintessence"], k=1)
    assert ranked.node_ids.tolist() == [node]
    answers = GraspRetriever.from_artifacts(DATASET, root, "smoke", rerank=False).retrieve(["Zorblax quintessence"])
    assert node in [a.node_id for a in answers[0].answers[:10]]

    assert run_pipeline(DATASET, profile="smoke", root=root) == {}
    out = capfd.readouterr().out
    assert "new fingerprint" not in out and "prepare: up to date" in out and "finish: up to date" in out


def test_the_trained_system_on_a_bolt_server_store(trained, bolt_env, tmp_path, capsys):
    """The same trained artifacts on the server graph store: ``graph_store`` and ``eval_metrics`` rematerialized
    through Dagster with ``--graph-store neo4j --traversal store`` (the load and every test plan as Cypher over Bolt),
    then ``grasp query`` and ``grasp serve`` on it. The graph rankings equal the embedded run's exactly, and the
    server's password reaches no MLflow run, Dagster event, artifact or output."""
    import os
    import shutil
    import signal
    import subprocess
    import sys
    import time

    import dagster as dg
    import httpx
    import numpy as np
    import pandas as pd

    from grasp_assets.cli import main
    from grasp_assets.definitions import build_definitions
    from grasp_assets.resources import MLflowTracking, SettingsResource
    from grasp_core.text.rankings_io import read_rankings

    tmp, _ = trained
    root = tmp_path / "artifacts"
    shutil.copytree(tmp / "artifacts", root, symlinks=True)
    for name in ("graph_store", "eval_metrics"):
        shutil.rmtree(root / DATASET / name)
    settings = SettingsResource(profile="smoke", artifacts_root=str(root), graph_store="neo4j", traversal="store")
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("dataset", [DATASET])
    mlflow_db = tmp_path / "mlflow.db"

    def materialize(asset: str):
        return dg.materialize(
            list(build_definitions(settings.get_profile()).assets),
            selection=dg.AssetSelection.assets(asset),
            partition_key=DATASET,
            instance=instance,
            resources={"settings": settings, "mlflow": MLflowTracking(tracking_uri=f"sqlite:///{mlflow_db}")},
        )

    result = materialize("graph_store")
    assert result.success
    assert materialize("eval_metrics").success  # a run of its own after the load (docs/bolt.md, "Known gaps")
    assert {e.check_name: e.passed for e in result.get_asset_check_evaluations()} == {"counts_match_skb": True}
    meta = result.asset_materializations_for_node("graph_store")[0].metadata
    assert meta["backend"].value == "neo4j" and meta["edges_per_second"].value > 0
    server = json.loads((root / DATASET / "graph_store" / "server.json").read_text())
    assert server["backend"] == "neo4j" and server["uri"] == bolt_env.uri

    embedded, bolt = (Artifacts.for_dataset(DATASET, r).path("eval_metrics") for r in (tmp / "artifacts", root))
    plans = [pd.read_parquet(d / "plans_test.parquet") for d in (embedded, bolt)]
    assert plans[0]["plan"].tolist() == plans[1]["plan"].tolist()  # the same served planner, the same plans
    want, got = (read_rankings(d / "graph_test.parquet") for d in (embedded, bolt))
    assert want.keys() == got.keys() and sum(len(r) > 0 for r in want.values()) > 0
    errors = dict(zip(plans[1]["qid"], plans[1]["error"]))
    for q in want:
        assert want[q].node_ids.tolist() == got[q].node_ids.tolist(), (q, errors[q])
        assert np.allclose(want[q].scores, got[q].scores, rtol=0, atol=1e-6), q

    # the smoke planner serves zero-hop plans on this KB (no store query): the teacher's anchored plans, compiled
    # to Cypher and run over Bolt, rank exactly as on the embedded store
    from grasp_core.components import Components
    from grasp_core.profiles import get_profile, with_graph_store

    teacher = pd.read_parquet(root / DATASET / "teacher_plans" / "plans.parquet")
    teacher = teacher[[bool(json.loads(p)["anchors"]) for p in teacher["plan"]]]
    assert len(teacher) >= 10
    queries = pd.read_parquet(root / DATASET / "queries" / "queries.parquet").set_index("qid")["query"]
    on = {
        name: Components(Artifacts.for_dataset(DATASET, r), profile)
        for name, r, profile in (
            ("embedded", tmp / "artifacts", get_profile("smoke")),
            ("bolt", root, with_graph_store(get_profile("smoke"), "neo4j", "store")),
        )
    }
    ran = {}
    for name, components in on.items():
        tables = components.entity_tables
        ran[name] = components.executor.execute_batch(
            teacher["plan"].tolist(), queries[teacher["qid"]].tolist(), [tables[int(q)] for q in teacher["qid"]]
        )
    assert sum(bool(trace.cypher) and len(r) > 0 for r, trace in ran["bolt"]) >= 10
    for (want_r, _), (got_r, trace) in zip(ran["embedded"], ran["bolt"]):
        assert want_r.node_ids.tolist() == got_r.node_ids.tolist(), trace.cypher
    [query_qid] = teacher["qid"].head(1).tolist()
    query = queries[query_qid]
    flags = ["--graph-store", "neo4j", "--traversal", "store"]
    assert main(["--profile", "smoke", "--root", str(root), "query", DATASET, query, *flags]) == 0
    out = capsys.readouterr()
    assert "Answers:" in out.out and "Plan (valid)" in out.out

    port = _free_port()
    cmd = [sys.executable, "-m", "grasp_assets.cli", "--profile", "smoke", "--root", str(root), "serve", DATASET]
    log = tmp_path / "serve.log"
    with open(log, "wb") as handle:
        serve = subprocess.Popen(
            [*cmd, *flags, "--port", str(port)],
            env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 180
        while True:
            assert serve.poll() is None, f"grasp serve exited: {log.read_text()[-2000:]}"
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "grasp serve did not come up"
                time.sleep(0.5)
        answer = httpx.post(f"http://127.0.0.1:{port}/query", json={"query": query, "k": 3}, timeout=120).json()
        assert len(answer["answers"]) == 3
        cli = main(["--profile", "smoke", "--root", str(root), "query", DATASET, query, *flags, "-k", "3"])
        assert cli == 0 and [a["name"] for a in answer["answers"]][0] in capsys.readouterr().out
    finally:
        serve.send_signal(signal.SIGINT)
        assert serve.wait(timeout=60) == 0

    secret = bolt_env.password.encode()
    events = "\n".join(str(e) for e in instance.all_logs(result.run_id)).encode()
    assert secret not in events and secret not in log.read_bytes() and secret not in mlflow_db.read_bytes()
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and secret in p.read_bytes()]


@pytest.fixture(scope="module")
def in_containers(trained, tmp_path_factory):
    """The same DAG launched through a Dagster instance whose runs start in containers of the grasp image
    (deploy/host/dagster.yaml, tests/containers.py): `prepare` is submitted over GraphQL as the UI submits it and
    the sensors launch the rest wave by wave (`chain_training_stages` after a run succeeds; after a round whose
    validation gate failed, `continue_after_a_failed_gate` launches `finish`). Waits until every run has ended and
    the chain has nothing left to launch (`next_work` is None); a run that failed other than at the gate fails."""
    import shutil

    import dagster as dg
    from dagster._core.storage.dagster_run import NOT_FINISHED_STATUSES, DagsterRunStatus

    from grasp_assets.automation import stopped_by_gate
    from grasp_assets.definitions import build_definitions
    from grasp_assets.freshness import next_work, observe_source
    from grasp_core.datasets import BUILTIN
    from grasp_core.errors import GraspError
    from grasp_core.profiles import get_profile
    from tests.containers import Deployment, docker_client_or_skip, write_instance

    docker = docker_client_or_skip()
    home = tmp_path_factory.mktemp("containers") / "dagster_home"
    write_instance(home)
    tmp, _ = trained  # the user SKB where the deployment looks for it, $DAGSTER_HOME/user_skbs
    shutil.copytree(tmp / "user_skbs" / DATASET, home / "user_skbs" / DATASET)
    # every dataset registered and its source observed, as the local run observed its own, so `dataset_registry`
    # and `source_changes` launch nothing: the runs are the submitted `prepare` and what the chain launches
    cfg = dataclasses.replace(get_profile("smoke").dataset, user_skb_root=str(home / "user_skbs"))
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions("dataset", [*BUILTIN, DATASET])
        for dataset in (*BUILTIN, DATASET):
            try:
                observe_source(instance, dataset, cfg)
            except GraspError:  # a source not on this machine (STaRK): source_changes passes over it too
                pass
    deployment = Deployment(home, "smoke")
    graph = build_definitions(get_profile("smoke")).resolve_asset_graph()
    art = Artifacts.for_dataset(DATASET, home / "artifacts")
    idle_since = [None]
    try:
        deployment.client().submit_job_execution("prepare", tags={"dagster/partition": DATASET})

        def chain_ended():
            runs = deployment.instance.get_runs()
            for r in runs:
                ended_badly = r.status in (DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED)
                assert not ended_badly or stopped_by_gate(deployment.instance, r.run_id), (
                    f"run {r.run_id} ({r.job_name}) failed; see {deployment.log.name}"
                )
            if any(r.status in NOT_FINISHED_STATUSES for r in runs):
                idle_since[0] = None
                return None
            work = next_work(deployment.instance, graph, art)
            if work is None:
                return runs
            idle_since[0] = idle_since[0] or time.monotonic()  # the sensors tick every 30 s
            assert time.monotonic() - idle_since[0] < 300, f"no run launched for {work}; see {deployment.log.name}"
            return None

        start = time.monotonic()
        runs = deployment.wait_for(chain_ended, "the chain's last run", timeout=2400)
        print(f"[containers] the DAG in containers took {time.monotonic() - start:.0f}s in {len(runs)} runs")
        yield home, runs, deployment, docker
    finally:
        deployment.stop(docker)


def _files(directory):
    return {p.relative_to(directory): p for p in sorted(directory.rglob("*")) if p.is_file()}


def _graph_content(store_dir):
    """Every node and edge of an embedded graph store, sorted: two loads of the same SKB hold the same graph, but
    LadybugDB's database file differs in bytes from one load to the next (so does its manifest)."""
    from grasp_core.graph.ladybug_store import LadybugStore

    store = LadybugStore(store_dir)
    try:
        return sorted(store.run("MATCH (n) RETURN label(n), n.id")), sorted(
            store.run("MATCH (a)-[r]->(b) RETURN a.id, label(r), b.id")
        )
    finally:
        store.close()


@pytest.mark.timeout(3600)  # the fixture runs the four stages' containers
def test_the_dag_launched_in_containers_reproduces_the_local_run(trained, in_containers):
    import hashlib
    from pathlib import Path

    import numpy as np
    from dagster._core.storage.dagster_run import DagsterRunStatus

    from grasp_assets.automation import stopped_by_gate
    from grasp_assets.partitions import ROUND
    from grasp_core.planner.rounds import Gate
    from tests.containers import IMAGE

    tmp, _ = trained
    home, runs, deployment, docker = in_containers
    assert {r.job_name for r in runs} == {"prepare", "rl_round", "finish"}
    for run in runs:  # each run's worker ran in its own container of the image
        assert run.tags["dagster/image"] == IMAGE and run.tags["docker/container_id"]
    local, remote = tmp / "artifacts" / DATASET, home / "artifacts" / DATASET
    # the same rounds ran, and their gates decided alike: a round whose gate failed is the one failed run of it
    gates = {
        where: {d.name: Gate.read(d).passed for d in sorted((root / "planner").iterdir()) if is_complete(d)}
        for where, root in (("local", local), ("containers", remote))
    }
    assert gates["local"] == gates["containers"] and gates["local"], gates
    failed = {r.tags[f"dagster/partition/{ROUND}"] for r in runs if r.status != DagsterRunStatus.SUCCESS}
    assert failed == {r for r, passed in gates["local"].items() if not passed}
    assert all(
        r.job_name == "rl_round" and stopped_by_gate(deployment.instance, r.run_id)
        for r in runs
        if r.status != DagsterRunStatus.SUCCESS
    )
    local_files, remote_files = _files(local), _files(remote)
    assert set(local_files) == set(remote_files)
    digest = {
        rel: [hashlib.sha256(p.read_bytes()).hexdigest() for p in (local_files[rel], remote_files[rel])]
        for rel in local_files
    }
    differ = sorted(str(rel) for rel, (a, b) in digest.items() if a != b)
    print("[containers] files that differ:", differ)
    local_ml = MlflowClient(tracking_uri=f"sqlite:///{tmp / 'mlflow.db'}")
    remote_ml = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")

    def mlflow_runs(client):  # the base partition's asset and round runs (not the local builds' parent runs, nor
        exp = client.get_experiment_by_name(f"grasp/{DATASET}")  # the runs of the variant the local tests built)
        return {
            (r.info.run_name, r.data.tags.get("step")): r
            for r in client.search_runs([exp.experiment_id], max_results=1000)
            if r.data.tags.get("grasp.kind") != "pipeline" and "partition" not in r.data.tags
        }

    a, b = mlflow_runs(local_ml), mlflow_runs(remote_ml)
    assert set(a) == set(b)
    for key in a:
        print(
            key,
            {
                k: (v, b[key].data.metrics.get(k))
                for k, v in a[key].data.metrics.items()
                if b[key].data.metrics.get(k) != v
            },
        )
        assert a[key].data.params == b[key].data.params, key
    # the data artifacts hold the same bytes, but for vectors: the container's float16 embeddings differed from the
    # local run's by one rounding step on a few rows (2 of 393 names); the graph store holds the same graph
    for rel in differ:
        artifact = rel.split("/")[0]
        assert artifact not in ("skb", "queries"), f"{rel} differs"
        if artifact in ("node_embeddings", "text_index") and not rel.endswith("_MANIFEST.json"):  # it hashes them
            assert rel.endswith(".npy"), f"{rel} differs"
            here, there = (np.load(files[Path(rel)]) for files in (local_files, remote_files))
            assert here.dtype == there.dtype and here.dtype.kind == "f", rel
            np.testing.assert_allclose(here, there, rtol=0, atol=2e-3, err_msg=rel)
    assert (local / "graph_store" / "meta.json").read_bytes() == (remote / "graph_store" / "meta.json").read_bytes()
    assert _graph_content(local / "graph_store") == _graph_content(remote / "graph_store")


def test_a_killed_run_container_is_a_failed_run_whose_pool_slot_is_freed(in_containers):
    from dagster._core.storage.dagster_run import DagsterRunStatus

    _, _, deployment, docker = in_containers
    instance = deployment.instance
    run_id = deployment.client().submit_job_execution("finish", tags={"dagster/partition": DATASET})
    deployment.wait_for(
        lambda: run_id in instance.event_log_storage.get_concurrency_info("heavy").active_run_ids,
        "the finish run to claim the heavy pool's slot",
        timeout=900,
    )
    docker.containers.get(instance.get_run_by_id(run_id).tags["docker/container_id"]).kill()
    deployment.wait_for(
        lambda: instance.get_run_by_id(run_id).status == DagsterRunStatus.FAILURE, "the run to fail", timeout=180
    )
    deployment.wait_for(
        lambda: not instance.event_log_storage.get_concurrency_info("heavy").claimed_slots,
        "the heavy pool's slot to be freed",
        timeout=180,
    )

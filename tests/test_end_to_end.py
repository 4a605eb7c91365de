"""The whole DAG through Dagster on a tiny user SKB with the `smoke` profile, then the product API and CLI on it,
then what a change of a setting, of the run config or of the SKB's files marks stale and rebuilds.

This is the slowest test (a few minutes on 2 cores): every asset materializes for real (tiny models, a few
training steps), which is the only way to know the stages fit together. Every step runs on components that
refuse a profile section it does not declare (``@step(reads=...)``), so this run also checks the declarations.
The SKB is what a new user brings: CSV
files (here written from the tiny synth-prime graph) imported by `grasp data import`, with no queries, so the
pipeline synthesizes them from the schema (``grasp_core.skb.generic_queries``) and evaluates their test split.
"""

import json
import time

import pytest
from mlflow.tracking import MlflowClient

from grasp_core.artifacts import Artifacts
from grasp_core.io import is_complete

DATASET = "mykb"  # a user SKB, imported from CSV files


def _csv_files(tmp):
    """nodes.csv / edges.csv of the tiny synth-prime graph, as a user's export would have them."""
    from grasp_core.skb.synth import build_synth_skb

    skb = build_synth_skb("prime", "tiny", seed=0)
    skb.nodes.rename(columns={"key": "id"}).drop(columns="node_id").to_csv(tmp / "nodes.csv", index=False)
    keys = skb.nodes["key"].to_numpy()
    edges = skb.edges.assign(src=keys[skb.edges["src"]], dst=keys[skb.edges["dst"]])
    edges[["src", "rel", "dst"]].to_csv(tmp / "edges.csv", index=False)
    return tmp / "nodes.csv", tmp / "edges.csv"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("e2e")
    mp = pytest.MonkeyPatch()
    mp.setenv("DAGSTER_HOME", str(tmp / "dagster_home"))
    mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp / 'mlflow.db'}")
    mp.setenv("GRASP_USER_SKBS", str(tmp / "user_skbs"))
    (tmp / "dagster_home").mkdir()
    from grasp_assets.run import run_pipeline
    from grasp_core.cli import main

    nodes, edges = _csv_files(tmp)
    assert main(["data", "import", DATASET, "--nodes", str(nodes), "--edges", str(edges)]) == 0
    (tmp / "user_skbs" / DATASET / "queries.parquet").unlink()  # a user SKB directory with no queries at all

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
    out = tmp / "results"
    assert (
        main(["--profile", "smoke", "--root", str(tmp / "artifacts"), "report", DATASET, "--results-dir", str(out)])
        == 0
    )
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
    from grasp_core.pipeline.policy import PolicyData
    from grasp_core.profiles import get_profile

    art = Artifacts.for_dataset(DATASET, tmp / "artifacts")
    ws = Components(art, get_profile("smoke"))
    assert ws.profile.planner == "policy"
    queries = ws.skb.queries
    train = set(queries.loc[queries["split"] == "train", "qid"].astype(int))
    train_text = set(queries.loc[queries["split"] == "train", "query"])
    held_out = set(queries.loc[queries["split"].isin(["val", "test", "test-human"]), "query"]) - train_text
    assert held_out
    prompts, plans = tokenizer_examples(ws)
    assert len(prompts) > 0
    assert not [q for q in held_out if any(q in t for t in prompts)]
    sft_qids = PolicyData(ws).train_qids
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


def test_retrieve_answers_every_test_query_as_the_evaluation_ranked_it(trained):
    from grasp_core.components import Components
    from grasp_core.profiles import get_profile
    from tests.answer_parity import assert_retrieve_answers_as_evaluated

    tmp, _ = trained
    ws = Components(Artifacts.for_dataset(DATASET, tmp / "artifacts"), get_profile("smoke"))
    assert ws.final_planner()[0].startswith("round ")  # the RL planner, as Dagster materialized the evaluation
    assert assert_retrieve_answers_as_evaluated(ws) == {"test": len(ws.split("test"))}


def test_a_bare_entity_name_returns_that_entity_first(trained):
    """A name typed alone asks for that node: the trained system answers it first (ten names of five types, names
    no other node shares; the smoke profile's reranker trains on a few dozen look-ups, and one of the ten, a
    pathway whose name holds another node's name, is answered second: at least nine of ten)."""
    from grasp_core.retriever import GraspRetriever

    tmp, _ = trained
    retriever = GraspRetriever.from_artifacts(DATASET, tmp / "artifacts", profile="smoke")
    nodes = retriever.ws.skb.nodes
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
    assert sum(question in texts for texts in ran) == 1, ran  # it was 3: mFAR, the planner and the reranker
    assert anchors and all(sum(a in texts for texts in ran) == 1 for a in anchors), ran  # 2: extractor, executor
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


def test_every_artifact_verifies_and_a_corrupted_one_fails_grasp_query_in_one_line(trained, tmp_path, capsys):
    """Nothing a step wrote changed after its manifest sealed it; a flipped byte in a faiss index and a reranker
    model cut in half (on a copy) each stop a cold `grasp query` with one line naming the artifact."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from grasp_core.cli import main

    tmp, _ = trained
    assert main(["--profile", "smoke", "--root", str(tmp / "artifacts"), "verify", DATASET]) == 0
    assert "CORRUPT" not in capsys.readouterr().out
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]), "HF_HUB_OFFLINE": "1"}
    for name, pattern, how in (("vector_indexes", "*.faiss", "flip"), ("reranker", "ranker.txt", "cut")):
        shutil.rmtree(tmp_path / "copy", ignore_errors=True)
        shutil.copytree(tmp / "artifacts", tmp_path / "copy")
        file = sorted((tmp_path / "copy" / DATASET / name).glob(pattern))[0]
        data = bytearray(file.read_bytes())
        data = data[: len(data) // 2] if how == "cut" else data[:-8] + bytes(b ^ 0xFF for b in data[-8:])
        file.write_bytes(bytes(data))
        cmd = [sys.executable, "-m", "grasp_core.cli", "--profile", "smoke", "--root", str(tmp_path / "copy")]
        proc = subprocess.run([*cmd, "query", DATASET, "which genes?"], capture_output=True, text=True, env=env)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr + proc.stdout
        lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and f"artifact {name} of dataset {DATASET!r} is corrupt" in lines[0]
        assert file.name in lines[0] and lines[0].endswith(f"grasp pipeline {DATASET}")


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
    from grasp_assets.resources import GraspSettings, MLflowTracking
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
            "settings": GraspSettings(profile="smoke", artifacts_root=str(tmp / "artifacts")),
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
    ws = Components(Artifacts.for_dataset(DATASET, root), get_profile("smoke"))
    assert ws.graph.nodes.loc[ws.graph.nodes["node_id"] == node, "name"].item() == "Zorblax quintessence"
    [ranked] = ws.text_retriever("bm25").rank(["Zorblax quintessence"], k=1)
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
    from grasp_assets.resources import GraspSettings, MLflowTracking
    from grasp_core.text.rankings_io import read_rankings

    tmp, _ = trained
    root = tmp_path / "artifacts"
    shutil.copytree(tmp / "artifacts", root, symlinks=True)
    for name in ("graph_store", "eval_metrics"):
        shutil.rmtree(root / DATASET / name)
    settings = GraspSettings(profile="smoke", artifacts_root=str(root), graph_store="neo4j", traversal="store")
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("dataset", [DATASET])
    mlflow_db = tmp_path / "mlflow.db"
    result = dg.materialize(
        list(build_definitions(settings.get_profile()).assets),
        selection=dg.AssetSelection.assets("graph_store", "eval_metrics"),
        partition_key=DATASET,
        instance=instance,
        resources={"settings": settings, "mlflow": MLflowTracking(tracking_uri=f"sqlite:///{mlflow_db}")},
    )
    assert result.success
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
    for name, ws in on.items():
        tables = ws.entity_tables
        ran[name] = ws.executor.execute_batch(
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
    import dataclasses
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

    def mlflow_runs(client):
        exp = client.get_experiment_by_name("grasp")
        return {
            (r.info.run_name, r.data.tags.get("step")): r
            for r in client.search_runs([exp.experiment_id], max_results=500)
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

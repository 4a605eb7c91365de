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


VIGNETTE = (
    "A 34-year-old woman presents with a three-year history of progressive gait ataxia, dysarthria and "
    "intermittent diplopia. Her mother and maternal uncle had similar symptoms beginning in their forties. "
    "Examination shows nystagmus, limb dysmetria, brisk reflexes with extensor plantar responses, reduced "
    "vibration sense at the ankles and mild cognitive slowing. MRI shows cerebellar and brainstem atrophy. "
    "Nerve conduction studies reveal an axonal sensory neuropathy. Which genes, proteins, diseases or drugs "
    "are most relevant to this presentation, and what would you test next to confirm the diagnosis?"
)


def _retrieve(root: str, src, out, *extra) -> int:
    from grasp_core.cli import main

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
    # the tiny planner's 1,024-token context holds the prompt of the 600-character case, not of the long one
    assert "truncated" not in rows[1] and rows[2]["truncated"]["planner"].startswith("read ")

    from grasp_core.cli import main

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

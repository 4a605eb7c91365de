"""Results documents from per-query rows, their markdown, the files `grasp report` writes, and Stouffer across
datasets."""

import json
import os

import numpy as np
import pytest

from grasp_core.artifacts import Artifacts
from grasp_core.errors import GraspError
from grasp_core.eval.results import build_results, per_query_file, per_query_rows, render_markdown
from grasp_core.eval.significance import mcnemar, stouffer
from grasp_core.io import atomic_dir, write_json
from grasp_core.ranking import Ranking
from grasp_core.report import (
    cross_dataset_report,
    dataset_report,
    dataset_results,
    recorded_results,
    summary_report,
    write_results,
)

N_NODES = 50


def ranking(first: int) -> Ranking:
    """A ranking of 30 nodes whose first node is ``first``, then the others in id order."""
    ids = [first] + [i for i in range(30) if i != first]
    return Ranking(np.asarray(ids, np.int64), np.linspace(1, 0, 30, dtype=np.float32))


def rows_for(setting: str, correct: list[bool], qids=None):
    """Query q's gold answer is node q mod 29; a correct query ranks it first, a wrong one ranks node 29 first."""
    qids = list(range(len(correct))) if qids is None else qids
    rankings = [ranking(q % 29 if ok else 29) for q, ok in zip(qids, correct)]
    return per_query_rows(setting, qids, rankings, [[q % 29] for q in qids], N_NODES)


def frame(**settings):
    import pandas as pd

    return pd.concat([rows_for(name, hits) for name, hits in settings.items()], ignore_index=True)


SERVED = [True] * 14 + [False] * 6
TEXT = [True] * 6 + [False] * 14
RERANK = [True] * 15 + [False] * 5


def test_results_document_holds_percentages_and_mcnemar_of_the_required_pairs():
    rows = frame(text=TEXT, sft=TEXT, served=SERVED, **{"served+rerank": RERANK})
    doc = build_results(
        rows,
        dataset="hpo",
        profile="cpu",
        commit="abc1234",
        split="test",
        latency={"text": {"mean": 0.1, "p50": 0.1, "p95": 0.2}},
        steps={"eval_metrics": 61.5},
    )
    assert set(doc) == {"dataset", "profile", "commit", "split", "n_queries", "settings", "mcnemar", "latency", "steps"}
    assert doc["n_queries"] == 20 and doc["split"] == "test"
    assert doc["settings"]["served"]["hit@1"] == 70.0 and doc["settings"]["text"]["hit@1"] == 30.0
    assert doc["settings"]["served+rerank"]["hit@1"] == 75.0
    assert set(doc["settings"]["text"]) == {"hit@1", "hit@5", "recall@20", "mrr"}
    assert set(doc["mcnemar"]) == {"served+rerank vs served", "served vs text", "served vs sft"}
    assert doc["mcnemar"]["served vs text"] == pytest.approx(mcnemar(SERVED, TEXT)[1], rel=1e-3)
    assert doc["mcnemar"]["served vs text"] < 0.05 < doc["mcnemar"]["served+rerank vs served"]
    json.dumps(doc)  # plain JSON


def test_settings_must_cover_the_same_queries():
    import pandas as pd

    rows = pd.concat([rows_for("served", SERVED), rows_for("text", TEXT[:10], qids=list(range(10)))])
    with pytest.raises(GraspError, match="covers 10 queries"):
        build_results(rows, dataset="hpo", profile="cpu", commit="x", split="test")


def test_markdown_is_rendered_from_the_document():
    doc = build_results(
        frame(text=TEXT, served=SERVED),
        dataset="hpo",
        profile="cpu",
        commit="abc1234",
        split="test",
        latency={"total": {"mean": 0.5, "p50": 0.4, "p95": 0.9}},
        steps={"teacher_plans": 130.0, "planner/1": 61.0},
    )
    md = render_markdown(doc)
    assert "`hpo`, test split (20 queries" in md
    assert f"| served | 70.0 | {doc['settings']['served']['hit@5']:.1f} |" in md
    assert "| text | 30.0 |" in md and f"vs served: {doc['mcnemar']['served vs text']:.3g}" in md
    assert "| total | 0.500 | 0.400 | 0.900 |" in md
    assert "| teacher_plans | 2 min 10 s |" in md and "| planner/1 | 1 min 01 s |" in md and "sum 3 min 11 s" in md


def test_dataset_results_read_every_evaluation_asset_and_write_one_file_per_split(tmp_path):
    art = Artifacts.for_dataset("hpo", tmp_path / "artifacts")
    with atomic_dir(art.path("eval_metrics")) as tmp:
        write_json(tmp / "metrics.json", {"profile": "cpu", "commit": "abc1234"})
        frame(text=TEXT, served=SERVED).to_parquet(tmp / per_query_file("test"))
        rows_for("served", [True, False, True], qids=[100, 101, 102]).to_parquet(tmp / per_query_file("test-human"))
    with atomic_dir(art.path("ablations")) as tmp:
        frame(sft=TEXT, teacher=RERANK).to_parquet(tmp / per_query_file("test"))
    with atomic_dir(art.path("latency")) as tmp:
        write_json(tmp / "latency.json", {"queries": 3, "stages": {"total": {"mean": 1.0, "p50": 1.0, "p95": 2.0}}})
    results = dataset_results(art, steps={"eval_metrics": 12.0})
    assert list(results) == ["test", "test-human"]
    assert results["test"]["machine"].startswith(f"{os.cpu_count()} cores") and len(results["test"]["date"]) == 10
    assert list(results["test"]["settings"]) == ["text", "served", "sft", "teacher"]
    assert results["test"]["steps"] == {"eval_metrics": 12.0} and results["test"]["latency"]["total"]["p95"] == 2.0
    human = results["test-human"]
    assert human["split"] == "test-human" and human["n_queries"] == 3 and human["settings"]["served"]["hit@1"] == 66.67
    paths = write_results(results, tmp_path / "results")
    assert [p.name for p in paths] == ["pipeline_hpo.json", "pipeline_hpo_test-human.json"]
    assert json.loads(paths[0].read_text()) == results["test"]
    assert "test-human split (3 queries" in dataset_report(results)
    assert recorded_results(tmp_path / "results", "hpo") == results  # what --recorded renders again
    with pytest.raises(GraspError, match="no recorded results of 'synth-mag'"):
        recorded_results(tmp_path / "results", "synth-mag")


def test_report_writes_and_reads_the_instances_reports_unless_given_a_results_dir(tmp_path, monkeypatch, capsys):
    from pathlib import Path

    from grasp_assets.cli import build_parser, main, results_dir

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    parser = build_parser()
    assert results_dir(parser.parse_args(["report", "hpo"])) == tmp_path / "home" / "reports"
    shipped = parser.parse_args(["report", "hpo", "--results-dir", "benchmarks/results"])
    assert results_dir(shipped) == Path("benchmarks/results")
    doc = build_results(frame(text=TEXT, served=SERVED), dataset="synth-mag", profile="cpu", commit="x", split="test")
    write_results({"test": doc}, tmp_path / "home" / "reports")
    assert main(["report", "synth-mag", "--recorded", "synth-mag"]) == 0  # --recorded reads the instance's too
    out = capsys.readouterr().out  # named as a dataset and as recorded: rendered once
    assert out.count("`synth-mag`, test split (20 queries") == 1
    assert main(["report", "hpo", "--recorded", "hpo", "--results-dir", str(tmp_path / "elsewhere")]) == 2
    assert f"no recorded results of 'hpo' in {tmp_path / 'elsewhere'}" in capsys.readouterr().err


def test_stouffer_combines_signed_mcnemar_p_values_across_datasets():
    a = build_results(frame(text=TEXT, served=SERVED), dataset="hpo", profile="cpu", commit="x", split="test")
    b = build_results(frame(text=SERVED, served=TEXT), dataset="synth-mag", profile="cpu", commit="x", split="test")
    c = build_results(frame(served=SERVED, graph=TEXT), dataset="synth-prime", profile="cpu", commit="x", split="test")
    table = cross_dataset_report([a, b, c])
    lines = {line.split(" | ")[0].strip("| "): line for line in table.splitlines() if line.startswith("| ")}
    p = a["mcnemar"]["served vs text"]
    assert lines["served"].startswith("| served | 70.0 | 30.0 | 70.0 |")
    assert f"30.0 (p {p:.3g})" in lines["text"] and f"70.0 (p {p:.3g})" in lines["text"]
    # text is 40 points worse on hpo and 40 better on synth-mag: the effects cancel
    assert lines["text"].endswith(f"| {stouffer([p, p], [-40.0, 40.0]):.3g} |") and stouffer([p, p], [-1, 1]) == 1.0
    assert lines["graph"].startswith("| graph | — | — | 30.0")
    assert cross_dataset_report([]) == "(no dataset has its evaluation built yet)"


def test_readme_block_is_replaced_and_a_readme_without_one_is_refused(tmp_path):
    from grasp_core.report import README_BEGIN, README_END, replace_readme_block

    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n{README_BEGIN}\nold table\n{README_END}\n## next\n")
    replace_readme_block(readme, "| new | table |")
    assert readme.read_text() == f"# title\n{README_BEGIN}\n| new | table |\n{README_END}\n## next\n"
    (tmp_path / "other.md").write_text("# no block\n")
    with pytest.raises(GraspError, match="has no results block"):
        replace_readme_block(tmp_path / "other.md", "x")


def test_the_readme_summary_follows_the_answer_path_and_names_where_each_figure_comes_from():
    test = build_results(
        frame(text=TEXT, served=SERVED, **{"served+rerank": RERANK}, sft=TEXT, teacher=RERANK),
        dataset="hpo",
        profile="cpu",
        commit="abc1234",
        split="test",
        latency={"total": {"mean": 0.5, "p50": 0.25, "p95": 0.9}},
    ) | {"machine": "2 cores, AMD EPYC, 24 GiB", "date": "2026-12-05"}
    human = build_results(
        frame(text=TEXT, served=SERVED), dataset="hpo", profile="cpu", commit="abc1234", split="test-human"
    )
    old = build_results(
        frame(text=TEXT, served=SERVED), dataset="synth-mag", profile="cpu", commit="def5678", split="test"
    )
    md = summary_report({"hpo": {"test": test, "test-human": human}, "synth-mag": {"test": old}})
    rows = [line for line in md.splitlines() if line.startswith("| `")]
    assert (
        rows[0]
        == f"| `hpo` | test | 20 | 30.0 | 70.0 | 75.0 | {test['settings']['served+rerank']['hit@5']:.1f} | 75.0 | 250 |"
    )
    assert rows[1] == "| `hpo` | test-human | 20 | 30.0 | 70.0 | — | — | — | — |"
    assert "hpo: commit abc1234, 2 cores, AMD EPYC, 24 GiB, 2026-12-05" in md
    assert "synth-mag: commit def5678, machine and date not recorded" in md
    assert "`pipeline_hpo_test-human.json`" in md
    learned = [line for line in md.splitlines() if line.startswith("| sft |")]
    assert learned == [
        f"| sft | 30.0 (p {test['mcnemar']['served vs sft']:.3g}) | — | {stouffer([test['mcnemar']['served vs sft']], [-40.0]):.3g} |"
    ]
    assert summary_report({}) == "(no dataset has its evaluation built yet)"

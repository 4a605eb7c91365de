"""The `grasp` command on real (tiny) data: build, stats, and one-line errors for bad input."""

import json

import pytest

from grasp_core.cli import main


def test_data_build_and_stats(tmp_path, capsys):
    root = str(tmp_path)
    assert main(["--root", root, "data", "build", "synth-prime", "--scale", "tiny"]) == 0
    assert main(["--root", root, "data", "stats", "synth-prime"]) == 0
    out = capsys.readouterr().out
    assert "gene/protein" in out and "ppi" in out and "train" in out and "test" in out
    mix = out.split("query target types:")[1].splitlines()[1:]
    assert sum(int(line.split()[-2].replace(",", "")) for line in mix) == 3000  # every query has its target type


@pytest.mark.parametrize(
    "argv, message",
    [
        (["data", "stats", "no-such-dataset"], "unknown dataset 'no-such-dataset'"),
        (["query", "no-such-dataset", "which drugs?"], "unknown dataset 'no-such-dataset'"),
        (["query", "hpo", "   "], "the query is empty"),
    ],
)
def test_bad_input_is_one_line_error(tmp_path, capsys, argv, message):
    assert main(["--root", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_retrieve_before_artifacts_exist_says_what_to_build(tmp_path, capsys):
    queries = tmp_path / "in.jsonl"
    queries.write_text(json.dumps({"qid": 1, "query": "which diseases present with seizures?"}) + "\n")
    code = main(
        ["--root", str(tmp_path), "retrieve", "hpo", "--queries", str(queries), "--out", str(tmp_path / "out.jsonl")]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and "has not been built yet" in err and "grasp pipeline hpo" in err
    assert not (tmp_path / "out.jsonl").exists()


def test_malformed_jsonl_lines_are_reported_and_good_lines_kept(tmp_path, capsys):
    from grasp_core.batch import read_queries

    path = tmp_path / "in.jsonl"
    path.write_text(
        '{"qid": 1, "query": "a good question"}\nnot json\n{"qid": 3}\n{"qid": 4, "query": "  "}\n'
        '{"qid": 5, "query": "another good one"}\n'
    )
    good, bad = read_queries(path)
    assert good == [(1, "a good question"), (5, "another good one")]
    assert [b.split(":")[1] for b in bad] == ["2", "3", "4"]

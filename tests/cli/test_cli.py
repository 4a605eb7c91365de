"""The `grasp` command on real (tiny) data: build, stats, and one-line errors for bad input."""

import json

import pytest

from grasp_assets.cli import main


def test_data_build_and_stats(tmp_path, capsys):
    root = str(tmp_path)
    assert main(["--root", root, "data", "build", "synth-prime", "--scale", "tiny"]) == 0
    assert main(["--root", root, "data", "stats", "synth-prime"]) == 0
    out = capsys.readouterr().out
    assert "gene/protein" in out and "ppi" in out and "train" in out and "test" in out
    mix = out.split("query target types:")[1].split("queries per relation:")[0].splitlines()[1:]
    import pandas as pd

    queries = pd.read_parquet(next(tmp_path.glob("synth-prime/queries/*.parquet")))
    assert len(queries) >= 3000  # the synthesized queries and the term look-ups of train/val
    assert sum(int(line.split()[-2].replace(",", "")) for line in mix) == len(queries)  # each has its target type


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


def test_a_non_utf8_argument_is_a_one_line_error(tmp_path, capsys):
    argv = ["--root", str(tmp_path), "query", "hpo", b"seiz\xff\xfeures".decode("utf-8", "surrogateescape")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: the question argument: byte 0xff is not UTF-8 at character 4; give the text as valid UTF-8"


def test_a_non_utf8_argument_from_a_real_shell_is_a_one_line_error(tmp_path):
    import os
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "grasp_assets.cli", "--root", str(tmp_path), "data", "stats", b"hp\xffo"],
        capture_output=True,
        env={**os.environ, "LC_ALL": "C.UTF-8"},
        timeout=120,
    )
    assert proc.returncode == 2 and b"Traceback" not in proc.stderr
    assert proc.stderr.decode().strip() == (
        "error: argument dataset: byte 0xff is not UTF-8 at character 2; give the text as valid UTF-8"
    )


@pytest.mark.parametrize("size", ["0", "-1"])
def test_a_batch_size_below_one_is_refused_before_any_work(tmp_path, capsys, size):
    queries = tmp_path / "in.jsonl"
    queries.write_text(json.dumps({"qid": 1, "query": "seizures"}) + "\n")
    out = tmp_path / "out.jsonl"
    argv = ["--root", str(tmp_path), "retrieve", "hpo", "--queries", str(queries), "--out", str(out)]
    assert main([*argv, "--batch-size", size]) == 2
    assert capsys.readouterr().err.strip() == f"error: --batch-size must be at least 1, got {size}"
    assert not out.exists()


@pytest.mark.parametrize(
    "target, message", [("dir", "is a directory"), ("file/out.jsonl", "is a file, not a directory")]
)
def test_an_unwritable_output_is_refused_before_the_models_load(tmp_path, capsys, target, message):
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("")
    queries = tmp_path / "in.jsonl"
    queries.write_text(json.dumps({"qid": 1, "query": "seizures"}) + "\n")
    # no artifacts were built: an error about the output proves it was checked before anything was loaded
    argv = ["--root", str(tmp_path), "retrieve", "hpo", "--queries", str(queries), "--out", str(tmp_path / target)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_invalid_utf8_and_lone_surrogates_are_reported_by_line(tmp_path):
    from grasp_core.batch import read_queries

    path = tmp_path / "in.jsonl"
    path.write_bytes(
        b'{"qid": 1, "query": "seizures"}\n'
        b'{"qid": 2, "query": "seiz\xff\xfeures"}\n'
        b'{"qid": 3, "query": "\\ud800 fever"}\n'
        b'{"qid": 4, "query": "cafe\\u0301 ataxia"}\n'
    )
    good, bad = read_queries(path)
    assert good == [(1, "seizures"), (4, "caf\u00e9 ataxia")]  # NFC: a composed é
    assert bad == [
        f"{path}:2: byte 0xff at offset 25 is not UTF-8; save the file as UTF-8",
        f"{path}:3: lone surrogate \\ud800 at character 0; give the text as valid UTF-8",
    ]


def test_queries_built_from_another_skb_are_refused(tmp_path, capsys):
    root = str(tmp_path)
    assert main(["--root", root, "data", "build", "synth-prime", "--scale", "tiny"]) == 0
    # a rebuild of the graph alone (as when `data build` is killed between its two writes): the queries are stale
    assert main(["--root", root, "data", "build", "synth-prime", "--scale", "0.002", "--no-queries"]) == 0
    capsys.readouterr()
    assert main(["--root", root, "data", "stats", "synth-prime"]) == 2
    err = capsys.readouterr().err.strip()
    assert "built from another version of the SKB" in err and "`grasp data build synth-prime`" in err
    assert len(err.splitlines()) == 1
    assert main(["--root", root, "data", "build", "synth-prime", "--scale", "0.002"]) == 0
    assert main(["--root", root, "data", "stats", "synth-prime"]) == 0


def test_leftovers_of_a_killed_write_are_removed_by_the_next_write(tmp_path):
    from grasp_core.io import atomic_dir, is_complete

    target = tmp_path / "skb"
    for leftover in (".skb.tmp-0123abcd", ".skb.old-89abcdef"):
        (tmp_path / leftover).mkdir()
        (tmp_path / leftover / "nodes.parquet").write_bytes(b"x" * 100)
    (tmp_path / ".skb_other.tmp-0123abcd").mkdir()  # another artifact's: not ours to remove
    with atomic_dir(target) as tmp:
        (tmp / "a").write_text("1")
    assert is_complete(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".skb_other.tmp-0123abcd", "skb"]


def test_dagster_home_alone_decides_where_artifacts_and_mlflow_live(tmp_path, monkeypatch):
    from grasp_core.artifacts import Artifacts
    from grasp_core.datasets import DatasetConfig
    from grasp_core.tracking import TrackingConfig

    for var in ("GRASP_HOME", "MLFLOW_TRACKING_URI", "GRASP_MLFLOW_ARTIFACTS", "GRASP_USER_SKBS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    assert Artifacts.for_dataset("hpo").root == Artifacts("hpo").root == tmp_path / "artifacts"
    assert TrackingConfig().tracking_uri == f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert TrackingConfig().artifact_root == str(tmp_path / "mlartifacts")
    assert DatasetConfig().user_skb_root == str(tmp_path / "user_skbs")
    assert main(["data", "build", "synth-prime", "--scale", "tiny", "--no-queries"]) == 0
    assert (tmp_path / "artifacts" / "synth-prime" / "skb" / "_MANIFEST.json").exists()

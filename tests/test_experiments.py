"""Experiment variants without a pipeline: variant files checked against the config dataclasses, partition keys,
flattened settings, the reuse index (hard links, holders, ``grasp gc``) and ``grasp compare`` on evaluation rows.
The variants built through Dagster are in ``tests/test_end_to_end_rebuilds.py`` (``test_a_variant_...``)."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from grasp_core import manifest, reuse
from grasp_core.errors import GraspError
from grasp_core.experiments import (
    artifacts_for,
    compare,
    differing,
    flat_settings,
    load_variant,
    partition_of,
    render_comparison,
    resolve_profile,
    split_key,
    variant_key,
)
from grasp_core.io import atomic_dir, link_dir
from grasp_core.profiles import get_profile


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    (tmp_path / "experiments").mkdir()
    return tmp_path


def _write(home, name: str, text: str):
    (home / "experiments" / f"{name}.toml").write_text(text)


def test_the_shipped_variants_change_what_they_say():
    cpu = get_profile("cpu")
    assert differing([cpu, resolve_profile("hpo+rerank-k20", "cpu")]) == {"rerank.top_k": [50, 20]}
    assert differing([cpu, resolve_profile("hpo+text-dense", "cpu")]) == {"text_retriever": ["mfar", "dense"]}
    seeds = ("mfar", "oof", "policy_train", "planner_model.tiny", "chooser", "ltr")
    assert differing([cpu, resolve_profile("hpo+retrain-seed1", "cpu")]) == {f"{s}.seed": [0, 1] for s in seeds}
    assert load_variant("rerank-k20").description


def test_a_variant_file_overrides_sections_nested_tables_and_top_level_settings(home):
    _write(
        home,
        "mine",
        'profile = "smoke"\ntext_retriever = "bm25"\n[rerank]\ntop_k = 7\nw = 2\ngrid_k = [30, 60]\n'
        "[planner_model.tiny]\nhidden_size = 32\n",
    )
    profile = resolve_profile("mykb+mine", "cpu")  # the file's own base profile wins over the run's
    smoke = get_profile("smoke")
    assert profile.name == "smoke" and profile.text_retriever == "bm25"
    assert profile.rerank.top_k == 7 and profile.rerank.w == 2.0 and profile.rerank.grid_k == (30.0, 60.0)
    assert profile.planner_model.tiny.hidden_size == 32
    assert profile.planner_model.vocab_size == smoke.planner_model.vocab_size
    assert set(differing([smoke, profile])) == {
        "text_retriever",
        "rerank.top_k",
        "rerank.w",
        "rerank.grid_k",
        "planner_model.tiny.hidden_size",
    }


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[rerank]\ntop_kk = 20\n", "[rerank] has no setting 'top_kk'; its settings: grid_k, grid_w, k, top_k, w"),
        ("[reranker]\ntop_k = 20\n", "unknown setting 'reranker'; sections: "),
        ("[rerank]\ntop_k = 2.5\n", "rerank.top_k must be int, got 2.5"),
        ("[rerank]\ntop_k = true\n", "rerank.top_k must be int, got True"),
        ('[execution]\ntraversal = "dfs"\n', "execution.traversal must be one of 'arrays', 'store', got 'dfs'"),
        ('text_retriever = "splade"\n', "text_retriever must be one of bm25, dense, mfar, got 'splade'"),
        ("rerank = 20\n", "rerank is a section: write its fields under [rerank]"),
        ('profile = "huge"\n', "profile = 'huge' is not a profile; choose one of cpu, gpu, smoke, gpu-smoke"),
        ("[rerank\n", "not TOML"),
    ],
)
def test_a_bad_variant_file_is_a_one_line_error_naming_what_is_valid(home, text, says):
    _write(home, "bad", text)
    with pytest.raises(GraspError) as info:
        load_variant("bad")
    message = str(info.value)
    assert says in message and "\n" not in message and str(home / "experiments" / "bad.toml") in message


def test_an_unknown_variant_lists_the_variants_found(home):
    with pytest.raises(GraspError, match="no variant 'nope'.*variants found: .*rerank-k20"):
        resolve_profile("hpo+nope")
    with pytest.raises(GraspError, match="bad variant name"):
        variant_key("hpo", "Not OK")


def test_partition_keys_and_variant_artifacts(tmp_path):
    assert split_key("hpo+rerank-k20") == ("hpo", "rerank-k20") and split_key("hpo") == ("hpo", None)
    assert variant_key("hpo", None) == variant_key("hpo", "base") == "hpo"
    assert variant_key("hpo", "rerank-k20") == variant_key("hpo", "hpo+rerank-k20") == "hpo+rerank-k20"
    with pytest.raises(GraspError, match="is of dataset 'mag'"):
        variant_key("hpo", "mag+x")
    art = artifacts_for("hpo+rerank-k20", tmp_path)
    assert art.dataset == "hpo" and partition_of(art) == "hpo+rerank-k20"  # steps see the base dataset
    assert art.path("planner", "1") == tmp_path / "hpo+rerank-k20" / "planner" / "1"
    with pytest.raises(GraspError, match=r"grasp pipeline hpo --variant rerank-k20"):
        art.require("skb")
    assert partition_of(artifacts_for("hpo", tmp_path)) == "hpo"


def test_flat_settings_cover_every_section_without_locations():
    flat = flat_settings(get_profile("cpu"))
    assert flat["rerank.top_k"] == 50 and flat["text_retriever"] == "mfar" and flat["name"] == "cpu"
    assert "planner_model.tiny.hidden_size" in flat and isinstance(flat["rerank.grid_w"], list)
    assert not [k for k in flat if k.endswith(("user_skb_root", "stark_root"))]


def _artifact(path, files: dict[str, bytes]):
    with atomic_dir(path) as tmp:
        for name, data in files.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp / name).write_bytes(data)
    return manifest.read(path)


def test_link_dir_shares_every_file_and_the_reuse_index_finds_only_matching_settings(tmp_path):
    root = tmp_path / "artifacts"
    built = _artifact(root / "hpo" / "reranker", {"model.txt": b"weights", "sub/grid.json": b"{}"})
    family = reuse.family_key("reranker", None, "code", {"skb": "d1"}, "hpo")
    assert family != reuse.family_key("reranker", None, "code", {"skb": "d2"}, "hpo")
    hashes = {"rerank": reuse.settings_hash({"top_k": 50}), "ltr": reuse.settings_hash({"rounds": 5})}
    reuse.record(
        root,
        family,
        partition="hpo",
        asset="reranker",
        round_key=None,
        dataset="hpo",
        code="code",
        code_version="v1",
        inputs={"skb": "d1"},
        digest=built.digest,
        reads=hashes,
        result={"val_hit1": 12.5, "plot_png": b"\x89PNG"},
    )

    def find(**settings):
        ours = {**hashes, **{k: reuse.settings_hash(v) for k, v in settings.items()}}
        return reuse.find(
            root,
            family,
            lambda p: artifacts_for(p, root).path("reranker"),
            dataset="hpo",
            section_hash=lambda s: ours.get(s, "other"),
            code_version="v2",
            inputs={"skb": "d1"},
        )

    assert find(rerank={"top_k": 20}) is None  # a setting it read differs
    found = find(teacher={"anything": 1})  # a setting it did not read differs: the same artifact
    assert found is not None and found.partition == "hpo" and found.result == {"val_hit1": 12.5, "plot_png": b"\x89PNG"}
    target = artifacts_for("hpo+x", root).path("reranker")
    reuse.materialize(found, target)
    for rel in ("model.txt", "sub/grid.json"):
        assert os.stat(target / rel).st_ino == os.stat(root / "hpo" / "reranker" / rel).st_ino
    assert manifest.verify(target, deep=True).digest == built.digest
    # a holder whose files changed since is not trusted
    (root / "hpo" / "reranker" / "model.txt").unlink()
    (root / "hpo" / "reranker" / "model.txt").write_bytes(b"weights, retrained")
    assert find() is None


def test_link_dir_replaces_an_older_artifact_atomically(tmp_path):
    src = tmp_path / "a"
    _artifact(src, {"x": b"new"})
    old = _artifact(tmp_path / "b", {"x": b"old", "y": b"gone"})
    assert old is not None
    link_dir(src, tmp_path / "b")
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["_MANIFEST.json", "x"]
    assert (tmp_path / "b" / "x").read_bytes() == b"new"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_gc_frees_only_what_no_other_partition_links(tmp_path):
    from grasp_core.releases import promote, releases_dir

    root = tmp_path / "artifacts"
    _artifact(root / "hpo" / "skb", {"nodes": b"n" * 1000})
    link_dir(root / "hpo" / "skb", root / "hpo+x" / "skb")
    _artifact(root / "hpo+x" / "reranker", {"model": b"m" * 300})
    for partition in ("hpo", "hpo+x"):
        reuse.record(
            root,
            "fam",
            partition=partition,
            asset="skb",
            round_key=None,
            dataset="hpo",
            code="c",
            code_version="v",
            inputs={},
            digest="d",
            reads={},
            result={},
        )
    promote(artifacts_for("hpo+x", root), "hpo+x", {})  # the variant's served release: more links to its files
    manifests = sum(p.stat().st_size for p in root.rglob("_MANIFEST.json") if "hpo+x" in str(p))  # copies
    manifests += (releases_dir("hpo+x", root) / "served.json").stat().st_size
    done = reuse.collect(root, "hpo+x")
    assert (done.artifacts, done.files, done.index_entries) == (2, 4, 1)
    assert done.freed == 300 + manifests and done.shared == 1000 and not (root / "hpo+x").exists()
    assert not releases_dir("hpo+x", root).exists()
    assert (root / "hpo" / "skb" / "nodes").read_bytes() == b"n" * 1000
    entry = json.loads((root / ".reuse" / "fam.json").read_text())
    assert [h["partition"] for h in entry["holders"]] == ["hpo"]
    with pytest.raises(GraspError, match="no artifacts of 'hpo\\+x'"):
        reuse.collect(root, "hpo+x")


def _evaluation(root, key: str, hits: dict[str, list[int]], profile: str = "smoke"):
    """An evaluation artifact whose per-query rows give each setting these Hit@1 values (qids 0..n-1)."""
    rows = []
    for setting, values in hits.items():
        for qid, h in enumerate(values):
            rows.append({"setting": setting, "qid": qid, "hit@1": float(h), "hit@5": 1.0, "recall@20": 1.0, "mrr": h})
    with atomic_dir(artifacts_for(key, root).path("eval_metrics")) as tmp:
        pd.DataFrame(rows).to_parquet(tmp / "per_query_test.parquet")
        (tmp / "metrics.json").write_text(json.dumps({"profile": profile, "commit": "x"}))


def test_compare_pairs_queries_and_lists_the_settings_that_differ(home, tmp_path):
    _write(home, "k5", "[rerank]\ntop_k = 5\n")
    root = tmp_path / "artifacts"
    n = 40
    base = [1] * 30 + [0] * 10
    better = [1] * 40
    _evaluation(root, "synth-prime", {"served": base, "served+rerank": base})
    _evaluation(root, "synth-prime+k5", {"served": base, "served+rerank": better})
    doc = compare("synth-prime", ["base", "k5"], root)
    test = doc["splits"]["test"]
    assert doc["variants"] == ["base", "k5"] and test["n_queries"] == n and test["paired"] == [n]
    assert test["settings"]["served+rerank"]["base"]["hit@1"] == 75.0
    assert test["settings"]["served+rerank"]["k5"]["hit@1"] == 100.0
    assert test["settings"]["served+rerank"]["k5"]["p"] < 0.01 and test["settings"]["served"]["k5"]["p"] == 1.0
    assert doc["differ"] == {"rerank.top_k": [10, 5]}  # the evaluation's profile (smoke) is the base
    text = render_comparison(doc)
    assert (
        "| served+rerank | k5 | 100.0 |" in text
        and "McNemar p vs base" in text
        and "| rerank.top_k | `10` | `5` |" in text
    )
    assert json.loads(json.dumps(doc)) == doc
    with pytest.raises(GraspError, match=r"'synth-prime\+nope' has no evaluation"):
        _write(home, "nope", "")
        compare("synth-prime", ["base", "nope"], root)
    assert np.isfinite(test["settings"]["served"]["base"]["mrr"])


def test_the_commands_refuse_what_is_not_a_variant_in_one_line(home, tmp_path, capsys):
    from grasp_assets.cli import main

    root = ["--root", str(tmp_path / "artifacts")]
    _write(home, "typo", "[rerank]\ntopk = 5\n")
    for argv, says in [
        (["gc", "hpo"], "'hpo' is not a variant: give DATASET+VARIANT"),
        (["gc", "hpo+x"], "no artifacts of 'hpo+x'"),
        (["compare", "hpo", "base", "nope"], "no variant 'nope'"),
        (["compare", "hpo", "base"], "'hpo' has no evaluation"),
        (["query", "hpo", "which genes?", "--variant", "typo"], "typo.toml: [rerank] has no setting 'topk'"),
    ]:
        assert main([*root, *argv]) == 2, argv
        [line] = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
        assert says in line, (argv, line)

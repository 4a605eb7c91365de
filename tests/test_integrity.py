"""Corrupted artifacts of every kind are refused with one line naming the artifact and the command that rebuilds
it: a flipped byte (content hash), a truncated file (size), a LightGBM model malformed before it was sealed (its
text checked before LightGBM parses it). Tiny artifacts written by the real writers; the CLI in a subprocess."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import faiss
import lightgbm as lgb
import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from grasp_core import manifest
from grasp_core.artifacts import Artifacts
from grasp_core.errors import CorruptArtifactError
from grasp_core.gbdt import check_model_text, load_booster
from grasp_core.graph.config import GraphStoreConfig
from grasp_core.graph.open import open_graph_store
from grasp_core.io import atomic_dir, write_json
from grasp_core.skb.format import write_skb
from grasp_core.sources.synth import build_synth_skb

DATASET = "synth-prime"


def _booster() -> lgb.Booster:
    rng = np.random.default_rng(0)
    data = lgb.Dataset(rng.random((200, 6)), rng.integers(0, 3, 200), group=[20] * 10)
    return lgb.train({"objective": "lambdarank", "verbose": -1, "num_leaves": 4}, data, num_boost_round=3)


def _write_kinds(art: Artifacts) -> dict[str, str]:
    """One artifact per file kind, each written by its real writer; -> artifact name: the file to corrupt."""
    skb = build_synth_skb("prime", "tiny", seed=0)
    write_skb(skb, art.path("skb"))
    with atomic_dir(art.path("node_embeddings")) as tmp:
        np.save(tmp / "doc.npy", np.random.default_rng(0).random((64, 8), np.float32).astype(np.float16))
    with atomic_dir(art.path("vector_indexes")) as tmp:
        index = faiss.IndexFlatIP(8)
        index.add(np.random.default_rng(1).random((64, 8), np.float32))
        faiss.write_index(index, str(tmp / "000.name.faiss"))
    with atomic_dir(art.path("reranker")) as tmp:
        _booster().save_model(str(tmp / "ranker.txt"))
    with atomic_dir(art.path("planner_base")) as tmp:
        save_file({"w": torch.arange(256, dtype=torch.float32)}, str(tmp / "model.safetensors"))
    with atomic_dir(art.path("mfar_model")) as tmp:
        torch.save({"w": torch.arange(256, dtype=torch.float32)}, tmp / "weights.pt")
    store = open_graph_store(GraphStoreConfig(), art.path("graph_store"))
    store.load(skb)
    store.close()
    with atomic_dir(art.path("entity_tables")) as tmp:
        write_json(tmp / "coverage.json", {"queries": list(range(100))})
    return {
        "skb": "nodes.parquet",
        "node_embeddings": "doc.npy",
        "vector_indexes": "000.name.faiss",
        "reranker": "ranker.txt",
        "planner_base": "model.safetensors",
        "mfar_model": "weights.pt",
        "graph_store": "graph.lbdb",
        "entity_tables": "coverage.json",
    }


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    root = tmp_path_factory.mktemp("pristine")
    return root, _write_kinds(Artifacts.for_dataset(DATASET, root))


def corrupt(file: Path, how: str) -> None:
    data = bytearray(file.read_bytes())
    if how == "flip":
        data[len(data) // 2] ^= 0x5A
    else:
        del data[len(data) // 2 :]
    file.write_bytes(bytes(data))


def copy_of(pristine, tmp_path) -> tuple[Artifacts, dict[str, str]]:
    root, files = pristine
    shutil.copytree(root, tmp_path / "root")
    manifest._VERIFIED.clear()  # this process hashed the pristine files: start as a fresh process would
    return Artifacts.for_dataset(DATASET, tmp_path / "root"), files


@pytest.mark.parametrize("how", ["flip", "truncate"])
@pytest.mark.parametrize(
    "name",
    [
        "skb",
        "node_embeddings",
        "vector_indexes",
        "reranker",
        "planner_base",
        "mfar_model",
        "graph_store",
        "entity_tables",
    ],
)
def test_a_corrupted_file_of_each_kind_is_refused_naming_its_artifact(pristine, tmp_path, name, how):
    art, files = copy_of(pristine, tmp_path)
    art.require(name)  # intact: accepted
    manifest._VERIFIED.clear()
    corrupt(art.path(name) / files[name], how)
    with pytest.raises(CorruptArtifactError) as err:
        art.require(name)
    message = str(err.value)
    assert f"artifact {name} of dataset {DATASET!r} is corrupt" in message and files[name] in message
    assert message.endswith(f"rebuild it: grasp pipeline {DATASET}") and "\n" not in message
    assert ("truncated" if how == "truncate" else "content differs") in message


def test_grasp_verify_and_data_stats_exit_with_one_line_in_a_subprocess(pristine, tmp_path):
    art, files = copy_of(pristine, tmp_path)
    for i, (name, file) in enumerate(files.items()):
        corrupt(art.path(name) / file, "flip" if i % 2 else "truncate")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]), "HF_HUB_OFFLINE": "1"}
    grasp = [sys.executable, "-m", "grasp_core.cli", "--root", str(art.root)]  # the library commands, no Dagster
    verify = subprocess.run([*grasp, "verify", DATASET], capture_output=True, text=True, env=env, timeout=300)
    assert verify.returncode == 2 and "Traceback" not in verify.stderr + verify.stdout
    assert verify.stderr.strip() == (
        f"error: {len(files)} of {len(files)} artifacts of {DATASET!r} are corrupt; "
        f"rebuild them: grasp pipeline {DATASET}"
    )
    corrupt_lines = [line for line in verify.stdout.splitlines() if line.startswith("CORRUPT")]
    assert sorted(line.split()[1].rstrip(":") for line in corrupt_lines) == sorted(files)
    stats = subprocess.run([*grasp, "data", "stats", DATASET], capture_output=True, text=True, env=env, timeout=300)
    assert stats.returncode == 2 and len(stats.stderr.strip().splitlines()) == 1 and "Traceback" not in stats.stderr
    assert f"artifact skb of dataset {DATASET!r} is corrupt" in stats.stderr and "nodes.parquet" in stats.stderr


def test_grasp_verify_accepts_intact_artifacts(pristine, tmp_path, capsys):
    from grasp_core.cli import main

    art, files = copy_of(pristine, tmp_path)
    assert main(["--root", str(art.root), "verify", DATASET]) == 0
    out = capsys.readouterr().out
    assert out.count("\nok ") + out.startswith("ok ") == len(files)
    assert f"{len(files)} artifacts of {DATASET!r} verified" in out


def test_a_manifest_that_is_missing_a_file_or_unreadable_is_refused(pristine, tmp_path):
    art, _ = copy_of(pristine, tmp_path)
    (art.path("reranker") / "ranker.txt").unlink()
    with pytest.raises(CorruptArtifactError, match="ranker.txt: missing"):
        art.require("reranker")
    (art.path("skb") / manifest.MANIFEST_FILE).write_text('{"format": 1')
    with pytest.raises(CorruptArtifactError, match="manifest _MANIFEST.json is unreadable"):
        art.require("skb")


def test_an_identical_rebuild_keeps_the_digest_and_a_changed_file_changes_it(pristine, tmp_path):
    art, _ = copy_of(pristine, tmp_path)
    skb = build_synth_skb("prime", "tiny", seed=0)
    before = manifest.read(art.path("skb"))
    write_skb(skb, art.path("skb"))
    assert manifest.read(art.path("skb")).digest == before.digest
    skb.nodes.loc[0, "name"] = "renamed"
    write_skb(skb, art.path("skb"))
    after = manifest.read(art.path("skb"))
    assert after.digest != before.digest and after.files["edges.parquet"] == before.files["edges.parquet"]
    sealed = manifest.write(art.path("skb"), code_version="v1", inputs={"source": "abc"})
    assert sealed.digest == after.digest and manifest.read(art.path("skb")) == sealed
    assert json.loads((art.path("skb") / manifest.MANIFEST_FILE).read_text())["inputs"] == {"source": "abc"}


# Models LightGBM itself crashes the process on (abort or segfault) or loads silently, found by fuzzing
# (random truncations and byte changes of a model; none of the 204 of 8,000 that pass the check crashes it).
MALFORMED = {
    "cut in half": lambda t: t[: len(t) // 2],
    "cut in the parameters": lambda t: t[: t.index(b"end of parameters")],
    "tree_sizes off by one": lambda t: t.replace(b"tree_sizes=", b"tree_sizes=1", 1),
    "a NUL byte": lambda t: t.replace(b"[learning_rate: ", b"[learning_rate:\0", 1),
    "an underscore in a number": lambda t: t.replace(b"shrinkage=0.1", b"shrinkage=0_1", 1),
    "a field name broken": lambda t: t.replace(b"num_cat=", b"n^m_cat=", 1),
    "a parameter line broken": lambda t: t.replace(b"[num_leaves: ", b"[num_leaves/ ", 1),
    "a value gone": lambda t: t.replace(b"leaf_count=", b"leaf_count=1 ", 1),
    "a feature out of range": lambda t: t.replace(b"split_feature=", b"split_feature=99 ", 1),
    "a header count broken": lambda t: t.replace(b"num_tree_per_iteration=1", b"num_tree_per_iteration=?", 1),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_lightgbm_model_is_refused_before_lightgbm_reads_it(tmp_path, case):
    text = _booster().model_to_string().encode()
    check_model_text(text)
    bad = MALFORMED[case](text)
    assert bad != text
    (tmp_path / "ranker.txt").write_bytes(bad)
    with pytest.raises(
        CorruptArtifactError, match=r"ranker.txt: corrupt model \(.*\); rematerialize the reranker asset"
    ):
        load_booster(tmp_path / "ranker.txt")

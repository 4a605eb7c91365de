"""`grasp data fetch`: STaRK's files through huggingface_hub as stark-qa downloads them, against a stand-in of the
``snap-stanford/stark`` dataset in the Hugging Face cache's own layout (``HF_HUB_OFFLINE=1``, nothing reaches the
network), and the one-line error that says what to download by hand where the hub cannot be reached."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grasp_core.errors import GraspError
from grasp_core.sources.stark_fetch import QA_FILES, QA_FOLDER, REPO, fetch_stark, hub_url, processed_file
from tests.sources.test_stark import write_prime, write_qa

REVISION = "0123456789abcdef0123456789abcdef01234567"


def write_prime_qa(qa_dir: Path) -> None:
    write_qa(
        qa_dir,
        synth=[(10, "which disease is associated with TP53?", [1]), (11, "drugs targeting TP53", [2]), (12, "q", [3])],
        splits={"train": [10], "val": [11], "test": [12]},
        human=[(0, "a disease linked to tumor protein p53", [1])],
    )


def hub_cache(hf_home: Path, name: str = "prime") -> Path:
    """``snap-stanford/stark`` as ``hf_hub_download`` leaves it in ``$HF_HOME/hub``: ``refs/main`` names the revision,
    ``snapshots/<revision>/<path>`` links to ``blobs/<hash>``. It holds ``skb/<name>/processed.zip`` (the tiny
    Prime fixture of ``test_stark.py``, zipped as the archive is: members under ``processed/``) and ``qa/<name>/``."""
    src = hf_home.parent / "stand-in-src"
    write_prime(src / "skb")
    write_prime_qa(src / "qa")
    archive = src / "processed.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for file in sorted((src / "skb").rglob("*")):
            if file.is_file():
                zf.write(file, file.relative_to(src / "skb").as_posix())
    files = {processed_file(name): archive}
    files |= {f"{QA_FOLDER}/{name}/{f}": src / "qa" / f for f in QA_FILES}
    repo = hf_home / "hub" / f"datasets--{REPO.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(REVISION)
    for path, source in files.items():
        data = source.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = repo / "snapshots" / REVISION / path
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    return repo


def grasp(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    """The installed command in a fresh process: the instance, the Hugging Face cache and the artifacts in tmp_path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRASP_", "HF_", "DAGSTER_"))}
    env |= {"DAGSTER_HOME": str(tmp_path / "home"), "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "grasp_assets.cli", "--root", str(tmp_path / "artifacts"), *argv]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


def test_fetch_prime_downloads_verifies_and_builds_from_the_hub_cache(tmp_path):
    hub_cache(tmp_path / "hf")
    proc = grasp(tmp_path, "data", "fetch", "prime")
    assert proc.returncode == 0, proc.stderr
    placed = tmp_path / "home" / "stark" / "prime"  # stark-qa's load_skb / load_qa layout, in the instance
    assert (placed / "processed" / "node_info.pkl").is_file() and (placed / "split" / "test.index").is_file()
    assert not [p for p in placed.iterdir() if p.name.startswith(".")]  # no temporary folder left
    assert "verified: 6 processed files, 4 questions (train 1, val 1, test 1, test-human 1)" in proc.stdout
    assert "skb: 6 nodes, 5 edges" in proc.stdout and "queries: 4" in proc.stdout

    from grasp_core.artifacts import Artifacts
    from grasp_core.skb.format import read_skb

    art = Artifacts.for_dataset("prime", tmp_path / "artifacts")
    skb = read_skb(art.require("skb"), queries_file=art.require("queries") / "queries.parquet")
    assert "TP53" in skb.nodes["name"].tolist()
    assert set(skb.queries["split"]) == {"train", "val", "test", "test-human"}


def test_without_the_hub_fetch_fails_in_one_line_naming_the_files_and_where_to_put_them(tmp_path):
    proc = grasp(tmp_path, "data", "fetch", "prime")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    line, placed = lines[0], tmp_path / "home" / "stark" / "prime"
    assert line.startswith("error: cannot download STaRK from the Hugging Face hub (HF_HUB_OFFLINE is set")
    assert f"download {hub_url('skb/prime/processed.zip')} and unzip it in {placed}/" in line
    assert f"{hub_url('qa/prime')}/{{{','.join(QA_FILES)}}} into {placed}/" in line
    assert "$GRASP_STARK_ROOT" in line and "`grasp data build prime`" in line
    assert not placed.exists() and not (tmp_path / "artifacts").exists()


def test_files_already_in_place_are_not_downloaded(tmp_path, monkeypatch):
    import grasp_core.sources.stark_fetch as stark_fetch

    def no_download(file, manual):
        raise AssertionError(f"downloaded {file}")

    monkeypatch.setattr(stark_fetch, "_download", no_download)
    write_prime(tmp_path / "hf-layout" / "skb" / "prime")  # the hub's own layout, unzipped in place
    write_prime_qa(tmp_path / "github" / "primekg")  # the STaRK repository's layout
    logged: list[str] = []
    dirs = fetch_stark("prime", tmp_path / "hf-layout", tmp_path / "github", log=logged.append)
    assert dirs == (tmp_path / "hf-layout" / "skb" / "prime", tmp_path / "github" / "primekg")
    assert any("processed files are in place" in m for m in logged)


def test_a_corrupt_archive_is_refused_before_anything_is_unzipped(tmp_path, monkeypatch):
    import grasp_core.sources.stark_fetch as stark_fetch

    archive = tmp_path / "processed.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("processed/node_info.pkl", b"x" * 1000)
    data = bytearray(archive.read_bytes())
    data[data.index(b"x" * 1000) + 500] ^= 1  # one flipped bit in the member's bytes
    archive.write_bytes(bytes(data))
    write_prime_qa(tmp_path / "root" / "prime")
    monkeypatch.setattr(stark_fetch, "_download", lambda file, manual: archive)
    with pytest.raises(GraspError, match=r"member processed/node_info\.pkl fails its CRC check"):
        fetch_stark("prime", tmp_path / "root", tmp_path / "root")
    assert not (tmp_path / "root" / "prime" / "processed").exists()


def test_an_archive_without_the_loaders_files_is_named(tmp_path, monkeypatch):
    import grasp_core.sources.stark_fetch as stark_fetch

    archive = tmp_path / "processed.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("processed/node_info.pkl", b"")
    write_prime_qa(tmp_path / "root" / "prime")
    monkeypatch.setattr(stark_fetch, "_download", lambda file, manual: archive)
    with pytest.raises(GraspError, match=r"unzipped into .* without .*edge_index\.pt"):
        fetch_stark("prime", tmp_path / "root", tmp_path / "root")


def _assignments(file: Path) -> dict:
    """The module-level constants (``NAME = {...}``) of a stark-qa source file, read without importing it."""
    out = {}
    for node in ast.parse(file.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out


@pytest.mark.parametrize("name", ["amazon", "mag", "prime"])
def test_the_names_are_stark_qas(name):
    """The repository, archive and QA paths are those of the installed stark-qa (importing it takes most of a
    minute, so its sources are read)."""
    spec = importlib.util.find_spec("stark_qa")
    assert spec is not None and spec.origin is not None
    package = Path(spec.origin).parent
    dataset = _assignments(package / "skb" / f"{name}.py")["DATASET"]
    assert dataset["repo"] == REPO and dataset["processed"] == processed_file(name)
    assert _assignments(package / "retrieval" / "dataset.py")["STARK_QA_DATASET"] == {
        "repo": REPO,
        "folder": QA_FOLDER,
    }
    qa_source = (package / "retrieval" / "dataset.py").read_text()
    for part in ("'split'", "'stark_qa'", "'stark_qa_human_generated_eval.csv'", "'stark_qa.csv'", "'train', 'val'"):
        assert part in qa_source

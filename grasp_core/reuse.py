"""Reuse by content: an artifact whose inputs, code and settings equal an existing one's is linked, not rebuilt.

An artifact is a function of its asset and round, the library code its step runs, the content digests of the
artifacts it reads, its base dataset (and, for the SKB, its source's fingerprint) — together its *family* key,
known before the step runs — and of the settings its step reads. The index ``<root>/.reuse/<family>.json`` lists
the partitions holding an artifact of that family, each with its manifest digest (the content's name), the step's
result (the materialization's metadata) and the settings the step *read when it ran* (section -> hash of its
values)::

    {"asset": "reranker", "round": null, "dataset": "hpo", "code": "…", "inputs": {…},
     "holders": [{"partition": "hpo", "digest": "…", "reads": {"rerank": "…", …}, "code_version": "…",
                  "result": {…}}, …]}

A step finds a holder whose read settings all have the values of its own partition's profile: it would compute
the same artifact, so the holder's files are hard-linked into place (:func:`grasp_core.io.link_dir`): stored once,
byte-identical, the same data version. The settings read when the step ran are a subset of those its ``@step``
declares (what Dagster's code version hashes): a planner-training step declares ``rerank`` (its answer path can
rerank) but never reads it, since it trains on the fused list, so a variant that changes only the reranker's K
reuses it. A holder is trusted only when its manifest still has the recorded digest and its files verify. An
artifact built before the index existed is found in the base dataset's own partition by its manifest: the same code
version (every declared setting equal) and inputs.

Deleting a variant (:func:`collect`, ``grasp gc``) removes its directory and its index entries; a file another
partition links to stays on disk for it, so only what no other variant uses is freed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grasp_core import manifest
from grasp_core.errors import CorruptArtifactError, GraspError
from grasp_core.io import atomic_file, link_dir, read_json

INDEX = ".reuse"
SOURCE_INPUT = "skb_source"  # the input label of the dataset's source fingerprint (the SKB's own input)


def family_key(asset: str, round_key: str | None, code: str, inputs: Mapping[str, str], dataset: str) -> str:
    """The key of the artifacts that differ only in the settings their step reads (32 hex digits): its asset, round,
    library code digest, input digests and base dataset."""
    what = {"asset": asset, "round": round_key, "code": code, "inputs": dict(inputs), "dataset": dataset}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:32]


def settings_hash(values: Any) -> str:
    """The hash of one profile section's values (plain data, as :func:`grasp_core.pipeline.step.section_values`)."""
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Found:
    partition: str  # the partition key holding it
    path: Path  # its directory
    digest: str
    result: dict  # the step's result when it was built (empty for an artifact found by its manifest alone)
    reads: dict[str, str] | None  # the settings its step read (section -> hash); None: found by its manifest alone


def _index_file(root: Path, key: str) -> Path:
    return Path(root) / INDEX / f"{key}.json"


def _entry(root: Path, key: str) -> dict | None:
    try:
        return read_json(_index_file(root, key))
    except (OSError, ValueError):
        return None


def find(
    root: str | os.PathLike,
    key: str,
    path_of: Callable[[str], Path],
    *,
    dataset: str,
    section_hash: Callable[[str], str],
    code_version: str,
    inputs: Mapping[str, str],
    legacy_ok: Callable[[manifest.Manifest], bool] | None = None,
) -> Found | None:
    """An intact artifact of the family ``key`` this step would build: a holder of the index whose read settings
    all hash as ``section_hash`` does for this step's profile (``path_of(partition)`` is its directory), else the
    base dataset's own artifact when its manifest records this ``code_version`` and these inputs (``legacy_ok``
    decides on one that predates the source input)."""
    root = Path(root)
    entry = _entry(root, key) or {"holders": []}
    candidates = [
        (h["partition"], h["digest"], h.get("reads", {}), _decode(h.get("result", {})))
        for h in entry["holders"]
        if all(section_hash(section) == value for section, value in h.get("reads", {}).items())
    ]
    if not any(p == dataset for p, *_ in candidates):
        candidates.append((dataset, None, None, {}))
    for partition, digest, reads, result in candidates:
        path = path_of(partition)
        found = manifest.read(path)
        if found is None or (digest is not None and found.digest != digest):
            continue
        if digest is None and not _same_build(found, code_version, inputs, legacy_ok):
            continue
        try:
            manifest.verify(path, deep=True)
        except CorruptArtifactError:
            continue
        return Found(partition, path, found.digest, result, reads)
    return None


def _same_build(
    found: manifest.Manifest,
    code_version: str,
    inputs: Mapping[str, str],
    legacy_ok: Callable[[manifest.Manifest], bool] | None,
) -> bool:
    """An artifact found by its manifest alone was built by this code from these inputs. One written before the
    source's fingerprint was an input has every other input; ``legacy_ok`` then says whether its source was this."""
    if found.code_version != code_version:
        return False
    if dict(found.inputs) == dict(inputs):
        return True
    rest = {k: v for k, v in inputs.items() if k != SOURCE_INPUT}
    return SOURCE_INPUT in inputs and dict(found.inputs) == rest and legacy_ok is not None and legacy_ok(found)


def record(
    root: str | os.PathLike,
    key: str,
    *,
    partition: str,
    asset: str,
    round_key: str | None,
    dataset: str,
    code: str,
    code_version: str,
    inputs: Mapping[str, str],
    digest: str,
    reads: Mapping[str, str],
    result: Mapping[str, Any],
) -> None:
    """Record that ``partition`` holds the artifact of family ``key`` built reading the settings ``reads`` (section
    -> hash), replacing the partition's earlier record of that family."""
    root = Path(root)
    entry = _entry(root, key) or {
        "asset": asset,
        "round": round_key,
        "dataset": dataset,
        "code": code,
        "inputs": dict(inputs),
        "holders": [],
    }
    holder = {
        "partition": partition,
        "digest": digest,
        "code_version": code_version,
        "reads": dict(sorted(reads.items())),
        "result": _encode(result),
    }
    entry["holders"] = [h for h in entry["holders"] if h["partition"] != partition] + [holder]
    file = _index_file(root, key)
    file.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(file) as handle:
        json.dump(entry, handle, indent=1, sort_keys=True, default=_json_default)


def materialize(found: Found, path: str | os.PathLike) -> None:
    """Put the artifact ``found`` at ``path`` (hard links; nothing to do when it is already there)."""
    if Path(path).resolve() != found.path.resolve():
        link_dir(found.path, path)


def _encode(result: Mapping[str, Any]) -> dict:
    """A step's result as JSON (bytes, e.g. plots, in base64)."""
    return {k: {"__bytes__": base64.b64encode(v).decode()} if isinstance(v, bytes) else v for k, v in result.items()}


def _decode(result: Mapping[str, Any]) -> dict:
    return {
        k: base64.b64decode(v["__bytes__"]) if isinstance(v, dict) and set(v) == {"__bytes__"} else v
        for k, v in result.items()
    }


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


@dataclass(frozen=True)
class Collected:
    partition: str
    artifacts: int
    files: int
    freed: int  # bytes of the files no other partition links to
    shared: int  # bytes of the files that stay, linked from another partition
    index_entries: int


def collect(root: str | os.PathLike, partition: str) -> Collected:
    """Delete the partition's artifact directory, its served releases (:mod:`grasp_core.releases`) and its index
    records: frees the files no other partition links to (a hard-linked file stays for the partitions that hold
    it)."""
    from grasp_core.releases import releases_dir

    root = Path(root)
    directory = root / partition
    if not directory.is_dir():
        raise GraspError(f"no artifacts of {partition!r} under {root}")
    gone = [d for d in (directory, releases_dir(partition, root)) if d.is_dir()]
    artifacts = sum(1 for m in directory.rglob(manifest.MANIFEST_FILE))
    inodes: dict[tuple[int, int], list[int]] = {}  # (device, inode) -> [size, links, links found here]
    files = 0
    for where in gone:
        for dirpath, _, filenames in os.walk(where):
            for name in filenames:
                stat = os.lstat(os.path.join(dirpath, name))
                files += where == directory
                found = inodes.setdefault((stat.st_dev, stat.st_ino), [stat.st_size, stat.st_nlink, 0])
                found[2] += 1
    freed = sum(size for size, links, here in inodes.values() if here >= links)
    shared = sum(size for size, links, here in inodes.values() if here < links)
    entries = 0
    for file in sorted((root / INDEX).glob("*.json")) if (root / INDEX).is_dir() else []:
        entry = _entry(root, file.stem)
        if entry is None or not any(h["partition"] == partition for h in entry["holders"]):
            continue
        entries += 1
        entry["holders"] = [h for h in entry["holders"] if h["partition"] != partition]
        if entry["holders"]:
            with atomic_file(file) as handle:
                json.dump(entry, handle, indent=1, sort_keys=True)
        else:
            file.unlink(missing_ok=True)
    for where in gone:
        shutil.rmtree(where)
    return Collected(partition, artifacts, files, freed, shared, entries)

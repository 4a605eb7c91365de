"""An artifact's manifest: what it holds, what built it, and the one string that identifies its content.

Every artifact directory written with :func:`grasp_core.io.atomic_dir` is sealed by a manifest,
``_MANIFEST.json``, written last (it is the completion marker: a directory without one was never finished)::

    {"format": 1, "hash": "xxh3_128",
     "files": {"nodes.parquet": {"size": 1234, "hash": "9f…"}, "sub/x.npy": {...}},   # every file, relative
     "code_version": "3e1f…",            # the asset's code version ("" when written outside Dagster)
     "inputs": {"skb": "<digest>", …},   # the digests of the artifacts it was built from
     "digest": "<32 hex>"}

API (stable; :mod:`grasp_assets` builds data versions and staleness on it):

- :func:`write` ``(path, code_version="", inputs=None) -> Manifest`` hashes every file under ``path`` and
  (re)writes its manifest atomically. ``atomic_dir`` calls it with no provenance when a directory completes;
  the asset layer calls it again after its step with the asset's code version and its inputs' digests.
- :func:`read` ``(path) -> Manifest | None``: the manifest, or None when there is none or it is unreadable.
- :attr:`Manifest.digest`: a stable string over the files' names, sizes and hashes only (not the code version
  nor the inputs), so an identical rebuild has the same digest; it is the asset's Dagster data version.
- :func:`verify` ``(path, deep=False) -> Manifest`` checks that every listed file exists with its size and,
  with ``deep``, its hash; a mismatch raises a one-line :class:`~grasp_core.errors.CorruptArtifactError`
  naming the file. A deep check of one unchanged manifest is done once per process (then cached).

The hash is xxHash's XXH3-128 (:mod:`xxhash`): several times faster than BLAKE2b and SHA-256
(``benchmarks/results/incremental_embeddings.json``, ``hash_gbps``), which keeps a deep check of everything a
cold ``grasp query`` loads small. It detects corruption, not tampering.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import xxhash

from grasp_core.errors import CorruptArtifactError

MANIFEST_FILE = "_MANIFEST.json"
FORMAT = 1
HASH = "xxh3_128"
_BLOCK = 1 << 22  # 4 MiB reads


@dataclass(frozen=True)
class FileEntry:
    size: int
    hash: str


@dataclass(frozen=True)
class Manifest:
    files: Mapping[str, FileEntry]  # path relative to the artifact directory (POSIX separators) -> entry
    code_version: str = ""
    inputs: Mapping[str, str] = field(default_factory=dict)  # input artifact name -> its digest

    @property
    def digest(self) -> str:
        """The content's identity: XXH3-128 over the sorted (name, size, hash) of every file."""
        h = xxhash.xxh3_128()
        for name in sorted(self.files):
            entry = self.files[name]
            h.update(f"{name}\0{entry.size}\0{entry.hash}\n".encode())
        return h.hexdigest()

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "hash": HASH,
            "files": {name: {"size": e.size, "hash": e.hash} for name, e in sorted(self.files.items())},
            "code_version": self.code_version,
            "inputs": dict(sorted(self.inputs.items())),
            "digest": self.digest,
        }

    @classmethod
    def from_json(cls, data: dict) -> Manifest:
        if data.get("format") != FORMAT or data.get("hash") != HASH:
            raise ValueError(f"manifest format {data.get('format')!r}/{data.get('hash')!r} is not {FORMAT}/{HASH}")
        files = {str(k): FileEntry(int(v["size"]), str(v["hash"])) for k, v in data["files"].items()}
        manifest = cls(files, str(data.get("code_version", "")), {str(k): str(v) for k, v in data["inputs"].items()})
        if manifest.digest != data.get("digest"):
            raise ValueError("its digest does not match its file list")
        return manifest


def file_hash(file: str | os.PathLike) -> str:
    """XXH3-128 of a file's bytes, as 32 hex digits."""
    h = xxhash.xxh3_128()
    buffer = bytearray(_BLOCK)
    view = memoryview(buffer)
    with open(file, "rb", buffering=0) as handle:
        while n := handle.readinto(buffer):
            h.update(view[:n])
    return h.hexdigest()


def _files(path: Path) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in filenames:
            rel = Path(dirpath, name).relative_to(path).as_posix()
            if rel != MANIFEST_FILE:
                found.append(rel)
    return sorted(found)


def write(path: str | os.PathLike, code_version: str = "", inputs: Mapping[str, str] | None = None) -> Manifest:
    """Hash every file under the directory ``path`` and write its manifest (atomically, last)."""
    path = Path(path)
    files = {}
    for rel in _files(path):
        file = path / rel
        files[rel] = FileEntry(file.stat().st_size, file_hash(file))
    manifest = Manifest(files, code_version, dict(inputs or {}))
    tmp = path / f".{MANIFEST_FILE}.tmp-{uuid.uuid4().hex[:8]}"
    with open(tmp, "w") as handle:
        json.dump(manifest.to_json(), handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path / MANIFEST_FILE)
    _VERIFIED.add((str(path.resolve()), manifest.digest))  # just hashed: no need to hash again on read
    return manifest


def read(path: str | os.PathLike) -> Manifest | None:
    """The manifest of the directory ``path``; None when it has none or it cannot be read."""
    try:
        with open(Path(path) / MANIFEST_FILE) as handle:
            return Manifest.from_json(json.load(handle))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


_VERIFIED: set[tuple[str, str]] = set()  # (resolved directory, digest) deep-verified by this process


def verify(path: str | os.PathLike, deep: bool = False) -> Manifest:
    """Check the directory ``path`` against its manifest: every listed file present with its size, and with
    ``deep`` its content hash (once per process per manifest). Raises a one-line CorruptArtifactError."""
    path = Path(path)
    manifest = read(path)
    if manifest is None:
        state = "unreadable" if (path / MANIFEST_FILE).exists() else "missing"
        raise CorruptArtifactError(f"{path}: its manifest {MANIFEST_FILE} is {state}")
    for rel, entry in manifest.files.items():
        try:
            size = (path / rel).stat().st_size
        except OSError:
            raise CorruptArtifactError(f"{path / rel}: missing (listed in its manifest)") from None
        if size != entry.size:
            raise CorruptArtifactError(f"{path / rel}: {size} bytes, its manifest says {entry.size} (truncated?)")
    key = (str(path.resolve()), manifest.digest)
    if deep and key not in _VERIFIED:
        for rel, entry in manifest.files.items():
            if file_hash(path / rel) != entry.hash:
                raise CorruptArtifactError(f"{path / rel}: content differs from its manifest (corrupted)")
        _VERIFIED.add(key)
    return manifest

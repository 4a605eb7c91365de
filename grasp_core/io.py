"""Crash-safe writes: every artifact is written under a temporary name and renamed into place.

A reader never sees a half-written file or directory: either the old version or the new one.
A directory artifact is complete only when its manifest (:mod:`grasp_core.manifest`: every file with its size
and content hash) has been written into it, last; ``is_complete`` is how later steps decide whether to trust a
directory left by an interrupted run, :func:`grasp_core.manifest.verify` whether its files are still intact. The ``.<name>.tmp-*`` and
``.<name>.old-*`` leftovers of a killed write are removed by the next write of the same path.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from grasp_core import manifest
from grasp_core.manifest import MANIFEST_FILE


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a fresh temporary directory next to ``path``; on success it replaces ``path``.

    On an exception the temporary directory is removed and ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(path)
    tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        yield tmp
        manifest.write(tmp)
        _swap_in(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _swap_in(tmp: Path, path: Path) -> None:
    """Put the finished directory ``tmp`` at ``path``: the old copy is renamed aside first and deleted after, so a
    crash leaves either the old or the new one in place (and :func:`remove_leftovers` the rest)."""
    old = None
    if path.exists():
        old = path.parent / f".{path.name}.old-{uuid.uuid4().hex[:8]}"
        path.rename(old)
    tmp.rename(path)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def remove_leftovers(path: str | os.PathLike) -> list[Path]:
    """Delete the temporary and replaced copies of ``path`` that a killed write left behind; returns them.

    Only call it before writing ``path`` (its writer holds the path: concurrent writers of one artifact
    are excluded by the orchestrator).
    """
    path = Path(path)
    found = [
        p
        for p in path.parent.glob(f".{glob.escape(path.name)}.*-*")
        if _LEFTOVER.fullmatch(p.name[len(path.name) + 1 :])
    ]
    for p in found:
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    return found


_LEFTOVER = re.compile(r"\.(tmp|old)-[0-9a-f]{8}")


def check_writable(path: str | os.PathLike) -> Path:
    """``path`` when a file can be written there, else a one-line :class:`GraspError` (checked before any work)."""
    from grasp_core.errors import GraspError

    path = Path(path)
    if path.is_dir():
        raise GraspError(f"{path} is a directory: give a file name for the output")
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise GraspError(f"cannot write {path}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise GraspError(f"cannot write {path}: no write permission in {parent}")
    return path


def withdraw(path: str | os.PathLike) -> None:
    """Mark a written directory incomplete again (its checks failed): no later step trusts it, the next run
    rebuilds it."""
    (Path(path) / MANIFEST_FILE).unlink(missing_ok=True)


def is_complete(path: str | os.PathLike) -> bool:
    """True when ``path`` is a directory written to the end by :func:`atomic_dir` (it has its manifest)."""
    return (Path(path) / MANIFEST_FILE).exists()


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "w") -> Iterator[Any]:
    """Open a temporary file next to ``path``; on success it is fsynced and renamed onto ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        with open(tmp, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json(path: str | os.PathLike, obj: Any) -> None:
    with atomic_file(path) as handle:
        json.dump(obj, handle, indent=2, sort_keys=True, default=str)


def read_json(path: str | os.PathLike) -> Any:
    with open(path) as handle:
        return json.load(handle)


def read_package_json(package: str, name: str) -> Any:
    """The JSON file ``data/<name>`` shipped in ``package`` (package data, declared in ``pyproject.toml``), every
    list read as a tuple: the word and phrase tables of the synthetic SKBs and of question synthesis, read-only."""
    return _tuples(json.loads(resources.files(package).joinpath("data", name).read_text(encoding="utf-8")))


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    return value


def link_dir(src: str | os.PathLike, path: str | os.PathLike) -> Path:
    """Put a copy of the complete artifact directory ``src`` at ``path`` atomically, every file of its manifest
    hard-linked (stored once, shared; a file on another filesystem is copied) and the manifest copied last, as
    :func:`atomic_dir` writes a directory: a reader sees the old ``path`` or the whole new one."""
    src, path = Path(src), Path(path)
    found = manifest.read(src)
    if found is None:
        raise FileNotFoundError(f"{src} is not a complete artifact (no readable {MANIFEST_FILE})")
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(path)
    tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        for rel in found.files:
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src / rel, target)
            except OSError:  # another filesystem, or links not allowed: a copy
                shutil.copy2(src / rel, target)
        shutil.copy2(src / MANIFEST_FILE, tmp / MANIFEST_FILE)
        _swap_in(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path

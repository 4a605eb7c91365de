"""Crash-safe writes: every artifact is written under a temporary name and renamed into place.

A reader never sees a half-written file or directory: either the old version or the new one.
A directory artifact is complete only when its ``_COMPLETE`` marker exists; ``is_complete`` is how
later steps decide whether to trust a directory left by an interrupted run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

COMPLETE_MARKER = "_COMPLETE"


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a fresh temporary directory next to ``path``; on success it replaces ``path``.

    On an exception the temporary directory is removed and ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        yield tmp
        (tmp / COMPLETE_MARKER).write_text("")
        old = None
        if path.exists():
            old = path.parent / f".{path.name}.old-{uuid.uuid4().hex[:8]}"
            path.rename(old)
        tmp.rename(path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def is_complete(path: str | os.PathLike) -> bool:
    """True when ``path`` is a directory written to the end by :func:`atomic_dir`."""
    return (Path(path) / COMPLETE_MARKER).exists()


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

"""Releases: the artifacts `grasp query`, `grasp serve`, `grasp retrieve` and the integrations answer with.

A build ends with the ``release`` asset (:mod:`grasp_core.pipeline.release`): it answers the same questions with
what the build just trained (the candidate) and with the release being served, and promotes the candidate only when
it is not worse than the served one beyond
:attr:`~grasp_core.retrain_config.RetrainConfig.guard_tolerance` on either set (the promotion guard). The first
build of a partition is promoted as it is. A refused candidate stays in the build's own
directories (inspect it, compare it); the served release keeps answering.

A release is a copy of every artifact of the partition with its files hard-linked (stored once: a build that
rebuilds an artifact writes a new directory and renames it into place, so the release keeps the files it had).
Layout under the artifact root::

    .releases/<partition>/<n>/<asset>[/<round>]/…   the artifacts of release n
    .releases/<partition>/served.json               {"release": n, "promoted_at", "metrics", "previous"}

``served.json`` is replaced atomically, so a reader sees one release or the next, never a mix. The newest
:data:`KEEP` releases are kept (the served one always).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from grasp_core.artifacts import Artifacts, default_root
from grasp_core.experiments import artifacts_for, split_key
from grasp_core.io import link_dir, read_json, write_json

RELEASES = ".releases"
SERVED_FILE = "served.json"
KEEP = 3
RELEASE = "release"  # the asset that promotes (its own artifact is not part of a release)


@dataclass(frozen=True)
class ReleaseArtifacts(Artifacts):
    """The artifacts of release ``number`` of partition ``key`` (``dataset`` is its base dataset, as the steps
    read it)."""

    key: str = ""
    number: int = 0

    @property
    def home(self) -> Path:
        return self.root / RELEASES / self.key / str(self.number)

    def path(self, name: str, round_key: str | None = None) -> Path:
        base = self.home / name
        return base / round_key if round_key else base

    def built(self) -> list[tuple[str, str | None]]:
        return Artifacts(str(self.number), self.home.parent).built()


def releases_dir(key: str, root: str | Path | None = None) -> Path:
    return Path(root if root is not None else default_root()) / RELEASES / key


def served_record(key: str, root: str | Path | None = None) -> dict[str, Any] | None:
    """The served release's record (``served.json``), or None before the first promotion."""
    path = releases_dir(key, root) / SERVED_FILE
    return read_json(path) if path.exists() else None


def served_artifacts(key: str, root: str | Path | None = None) -> Artifacts:
    """What serving answers with for a partition key: its served release, or (before the first promotion, and for
    a build run by hand without the ``release`` asset) the partition's own artifacts."""
    record = served_record(key, root)
    if record is None:
        return artifacts_for(key, root)
    return ReleaseArtifacts(
        split_key(key)[0], Path(root if root is not None else default_root()), key=key, number=int(record["release"])
    )


def promote(art: Artifacts, key: str, metrics: dict[str, Any]) -> int:
    """Make the artifacts of ``art`` (partition ``key``) the served release: link them into a new release
    directory, then switch ``served.json`` to it. Returns the new release's number."""
    home = releases_dir(key, art.root)
    numbers = sorted(int(p.name) for p in home.iterdir() if p.name.isdigit()) if home.is_dir() else []
    number = (numbers[-1] + 1) if numbers else 1
    release = ReleaseArtifacts(art.dataset, art.root, key=key, number=number)
    for name, round_key in art.built():
        if name != RELEASE:
            link_dir(art.path(name, round_key), release.path(name, round_key))
    previous = served_record(key, art.root)
    write_json(
        home / SERVED_FILE,
        {
            "release": number,
            "promoted_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "metrics": metrics,
            "previous": previous["release"] if previous else None,
        },
    )
    for old in numbers[: max(0, len(numbers) + 1 - KEEP)]:
        shutil.rmtree(home / str(old), ignore_errors=True)
    return number

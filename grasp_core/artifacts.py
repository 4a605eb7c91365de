"""Where a dataset's artifacts live on disk, the same for Dagster assets and plain Python use.

``<root>/<dataset>/<artifact>[/<round>]``; the default root is ``$GRASP_HOME``, else ``artifacts/`` in
:func:`grasp_core.home.grasp_home` (``$DAGSTER_HOME`` or the checkout's ``dagster_home``). Every artifact directory is written with
:func:`grasp_core.io.atomic_dir`, so a directory without its completion marker is never trusted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grasp_core import manifest
from grasp_core.environment import env
from grasp_core.errors import CorruptArtifactError, GraspError, MissingArtifactError
from grasp_core.home import grasp_home
from grasp_core.io import is_complete


def default_root() -> Path:
    return Path(root) if (root := env("GRASP_HOME")) else grasp_home() / "artifacts"


@dataclass(frozen=True)
class Artifacts:
    """A dataset's artifact directories. ``readable`` (None: all) restricts :meth:`require` to the artifacts a
    running step declared it reads, so an undeclared read fails instead of silently depending on it."""

    dataset: str
    root: Path = field(default_factory=default_root)
    readable: frozenset[str] | None = None

    @classmethod
    def for_dataset(cls, dataset: str, root: str | Path | None = None) -> Artifacts:
        return cls(dataset, Path(root) if root is not None else default_root())

    def path(self, name: str, round_key: str | None = None) -> Path:
        base = self.root / self.dataset / name
        return base / round_key if round_key else base

    def require(self, name: str, round_key: str | None = None) -> Path:
        """Path of a finished, intact artifact, or a one-line error saying how to (re)build it.

        Intact: every file of its manifest has its size (checked on every call) and its content hash (checked
        once per process, :func:`grasp_core.manifest.verify`)."""
        if self.readable is not None and name not in self.readable:
            raise GraspError(f"this step reads {name!r}, which its asset does not declare: add it to the asset's deps")
        p = self.path(name, round_key)
        if not is_complete(p):
            what = name if round_key is None else f"{name} (round {round_key})"
            state = "was left incomplete by an interrupted run" if p.exists() else "has not been built yet"
            raise MissingArtifactError(
                f"{what} for dataset {self.dataset!r} {state} at {p}. "
                f"Materialize it first, e.g. `grasp pipeline {self.dataset}` or "
                f"`dagster asset materialize -m grasp_assets.definitions --select {name} --partition {self.dataset}`."
            )
        self.verify(name, round_key)
        return p

    def verify(self, name: str, round_key: str | None = None, deep: bool = True) -> manifest.Manifest:
        """The manifest of a finished artifact whose files are intact, else a one-line CorruptArtifactError naming
        the artifact and the command that rebuilds it."""
        try:
            return manifest.verify(self.path(name, round_key), deep=deep)
        except CorruptArtifactError as exc:
            raise self.corrupt(name, round_key, str(exc)) from None

    def corrupt(self, name: str, round_key: str | None, problem: str) -> CorruptArtifactError:
        """The error for an artifact that cannot be trusted: what is wrong and the command that rebuilds it."""
        what = name if round_key is None else f"{name} (round {round_key})"
        return CorruptArtifactError(
            f"artifact {what} of dataset {self.dataset!r} is corrupt: {problem}; rebuild it: grasp pipeline {self.dataset}"
        )

    def built(self) -> list[tuple[str, str | None]]:
        """Every artifact of the dataset that has a manifest, as (name, round or None), in name order."""
        base = self.root / self.dataset
        found: list[tuple[str, str | None]] = []
        for d in (
            sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")) if base.is_dir() else []
        ):
            if is_complete(d):
                found.append((d.name, None))
            found += [(d.name, r.name) for r in sorted(d.iterdir()) if r.name.isdigit() and is_complete(r)]
        return found

    @property
    def skb(self) -> Path:
        return self.path("skb")

"""Errors a user can act on. Each message says what is wrong and, where possible, what to do."""

from __future__ import annotations


class GraspError(Exception):
    """Base class for every error this library raises on purpose."""


class SKBFormatError(GraspError):
    """A malformed SKB on disk: names the file, the row (when there is one) and the problem."""

    def __init__(self, file: str, problem: str, row: int | None = None):
        self.file, self.problem, self.row = file, problem, row
        where = f"{file}" if row is None else f"{file}, row {row}"
        super().__init__(f"{where}: {problem}")


class UnknownDatasetError(GraspError):
    pass


class MissingArtifactError(GraspError):
    """An artifact a step needs has not been built yet (or was left incomplete by a crash)."""


class MissingModelError(GraspError):
    """A model path in the configuration does not exist; the message names the setting."""

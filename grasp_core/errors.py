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


class CorruptArtifactError(GraspError):
    """An artifact exists but cannot be read (truncated, wrong shape, unreadable); the message says which file."""


class PlanError(GraspError):
    """An unusable plan. ``reason`` is a short stable code (``json``, ``schema``, ``unknown_type``, …)
    that traces, rewards and metrics group by; the message says what exactly is wrong."""

    def __init__(self, reason: str, message: str = ""):
        self.reason, self.message = reason, message
        super().__init__(f"{reason}: {message}" if message else reason)


class GraphStoreError(GraspError):
    """The graph store cannot be built, opened or queried (bad path, unreachable server, failed query)."""


class ExtractionError(GraspError):
    """An LLM's entity-extraction output that cannot be read; ``reason`` says why (the query then falls back)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class LLMEndpointError(GraspError):
    """An LLM HTTP endpoint is unreachable or answers with an error; the message names the URL."""

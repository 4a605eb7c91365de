"""Profiles are data: the `cpu` profile (offline default, runs on 2 cores) and the `gpu` profile (the paper)."""

from __future__ import annotations

from dataclasses import dataclass, field

from grasp_core.datasets import DatasetConfig
from grasp_core.errors import GraspError


@dataclass(frozen=True)
class Profile:
    name: str
    dataset: DatasetConfig = field(default_factory=DatasetConfig)


def _cpu() -> Profile:
    return Profile(name="cpu")


def _gpu() -> Profile:
    return Profile(name="gpu", dataset=DatasetConfig(scale="full", n_queries=10000))


PROFILE_NAMES = ("cpu", "gpu")


def get_profile(name: str) -> Profile:
    if name == "cpu":
        return _cpu()
    if name == "gpu":
        return _gpu()
    raise GraspError(f"unknown profile {name!r}: choose one of {PROFILE_NAMES}")

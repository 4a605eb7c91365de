"""What a pipeline step reads, declared once, on the step: ``@step("node_embeddings", reads=("encoder",))``.

``name`` is the artifact the step writes (the asset's name), ``reads`` the sections (fields) of
:class:`grasp_core.profiles.Profile` it reads, directly (``components.profile.rerank``) or through a
:class:`~grasp_core.components.Components` part (``components.executor`` reads ``execution``). The Dagster layer hashes
these values into the asset's code version, and runs the step on a :class:`Components` that refuses any other
section, so a declaration cannot fall behind the code it describes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from grasp_core.home import LOCATION
from grasp_core.profiles import Profile

SECTIONS = frozenset(f.name for f in dataclasses.fields(Profile))
F = TypeVar("F", bound=Callable[..., dict])


@dataclass(frozen=True)
class Step:
    name: str  # the artifact it writes (the asset's name)
    fn: Callable[..., dict]
    reads: frozenset[str]  # the Profile sections it reads


STEPS: dict[str, Step] = {}  # filled by @step as the pipeline modules are imported


def step(name: str, reads: Iterable[str]) -> Callable[[F], F]:
    """Declare ``fn`` the step that writes artifact ``name`` and reads the profile sections ``reads``."""
    if isinstance(reads, str):
        raise TypeError(f"step {name!r}: reads is a tuple of section names, e.g. ({reads!r},)")
    sections = frozenset(reads)
    if unknown := sections - SECTIONS:
        raise TypeError(f"step {name!r} declares unknown profile sections {sorted(unknown)}")

    def declare(fn: F) -> F:
        STEPS[name] = Step(name, fn, sections)
        return fn

    return declare


def section_values(profile: Profile, sections: Iterable[str]) -> dict:
    """The values of ``sections`` of ``profile``, as plain data (for code versions and MLflow params), without the
    fields marked :data:`LOCATION`: where a source lies (it differs between a checkout and an installed image) is
    not a setting of what is built; the source's files are fingerprinted instead (``skb_source``)."""
    out = {}
    for section in sorted(sections):
        value = getattr(profile, section)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            plain = dataclasses.asdict(value)
            for f in dataclasses.fields(value):
                if f.metadata.get(LOCATION):
                    del plain[f.name]
            value = plain
        out[section] = value
    return out

"""The promotion guard: a build's artifacts are served only when they answer at least as well as the served release.

Both systems answer the same questions through the whole answer path (text branch, planner, reranker, as served):
the first :attr:`~grasp_core.retrain_config.RetrainConfig.guard_queries` val questions and the held-out ``feedback``
questions (:mod:`grasp_core.questions.feedback_queries`), both never trained on. The candidate is promoted when its
Hit@1 is not below the served release's by more than ``guard_tolerance`` points on either set; otherwise the served
release stays, and the ``release`` asset's blocking check says why. The first build is promoted as it is, and so is
a build of a changed knowledge base (the served release answers from the old one) or one whose served release can
no longer answer (damaged files).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grasp_core import manifest
from grasp_core.answer import AnswerOptions, AnswerPath
from grasp_core.artifacts import Artifacts
from grasp_core.components import EXECUTOR, EXTRACTOR, FUSED_TEXT, PLANNER, RERANKER, Components
from grasp_core.errors import GraspError
from grasp_core.experiments import partition_of
from grasp_core.io import atomic_dir, write_json
from grasp_core.pipeline.step import step
from grasp_core.questions.feedback_queries import FEEDBACK_SPLIT
from grasp_core.releases import RELEASE, promote, served_artifacts, served_record

DECISION_FILE = "decision.json"


def _digest(art: Artifacts, name: str) -> str | None:
    found = manifest.read(art.path(name))
    return found.digest if found is not None else None


def guard_questions(components: Components) -> dict[str, tuple[list[str], list[list[int]]]]:
    """The guard's question sets (name -> questions, gold answers): ``val`` (its first ``guard_queries``) and
    ``feedback`` where the dataset has held-out feedback."""
    out = {}
    for name, frame in (
        ("val", components.split("val").head(components.profile.retrain.guard_queries)),
        (FEEDBACK_SPLIT, components.split(FEEDBACK_SPLIT)),
    ):
        if len(frame):
            out[name] = (frame["query"].tolist(), [list(map(int, a)) for a in frame["answer_ids"]])
    return out


def hit1(components: Components, questions: dict[str, tuple[list[str], list[list[int]]]]) -> dict[str, float]:
    """Hit@1 (%) of the system of ``components`` on each question set, answered as served."""
    path = AnswerPath(components, AnswerOptions())
    out = {}
    for name, (queries, gold) in questions.items():
        final = path.answer(queries).final
        out[name] = round(100.0 * float(np.mean([r.rank_of(g) == 1 for r, g in zip(final, gold)])), 2)
    return out


def decide(candidate: dict[str, float], served: dict[str, float] | None, tolerance: float) -> tuple[bool, str]:
    """Whether to promote, and why, in one line."""
    if served is None:
        return True, "first release of this partition"
    shared = [s for s in candidate if s in served]
    points = f"{tolerance:g} point" + ("" if tolerance == 1 else "s")
    worse = [f"{s} {served[s]:.1f} -> {candidate[s]:.1f}" for s in shared if candidate[s] < served[s] - tolerance]
    if worse:
        return False, f"kept the served release: Hit@1 fell by more than {points} on " + "; ".join(worse)
    pairs = ", ".join(f"{s} {served[s]:.1f} -> {candidate[s]:.1f}" for s in shared)
    return True, f"not worse than the served release beyond {points} ({pairs})"


@step(
    "release",
    reads=(
        *EXECUTOR,
        *EXTRACTOR,
        *PLANNER,
        *FUSED_TEXT,
        *RERANKER,
        "rerank",
        "reranker_candidates",
        "retrain",
        "reward",
    ),
)
def release_step(components: Components) -> dict[str, Any]:
    """Answer the guard's questions with the build and with the served release; promote the build when it is not
    worse (see the module)."""
    key, root = partition_of(components.art), components.art.root
    questions = guard_questions(components)
    after = hit1(components, questions)
    record = served_record(key, root)
    before, why_not = None, None
    if record is not None:
        served = served_artifacts(key, root)
        if _digest(served, "skb") != _digest(components.art, "skb"):
            why_not = f"the knowledge base changed since release {record['release']}: it answers from the old one"
        else:
            served_parts = Components(served, components.profile)
            try:
                before = hit1(served_parts, questions)
            except GraspError as exc:  # a damaged release must not keep a good build from being served
                why_not = f"release {record['release']} cannot answer ({exc})"
            finally:
                served_parts.close()
    if why_not is None:
        promoted, reason = decide(after, before, components.profile.retrain.guard_tolerance)
    else:
        promoted, reason = True, f"promoted without comparing: {why_not}"
    number = promote(components.art, key, after) if promoted else int(record["release"])  # type: ignore[index]
    decision = {
        "promoted": promoted,
        "reason": reason,
        "served_release": number,
        "questions": {s: len(q) for s, (q, _) in questions.items()},
        "hit1_candidate": after,
        "hit1_served_before": before,
    }
    with atomic_dir(components.art.path(RELEASE)) as tmp:
        write_json(tmp / DECISION_FILE, decision)
    flat = {f"{s}_hit1_after": v for s, v in after.items()} | {f"{s}_hit1_before": v for s, v in (before or {}).items()}
    return {
        "promoted": promoted,
        "reason": reason,
        "served_release": number,
        **flat,
        "path": str(components.art.path(RELEASE)),
    }

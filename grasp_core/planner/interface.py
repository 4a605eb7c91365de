"""The two planner kinds (``Profile.planner``) as one interface: what the answer path asks of a planner.

- ``lm``: a language model writes the plan (the paper): :class:`LMPlanner` over a generation backend, greedy
  decoding constrained to the plan grammar, retries when a plan fails (:func:`~grasp_core.planner.lm.generate.plan_queries`);
- ``policy``: the ``cpu`` plan-selection policy picks one of the query's candidate plans
  (:class:`~grasp_core.planner.policy.model.PlanPolicy`).

Both answer :class:`Planner`: ``read`` (the query as this planner reads it, cut to its window) and ``plan``.
:func:`load_planner` loads a checkpoint as the kind the profile names; it never guesses the kind from the
checkpoint. The training side of each kind (base, SFT, sampling, rounds) is in :mod:`grasp_core.pipeline.planner`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from grasp_core.entities.table import EntityTable
from grasp_core.errors import GraspError
from grasp_core.planner.attempt import PlanAttempt
from grasp_core.planner.config import InferenceConfig
from grasp_core.planner.lm.prompt import build_planner_messages
from grasp_core.skb.schema import Schema
from grasp_core.truncation import Cut, planner_cut

PLANNER_KINDS = ("lm", "policy")


class Planner(Protocol):
    def read(self, query: str, table: EntityTable) -> Cut:
        """The query as this planner reads it (its longest prefix that fits the planner's window)."""
        ...

    def plan(self, queries: Sequence[str], tables: Sequence[EntityTable]) -> list[PlanAttempt]:
        """One plan per query (greedy)."""
        ...


@dataclass
class LMPlanner:
    """A generation backend as the planner: the schema and entity table in its prompt, one JSON plan out."""

    llm: Any  # a grasp_core.llm.backends backend (local model or endpoint)
    schema: Schema
    cfg: InferenceConfig

    def read(self, query: str, table: EntityTable) -> Cut:
        messages_of = lambda q: build_planner_messages(self.schema, table, q, self.cfg.compact_prompt)  # noqa: E731
        return planner_cut(self.llm, messages_of, query, self.cfg.max_new_tokens)

    def plan(self, queries: Sequence[str], tables: Sequence[EntityTable]) -> list[PlanAttempt]:
        from grasp_core.planner.lm.generate import plan_queries  # transformers and llguidance: the lm planner's

        return plan_queries(self.llm, self.schema, queries, tables, self.cfg)


def check_kind(kind: str) -> str:
    if kind not in PLANNER_KINDS:
        raise GraspError(f"the profile's planner must be one of {PLANNER_KINDS}, got {kind!r}")
    return kind


def load_planner(
    kind: str,
    checkpoint: Path,
    schema: Schema,
    encoder,
    cfg: InferenceConfig,
    device: str = "cpu",
    batch_size: int = 32,
) -> Planner:
    """The planner of kind ``kind`` at ``checkpoint``: a policy directory, or an LM checkpoint (a LoRA adapter
    loads over the base its ``planner.json`` records)."""
    if check_kind(kind) == "policy":
        from grasp_core.planner.policy.model import load_policy

        return load_policy(checkpoint, schema, encoder)
    from grasp_core.llm.backends import TransformersLLM
    from grasp_core.planner.lm.checkpoint import planner_kind

    _, base = planner_kind(checkpoint)
    if base is not None:
        llm = TransformersLLM(
            base, adapter_path=checkpoint, device=device, batch_size=batch_size, setting="planner checkpoint base"
        )
    else:
        llm = TransformersLLM(checkpoint, device=device, batch_size=batch_size, setting="planner checkpoint")
    return LMPlanner(llm, schema, cfg)

"""The plan the planner writes (``docs/design.md``, "Plan format"), as a pydantic model.

```json
{"target": {"type": "drug"},
 "anchors": [{"var": "a1", "type": "anatomy", "text": "retina", "match_mode": "name"},
             {"var": "a2", "ref": "E2", "match_mode": "name"}],
 "hops": [{"from": "a1", "rel": "expression present", "to": "x1", "to_type": "gene/protein"},
          {"from": "x1", "rel": "target", "to": "target"}],
 "relevance_text": "approved for topical ocular use"}
```

Decisions where the design is silent:
- Unknown keys are rejected (``extra="forbid"``): a plan with keys the executor would ignore is a plan the
  planner misunderstood, and the reward should say so rather than silently run half of it.
- ``match_mode`` defaults to ``"name"`` and ``relevance_text`` to ``""`` (``null`` is read as ``""``).
- An anchor has exactly one of ``text`` and ``ref``. A text anchor needs ``type``; a ref anchor takes its type
  from its own ``type`` when given, else from the referenced entity row's first type (resolved by
  :func:`grasp_core.plan.validate.validate_plan`).
- ``target`` is the reserved answer variable; no anchor may be called ``target``.
- ``match`` (absent or ``"all"``: every path) says what a target node reached by several anchors' paths must
  satisfy. ``"most"`` is partial matching ("findings X, Y and Z: which disease?"): a node reached by any of the
  paths is an answer, scored by the sum over the paths that reach it, so one on all of them ranks above one on
  fewer (each path adds its best binding score, a cosine near 1 for a good link). Its paths may only meet at
  ``target`` (:func:`grasp_core.plan.validate.validate_plan` says ``bad_match`` otherwise); each is executed as
  its own plan (:meth:`Plan.branches`) and their scores added per node.
- A hop is undirected unless it has ``dir``: ``"out"`` walks its relation's edges from their stored source to their
  destination (``from`` is the source: for HPO's ``parent-child``, from a term to its children), ``"in"`` the other
  way (to its parents). Only a hop whose two ends have the same type takes one (between two types the types
  already fix the direction; :func:`grasp_core.plan.validate.validate_plan` says ``bad_direction`` otherwise).
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

TARGET = "target"
# The planner's choice of no graph ranking for a query (the ``cpu`` policy may abstain): the executor returns an
# empty ranking with reason ``abstain``, so the fused ranking is the text ranking.
ABSTAIN = '{"abstain":true}'
MatchMode = Literal["name", "doc"]
Match = Literal["all", "most"]
Direction = Literal["out", "in"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Target(_Strict):
    type: str


class Anchor(_Strict):
    var: str = Field(min_length=1)
    type: str | None = None
    text: str | None = None
    ref: str | None = None
    match_mode: MatchMode = "name"

    @model_validator(mode="after")
    def _text_xor_ref(self) -> Anchor:
        if (self.text is None) == (self.ref is None):
            raise ValueError(f"anchor {self.var!r} needs exactly one of 'text' and 'ref'")
        if self.text is not None and not self.text.strip():
            raise ValueError(f"anchor {self.var!r} has an empty 'text'")
        if self.text is not None and self.type is None:
            raise ValueError(f"anchor {self.var!r} has a 'text' but no 'type'")
        if self.var == TARGET:
            raise ValueError(f"{TARGET!r} is the answer variable and cannot be an anchor")
        return self


class Hop(_Strict):
    from_: str = Field(alias="from", min_length=1)
    rel: str
    to: str = Field(min_length=1)
    to_type: str | None = None
    dir: Direction | None = None


class Plan(_Strict):
    target: Target
    anchors: tuple[Anchor, ...] = ()
    hops: tuple[Hop, ...] = ()
    relevance_text: str = ""
    match: Match | None = None

    @field_validator("relevance_text", mode="before")
    @classmethod
    def _none_is_empty(cls, value: object) -> object:
        return "" if value is None else value

    def anchor(self, var: str) -> Anchor:
        return next(a for a in self.anchors if a.var == var)

    @property
    def partial(self) -> bool:
        """A ``"most"`` plan with several paths into ``target``: executed as :meth:`branches`, scores added."""
        return self.match == "most" and sum(h.to == TARGET for h in self.hops) > 1

    def branches(self) -> list[Plan]:
        """Each anchor's path to ``target`` as a plan of its own (the plan's paths must meet at ``target`` only)."""
        out = []
        for anchor in self.anchors:
            hops, var = [], anchor.var
            while var != TARGET:
                hop = next(h for h in self.hops if h.from_ == var)
                hops.append(hop)
                var = hop.to
            out.append(self.model_copy(update={"anchors": (anchor,), "hops": tuple(hops), "match": None}))
        return out

    def to_json(self) -> dict:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def to_text(self) -> str:
        """Compact JSON, the form the planner is trained to emit."""
        return json.dumps(self.to_json(), ensure_ascii=False, separators=(", ", ": "))

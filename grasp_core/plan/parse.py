"""Read a plan out of what an LLM wrote.

Tolerated: a Markdown code fence (```json … ```), prose before the first ``{`` and anything after the
plan's closing ``}``. Not tolerated: anything that is not strict JSON inside the object, including a
trailing comma, single quotes or comments — the planner is trained and constrained to emit strict JSON,
so such output is a planner error the reward must see (reason ``json``), not something to paper over.
A JSON object that does not fit the plan model is rejected with reason ``schema``.
"""

from __future__ import annotations

import json
import re

from pydantic import ValidationError

from grasp_core.errors import PlanError
from grasp_core.plan.model import Plan

_FENCE = re.compile(r"```[A-Za-z]*\s*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()

__all__ = ["PlanError", "parse_plan", "plan_from_json"]


def parse_plan(text: str) -> Plan:
    """Parse the first JSON object in ``text`` (inside the first code fence when there is one)."""
    if not isinstance(text, str) or not text.strip():
        raise PlanError("json", "empty planner output")
    fence = _FENCE.search(text)
    body = fence.group(1) if fence else text
    start = body.find("{")
    if start < 0:
        raise PlanError("json", "no JSON object in the planner output")
    try:
        obj, _ = _DECODER.raw_decode(body, start)
    except json.JSONDecodeError as exc:
        raise PlanError("json", f"invalid JSON at char {exc.pos}: {exc.msg}") from exc
    return plan_from_json(obj)


def plan_from_json(obj: object) -> Plan:
    """Build a :class:`Plan` from a decoded JSON value; raise ``PlanError("schema", …)`` when it does not fit."""
    try:
        return Plan.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "plan"
        raise PlanError("schema", f"{where}: {first['msg']}") from exc

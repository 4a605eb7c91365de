"""A planner's answer for one question, the same for both kinds: the plan text kept, whether it is valid (or the
policy's abstention), why not, and how many tries it took."""

from __future__ import annotations

from dataclasses import dataclass

from grasp_core.entities.table import EntityTable
from grasp_core.plan.model import ABSTAIN
from grasp_core.plan.parse import parse_plan
from grasp_core.plan.validate import PlanError, validate_plan
from grasp_core.skb.schema import Schema


@dataclass(frozen=True)
class PlanAttempt:
    text: str  # the completion that was kept (the first valid one, else the last one)
    valid: bool
    error: str | None  # reason code of the last failure when no attempt was valid
    attempts: int


def check_plan(text: str, schema: Schema, table: EntityTable | None) -> str | None:
    """None when ``text`` is a valid plan (or the policy's abstention), else the failure's reason code."""
    if text == ABSTAIN:
        return None
    try:
        validate_plan(parse_plan(text), schema, table)
    except PlanError as exc:
        return exc.reason
    return None

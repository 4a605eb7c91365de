"""Planner inference (paper Appendix B): greedy decoding, up to two retries at T=0.7 when a plan fails.

A plan *fails* when it does not parse or does not validate against the schema and the query's entity table.
This is the ``lm`` planner kind (:class:`~grasp_core.planner.interface.LMPlanner`); the ``cpu`` plan-selection policy
(:mod:`grasp_core.planner.policy.model`) picks its most probable candidate instead.
Decoding is constrained to the plan grammar when the backend supports it (the local model); the
endpoint backend's plans are checked after the fact. :func:`sample_plans` draws ``n`` plans per query
for RL (T=1.0).
"""

from __future__ import annotations

from collections.abc import Sequence

from grasp_core.entities.table import EntityTable
from grasp_core.llm.chat import Message
from grasp_core.planner.attempt import PlanAttempt, check_plan
from grasp_core.planner.config import InferenceConfig
from grasp_core.planner.lm.grammar import PlanGrammar
from grasp_core.planner.lm.prompt import build_planner_messages
from grasp_core.skb.schema import Schema


def planner_prompts(schema: Schema, queries: Sequence[str], tables: Sequence[EntityTable], compact: bool) -> list:
    return [build_planner_messages(schema, t, q, compact) for q, t in zip(queries, tables)]


def _grammars(llm, schema: Schema, tables: Sequence[EntityTable], cfg: InferenceConfig):
    if not cfg.constrained or not llm.enforces_constraints:
        return None
    return [PlanGrammar(schema, t, cfg.grammar) for t in tables]


def plan_queries(
    llm,
    schema: Schema,
    queries: Sequence[str],
    tables: Sequence[EntityTable],
    cfg: InferenceConfig = InferenceConfig(),
    prompts: Sequence[list[Message]] | None = None,
) -> list[PlanAttempt]:
    """One plan per query: greedy first, then up to ``cfg.retries`` samples for the queries that failed.

    ``prompts`` replaces the planner's own chats (the LLM teacher adds its guidance to them)."""
    if prompts is None:
        prompts = planner_prompts(schema, queries, tables, cfg.compact_prompt)
    grammars = _grammars(llm, schema, tables, cfg)
    texts = [
        c[0]
        for c in llm.generate(prompts, n=1, temperature=0.0, max_new_tokens=cfg.max_new_tokens, constraint=grammars)
    ]
    errors = [check_plan(t, schema, tab) for t, tab in zip(texts, tables)]
    attempts = [1] * len(texts)
    for _ in range(cfg.retries):
        todo = [i for i, e in enumerate(errors) if e is not None]
        if not todo:
            break
        retry = llm.generate(
            [prompts[i] for i in todo],
            n=1,
            temperature=cfg.retry_temperature,
            max_new_tokens=cfg.max_new_tokens,
            constraint=[grammars[i] for i in todo] if grammars else None,
        )
        for i, out in zip(todo, retry):
            texts[i], errors[i] = out[0], check_plan(out[0], schema, tables[i])
            attempts[i] += 1
    return [PlanAttempt(t, e is None, e, a) for t, e, a in zip(texts, errors, attempts)]


def sample_plans(
    llm,
    schema: Schema,
    queries: Sequence[str],
    tables: Sequence[EntityTable],
    n: int = 8,
    temperature: float = 1.0,
    cfg: InferenceConfig = InferenceConfig(),
) -> list[list[str]]:
    """``n`` sampled plans per query (RL exploration)."""
    prompts = planner_prompts(schema, queries, tables, cfg.compact_prompt)
    grammars = _grammars(llm, schema, tables, cfg)
    return llm.generate(prompts, n=n, temperature=temperature, max_new_tokens=cfg.max_new_tokens, constraint=grammars)

"""The LLM teacher: training plans written by a large model behind an OpenAI-compatible endpoint (paper §3.2).

Each query gets the planner's own prompt (schema, entity table, query) with the teacher's guidance added to the
system message: ``grasp_core/prompts/teacher_generic.txt`` filled with the dataset's metapaths (enumerated from
its schema, up to ``metapaths`` of them), plus ``teacher_<dataset>.txt`` notes when that file exists. The
endpoint client retries timeouts, HTTP 429 and 5xx with backoff (:class:`~grasp_core.llm.config.EndpointConfig`);
a plan that does not parse or validate is asked again at ``retry_temperature`` up to ``retries`` times and,
still invalid, is kept as no plan and counted. Valid plans are executed like the programmatic teacher's, so
both teachers write the same :class:`~grasp_core.planner.teachers.programmatic.TeacherPlan` rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from importlib.resources import files
from string import Template

from grasp_core.entities.table import EntityTable
from grasp_core.llm.backends import LLM
from grasp_core.llm.chat import Message
from grasp_core.plan.parse import parse_plan
from grasp_core.planner.config import InferenceConfig
from grasp_core.planner.lm.generate import plan_queries
from grasp_core.planner.lm.prompt import build_planner_messages
from grasp_core.planner.metapaths import metapaths
from grasp_core.planner.teachers.programmatic import TeacherPlan
from grasp_core.skb.schema import Schema


def teacher_guidance(schema: Schema, dataset: str, max_paths: int = 40) -> str:
    """The teacher's addition to the planner's system prompt for ``dataset``."""
    prompts = files("grasp_core.prompts")
    lines = []
    for start in schema.node_types:
        for end in schema.node_types:
            for path in metapaths(schema, start, end, max_hops=2, limit=2):
                lines.append(start + "".join(f" -[{rel}]- {t}" for rel, t in path))
    notes = prompts.joinpath(f"teacher_{dataset}.txt")
    return (
        Template(prompts.joinpath("teacher_generic.txt").read_text())
        .substitute(
            skb_name=schema.name,
            metapaths="\n".join(lines[:max_paths]),
            dataset_notes=notes.read_text().strip() if notes.is_file() else "",
        )
        .strip()
    )


class LLMTeacher:
    """Ask the endpoint for each query's plan, execute the valid ones, rank the gold answers in their results."""

    def __init__(self, schema: Schema, dataset: str, llm: LLM, executor, cfg: InferenceConfig = InferenceConfig()):
        self.schema, self.llm, self.executor = schema, llm, executor
        self.cfg = InferenceConfig(  # the endpoint cannot enforce the grammar: plans are checked after the fact
            max_new_tokens=cfg.max_new_tokens,
            retries=cfg.retries,
            retry_temperature=cfg.retry_temperature,
            constrained=False,
        )
        self.guidance = teacher_guidance(schema, dataset)
        self.retried, self.errors = 0, Counter[str]()

    def messages(self, query: str, table: EntityTable) -> list[Message]:
        system, user = build_planner_messages(self.schema, table, query)
        return [{"role": "system", "content": system["content"] + "\n\n" + self.guidance}, user]

    def teach(
        self, queries: Sequence[str], tables: Sequence[EntityTable], golds: Sequence[Sequence[int]]
    ) -> list[TeacherPlan]:
        """One row per query (``plan`` None when every attempt was invalid); :attr:`invalid` and :attr:`errors`
        count those queries, :attr:`retried` the queries whose first plan was invalid."""
        queries, tables = list(queries), list(tables)
        prompts = [self.messages(q, t) for q, t in zip(queries, tables)]
        attempts = plan_queries(self.llm, self.schema, queries, tables, self.cfg, prompts=prompts)
        valid = [i for i, a in enumerate(attempts) if a.valid]
        executed = self.executor.execute_batch(
            [attempts[i].text for i in valid], [queries[i] for i in valid], [tables[i] for i in valid]
        )
        out = [TeacherPlan(None, None, 0, a.attempts) for a in attempts]
        for i, (ranking, trace) in zip(valid, executed):
            plan = parse_plan(attempts[i].text).to_json()
            out[i] = TeacherPlan(plan, ranking.rank_of(golds[i]), trace.candidates, attempts[i].attempts)
        self.retried += sum(a.attempts > 1 for a in attempts)
        self.errors.update(a.error for a in attempts if a.error is not None)
        return out

    @property
    def invalid(self) -> int:
        return sum(self.errors.values())

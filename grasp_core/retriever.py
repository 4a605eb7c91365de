"""GRASP as a product: load a dataset's trained artifacts once, answer queries, explain every answer.

``GraspRetriever.retrieve(queries)`` runs the answer path (:mod:`grasp_core.answer`: text branch, entity
extraction + linking, one planner call per query, plan execution, RRF fusion, the reranker) on a batch and turns
its stage outputs into one :class:`Result` per query. Any subset of components can be used
(``branches="text"|"graph"|"both"``, ``rerank=False``). Each :class:`Answer` carries its explanation: which
branch found it and at what rank, the reranker score, and, for graph answers, the plan's paths that reached it;
each :class:`Result` carries the plan, the Cypher text, the bindings and the per-stage times, and ``truncated``:
which model read only a prefix of a query too long for its window (:mod:`grasp_core.truncation`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from grasp_core.answer import ANSWER_STAGES, AnswerOptions, AnswerPath
from grasp_core.components import Components
from grasp_core.entities.table import EntityTable
from grasp_core.plan.trace import Trace
from grasp_core.profiles import with_graph_store
from grasp_core.ranking import BRANCHES, Ranking

__all__ = ["BRANCHES", "ANSWER_STAGES", "Answer", "GraspRetriever", "Result"]


@dataclass
class Answer:
    node_id: int
    key: str
    name: str
    type: str
    score: float
    text_rank: int | None = None
    graph_rank: int | None = None
    fused_rank: int | None = None
    reranker_score: float | None = None
    reranker_contributions: list[tuple[str, float]] = field(default_factory=list)  # ltr: top features, explain=True
    paths: list[list[str]] = field(default_factory=list)  # node names from an anchor binding to this answer
    named: bool = False  # the question is this node's name or alias: it answers first

    @property
    def found_by(self) -> str:
        both = self.text_rank is not None and self.graph_rank is not None
        branches = "text+graph" if both else "text" if self.text_rank is not None else "graph"
        if self.named:
            return "name" if self.text_rank is None and self.graph_rank is None else f"name, {branches}"
        return branches

    def to_json(self) -> dict:
        return {"node_id": self.node_id, "key": self.key, "score": round(self.score, 6)}


@dataclass
class Result:
    query: str
    answers: list[Answer]
    entity_table: EntityTable | None = None
    plan: str | None = None
    plan_valid: bool | None = None
    plan_error: str | None = None
    cypher: str = ""
    graph_weight: float | None = None  # the graph ranking's RRF weight in fusion (the plan chooser's pick)
    bindings: dict = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(ANSWER_STAGES, 0.0))
    truncated: dict[str, str] = field(default_factory=dict)  # model -> "read 61 of 152 tokens"

    @property
    def ranking(self) -> Ranking:
        return Ranking(
            np.array([a.node_id for a in self.answers], np.int64), np.array([a.score for a in self.answers], np.float32)
        )


class GraspRetriever:
    def __init__(
        self,
        components: Components,
        branches: str = "both",
        rerank: bool = True,
        planner: str | None = None,
        parallel_branches: bool = False,
    ):
        options = AnswerOptions(branches, rerank, planner, parallel_branches)
        self.components, self.branches, self.use_rerank = components, branches, rerank
        self.path = AnswerPath(components, options).load()  # fail early (missing artifacts) before the first question

    @property
    def planner_name(self) -> str | None:
        return self.path.planner_name

    @classmethod
    def from_artifacts(
        cls,
        dataset: str,
        root=None,
        profile: str = "cpu",
        extractor: str | None = None,
        graph_store: str = "",
        traversal: str = "",
        variant: str | None = None,
        **kwargs,
    ) -> GraspRetriever:
        """The retriever of a dataset's served release (:mod:`grasp_core.releases`; before the first release, its
        finished artifacts). ``variant`` (or a partition key ``hpo+rerank-k20`` as ``dataset``) answers with that
        variant's release and profile (:mod:`grasp_core.experiments`); ``extractor`` overrides the profile's
        (gazetteer | llm), ``graph_store`` / ``traversal`` its graph store backend and plan traversal
        (:func:`with_graph_store`)."""
        from grasp_core.datasets import check_dataset
        from grasp_core.experiments import resolve_profile, split_key, variant_key
        from grasp_core.releases import served_artifacts

        if variant is None:
            dataset, variant = split_key(dataset)
        check_dataset(dataset)
        key = variant_key(dataset, variant)
        chosen = with_graph_store(resolve_profile(key, profile), graph_store, traversal)
        if extractor is not None:
            chosen = chosen.replace(extractor=extractor)
        return cls(Components(served_artifacts(key, root), chosen), **kwargs)

    def retrieve(self, queries: Sequence[str], k: int = 100, explain: bool = False) -> list[Result]:
        out = self.path.answer(queries, explain=explain)
        nodes = self.components.graph.nodes
        results = []
        for i, query in enumerate(out.queries):
            res = Result(query, [], seconds=out.seconds[i], truncated=out.truncated(i))
            trace = out.execution.traces[i] if out.execution else None
            if out.extraction and out.planning and trace is not None:
                attempt = out.planning.attempts[i]
                res.entity_table, res.plan, res.plan_valid = out.extraction.tables[i], attempt.text, attempt.valid
                res.plan_error, res.cypher = attempt.error or trace.error, trace.cypher
                if out.execution and out.execution.graph_weights:
                    res.graph_weight = out.execution.graph_weights[i]
                res.bindings = {
                    v: [(b.node_id, b.name, round(b.score, 4)) for b in bs] for v, bs in trace.bindings.items()
                }
            scores = out.reranking.scores[i] if out.reranking else {}
            contributions = out.reranking.contributions[i] if out.reranking else {}
            t_rank, g_rank, f_rank = (_ranks(r[i]) for r in (out.text.rankings, out.graph, out.fusion.rankings))
            top, named = out.final[i].top(k), set(out.named[i]) if out.named else set()
            for node_id, score in zip(top.node_ids.tolist(), top.scores.tolist()):
                row = nodes.iloc[node_id]
                res.answers.append(
                    Answer(
                        node_id,
                        str(row["key"]),
                        str(row["name"]),
                        str(row["type"]),
                        float(score),
                        t_rank.get(node_id),
                        g_rank.get(node_id),
                        f_rank.get(node_id),
                        scores.get(node_id),
                        contributions.get(node_id, []),
                        named=node_id in named,
                    )
                )
            if explain and trace is not None and trace.plan is not None:
                for ans in res.answers[:10]:
                    if ans.graph_rank is not None:
                        ans.paths = self._paths(trace, ans.node_id)
            results.append(res)
        return results

    def _paths(self, trace: Trace, node_id: int) -> list[list[str]]:
        names = self.components.graph.nodes["name"]
        found = self.components.executor.explain_paths(trace.plan, trace, node_id, limit=3)
        return [[str(names.iloc[n]) for n in path] for paths in found.values() for path in paths]

    def query(self, text: str, k: int = 10) -> Result:
        return self.retrieve([text], k=k, explain=True)[0]


def _ranks(ranking: Ranking) -> dict[int, int]:
    return {int(n): i + 1 for i, n in enumerate(ranking.node_ids.tolist())}

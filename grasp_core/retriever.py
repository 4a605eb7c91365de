"""GRASP as a product: load a dataset's trained artifacts once, answer queries, explain every answer.

``GraspRetriever.retrieve(queries)`` runs the whole method on a batch: text branch (mFAR by default),
entity extraction + linking, one planner call per query, plan execution, RRF fusion and the reranker
(top K, then RRF of the reranker rank and the fused rank). Any subset of components can be used
(``branches="text"|"graph"|"both"``, ``rerank=False``). Each :class:`Answer` carries its explanation: which
branch found it and at what rank, the reranker score, and, for graph answers, the plan's paths that reached it;
each :class:`Result` carries the plan, the Cypher text, the bindings and the per-stage times, and ``truncated``:
which model read only a prefix of a query too long for its window (:mod:`grasp_core.truncation`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from grasp_core.artifacts import Artifacts
from grasp_core.components import Components
from grasp_core.entities.table import EntityTable
from grasp_core.errors import GraspError
from grasp_core.plan.trace import Trace
from grasp_core.planner.inference import plan_queries
from grasp_core.planner.prompt import build_planner_messages
from grasp_core.profiles import get_profile, with_graph_store
from grasp_core.ranking import Ranking, fuse
from grasp_core.text.mfar import QUERY_MAX_TOKENS
from grasp_core.textnorm import check_unicode
from grasp_core.truncation import Cut, cut_to_tokens, planner_cut, policy_cut, reranker_cut

BRANCHES = ("text", "graph", "both")
STAGES = ("text", "extraction", "planning", "execution", "fusion", "reranking")


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

    @property
    def found_by(self) -> str:
        both = self.text_rank is not None and self.graph_rank is not None
        return "text+graph" if both else "text" if self.text_rank is not None else "graph"

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
    bindings: dict = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    truncated: dict[str, str] = field(default_factory=dict)  # model -> "read 61 of 152 tokens"

    @property
    def ranking(self) -> Ranking:
        return Ranking(
            np.array([a.node_id for a in self.answers], np.int64), np.array([a.score for a in self.answers], np.float32)
        )


class GraspRetriever:
    def __init__(
        self,
        ws: Components,
        branches: str = "both",
        rerank: bool = True,
        planner: str | None = None,
        parallel_branches: bool = False,
    ):
        if branches not in BRANCHES:
            raise GraspError(f"branches must be one of {BRANCHES}, got {branches!r}")
        self.ws, self.branches, self.use_rerank = ws, branches, rerank
        # parallel_branches: the text branch runs in a helper thread while the calling thread runs the graph branch
        # (as the paper does). Off by default: on the shared 2-core machine it made a warm hpo question slower
        # (p50 393-443 ms vs 258-277 ms sequential, docs/latency.md): the planner's token loop and the
        # gazetteer hold the GIL, so the two branches mostly wait for each other and for the cores.
        self._text_pool = ThreadPoolExecutor(1, thread_name_prefix="grasp-text") if parallel_branches else None
        ws.skb  # noqa: B018 - fail early (missing artifacts) before loading models
        self.text = ws.text_retriever(ws.profile.text_retriever) if branches != "graph" else None
        if branches != "text":
            self.planner_name, checkpoint = (
                (planner, ws.art.require(*planner.split(":"))) if planner else ws.final_planner()
            )
            self.llm = ws.planner_llm(checkpoint)
            ws.extractor  # noqa: B018
            ws.executor  # noqa: B018
        if rerank:
            self.reranker = ws.reranker()

    @classmethod
    def from_artifacts(
        cls,
        dataset: str,
        root=None,
        profile: str = "cpu",
        extractor: str | None = None,
        graph_store: str = "",
        traversal: str = "",
        **kwargs,
    ) -> GraspRetriever:
        """The retriever of a dataset's finished artifacts; ``extractor`` overrides the profile's (gazetteer | llm),
        ``graph_store`` / ``traversal`` its graph store backend and plan traversal (:func:`with_graph_store`)."""
        from grasp_core.datasets import check_dataset

        check_dataset(dataset)
        chosen = with_graph_store(get_profile(profile), graph_store, traversal)
        if extractor is not None:
            chosen = chosen.replace(extractor=extractor)
        return cls(Components(Artifacts.for_dataset(dataset, root), chosen), **kwargs)

    def retrieve(self, queries: Sequence[str], k: int = 100, explain: bool = False) -> list[Result]:
        queries = list(queries)
        for i, q in enumerate(queries):
            if not isinstance(q, str) or not q.strip():
                raise GraspError(f"query {i} is empty: give a non-empty question")
            check_unicode(q, f"query {i}")
        n = len(queries)
        results = [Result(q, []) for q in queries]
        clock = _Clock(results)
        text = [Ranking.empty()] * n
        pending = None  # the text branch, when it runs beside the graph branch
        if self.text is not None:
            encoder = getattr(self.text, "encoder", None)
            if encoder is not None:  # the query encoder truncates by itself; the explanation says so
                window = encoder.max_tokens(QUERY_MAX_TOKENS) - encoder.tokenizer.num_special_tokens_to_add()
                _note(results, "text", [cut_to_tokens(q, encoder.tokenizer, window) for q in queries])
            if self._text_pool is not None:
                pending = self._text_pool.submit(self._rank_text, queries, clock)
            else:
                text = self._rank_text(queries, clock)
        graph = [Ranking.empty()] * n
        traces: list[Trace | None] = [None] * n
        if self.branches != "text":
            with clock("extraction"):
                tables = self.ws.extractor.extract(queries)
            with clock("planning"):
                schema, inference = self.ws.skb.schema, self.ws.profile.inference
                cuts = [
                    policy_cut(self.llm, q)
                    if hasattr(self.llm, "plan")  # the plan-selection policy reads the query through its encoder
                    else planner_cut(
                        self.llm,
                        lambda q, t=t: build_planner_messages(schema, t, q, inference.compact_prompt),
                        q,
                        inference.max_new_tokens,
                    )
                    for q, t in zip(queries, tables)
                ]
                _note(results, "planner", cuts)
                attempts = plan_queries(self.llm, schema, [c.text for c in cuts], tables, inference)
            with clock("execution"):
                executed = self.ws.executor.execute_batch([a.text for a in attempts], queries, tables)
            graph = [r for r, _ in executed]
            traces = [t for _, t in executed]
            for res, table, att, (_, tr) in zip(results, tables, attempts, executed):
                res.entity_table, res.plan, res.plan_valid, res.plan_error = (
                    table,
                    att.text,
                    att.valid,
                    att.error or tr.error,
                )
                res.cypher, res.bindings = (
                    tr.cypher,
                    {v: [(b.node_id, b.name, round(b.score, 4)) for b in bs] for v, bs in tr.bindings.items()},
                )
        if pending is not None:
            text = pending.result()
        with clock("fusion"):
            fused = [
                fuse(t, g, self.ws.profile.reward) if self.branches == "both" else (t if self.branches == "text" else g)
                for t, g in zip(text, graph)
            ]
        scores: list[dict[int, float]] = [{} for _ in range(n)]
        contributions: list[dict[int, list]] = [{} for _ in range(n)]
        final = fused
        if self.use_rerank:
            from grasp_core.rerank.features import RerankInput

            tables = [r.entity_table for r in results]
            inputs = [RerankInput.of(*a) for a in zip(queries, fused, text, graph, traces, tables)]
            scorer = getattr(self.reranker, "scorer", None)
            if scorer is not None:  # a pair reranker reads instruction + query + document in one window
                cuts = [reranker_cut(scorer, q, self.reranker.builder.cfg.max_input_tokens) for q in queries]
                _note(results, "reranker", cuts)
                inputs = [dataclasses.replace(x, query=c.text) for x, c in zip(inputs, cuts)]
            with clock("reranking"):
                reranked = self.reranker.rerank(inputs, self.ws.profile.rerank.top_k, explain=explain)
            final = [r.ranking for r in reranked]
            for i, (f, r) in enumerate(zip(fused, reranked)):
                ids = f.node_ids[: len(r.scores)].tolist()
                scores[i] = dict(zip(ids, r.scores.tolist()))
                contributions[i] = dict(zip(ids, r.contributions or []))
        nodes = self.ws.skb.nodes
        for i, res in enumerate(results):
            top = final[i].top(k)
            t_rank, g_rank, f_rank = _ranks(text[i]), _ranks(graph[i]), _ranks(fused[i])
            for node_id, score in zip(top.node_ids.tolist(), top.scores.tolist()):
                row = nodes.iloc[node_id]
                ans = Answer(
                    node_id,
                    str(row["key"]),
                    str(row["name"]),
                    str(row["type"]),
                    float(score),
                    t_rank.get(node_id),
                    g_rank.get(node_id),
                    f_rank.get(node_id),
                    scores[i].get(node_id),
                    contributions[i].get(node_id, []),
                )
                res.answers.append(ans)
            trace = traces[i]
            if explain and trace is not None and trace.plan is not None:
                for ans in res.answers[:10]:
                    if ans.graph_rank is not None:
                        ans.paths = self._paths(trace, ans.node_id)
        return results

    def _rank_text(self, queries: list[str], clock: _Clock) -> list[Ranking]:
        assert self.text is not None, "the text branch is not loaded"
        with clock("text"):
            return self.text.rank(queries, k=100)

    def _paths(self, trace, node_id: int) -> list[list[str]]:
        names = self.ws.skb.nodes["name"]
        found = self.ws.executor.explain_paths(trace.plan, trace, node_id, limit=3)
        return [[str(names.iloc[n]) for n in path] for paths in found.values() for path in paths]

    def query(self, text: str, k: int = 10) -> Result:
        return self.retrieve([text], k=k, explain=True)[0]


def _note(results: list[Result], model: str, cuts: list[Cut]) -> None:
    for res, cut in zip(results, cuts):
        if cut.note:
            res.truncated[model] = cut.note


def _ranks(ranking: Ranking) -> dict[int, int]:
    return {int(n): i + 1 for i, n in enumerate(ranking.node_ids.tolist())}


class _Clock:
    """Times a stage of a batch and charges each query its share."""

    def __init__(self, results: list[Result]):
        self.results = results

    def __call__(self, stage: str):
        clock = self

        class _Span:
            def __enter__(self):
                self.t0 = time.perf_counter()

            def __exit__(self, *exc):
                share = (time.perf_counter() - self.t0) / max(1, len(clock.results))
                for r in clock.results:
                    r.seconds[stage] += share

        return _Span()

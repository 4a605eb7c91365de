"""The answer path: one function from a batch of questions to their ranked answers, stage by stage.

Everything that answers or scores a question goes through :meth:`AnswerPath.answer`: the product
(:class:`~grasp_core.retriever.GraspRetriever`, so ``grasp query``, ``grasp retrieve`` and ``grasp serve``), the
evaluation and ablation steps, the reranker's training and validation lists and the planner's validation during
training. So the evaluation's ``served`` and ``served+rerank`` rankings are what ``grasp retrieve`` answers.

The stages, in order (:data:`ANSWER_STAGES`), each with its output dataclass:

==============  ========================  ==========================================================
stage           output                    what it does
==============  ========================  ==========================================================
``text``        :class:`TextStage`        the profile's text retriever (mFAR by default), top 100
``extraction``  :class:`ExtractionStage`  entity extraction + linking: one entity table per query
``planning``    :class:`PlanningStage`    one plan per query, on the query as the planner reads it
``execution``   :class:`ExecutionStage`   the plan executed: the graph ranking and its trace (with a plan
                                          chooser, also its candidate pool: what the reranker reads)
``fusion``      :class:`FusionStage`      RRF of the text and graph rankings (:func:`~grasp_core.ranking.fusion`),
                                          the graph's at the weight the plan chooser picked
``reranking``   :class:`RerankingStage`   the reranker on the top K of the pool (else the fused list), RRF
                                          with its rank
==============  ========================  ==========================================================

:class:`AnswerOptions` says which branches (``text`` | ``graph`` | ``both``) and whether the reranker run, and
which planner checkpoint plans. A caller that already holds a stage's output for its queries hands it in instead
of recomputing it (``text=``, ``tables=``, ``plans=``): the evaluation passes the ``text_rankings`` and
``entity_tables`` assets, which the same text retriever and extractor wrote for every query.

Adding a feature to a stage: compute it in that stage's method below and add it as a field of the stage's output
dataclass; every caller then gets it. A reranker feature that needs something of the path reads it from
:meth:`Answers.rerank_inputs` (the one place a :class:`~grasp_core.rerank.features.RerankInput` is built).
A model that reads only a prefix of a long query says so in its stage's ``notes`` (:mod:`grasp_core.truncation`).
"""

from __future__ import annotations

import contextvars
import dataclasses
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from grasp_core.components import Components
from grasp_core.embed.encoder import Encoder
from grasp_core.entities.table import EntityTable
from grasp_core.errors import GraspError
from grasp_core.gc_pause import collector_paused
from grasp_core.math_threads import answer_threads
from grasp_core.plan.trace import Trace
from grasp_core.planner.attempt import PlanAttempt, check_plan
from grasp_core.planner.interface import Planner
from grasp_core.planner.policy.chooser import Executed
from grasp_core.ranking import BRANCHES, Ranking, fusion, named_first
from grasp_core.rerank.features import RerankInput
from grasp_core.text.mfar import QUERY_MAX_TOKENS
from grasp_core.textnorm import check_unicode

if TYPE_CHECKING:
    from grasp_core.rerank.inference import PairReranker
    from grasp_core.rerank.ranker import LTRReranker
    from grasp_core.text.bm25 import BM25Retriever
    from grasp_core.text.dense import DenseRetriever
    from grasp_core.text.mfar import MFARRetriever

ANSWER_STAGES = ("text", "extraction", "planning", "execution", "fusion", "reranking")
TEXT_TOP_K = 100  # candidates the text branch returns per query (the text_rankings asset keeps as many)


@dataclass(frozen=True)
class AnswerOptions:
    branches: str = "both"  # text | graph | both
    rerank: bool = True  # the trained reranker on the fused list
    planner: str | None = None  # the planning checkpoint: "sft_adapter", "planner:<round>"; None: the served one
    parallel_branches: bool = False  # the text branch in a helper thread beside the graph branch
    # the reranker's candidates (a plan chooser's pool) even without reranking: the reranker's training lists
    reranker_candidates: bool = False

    def __post_init__(self) -> None:
        if self.branches not in BRANCHES:
            raise GraspError(f"branches must be one of {BRANCHES}, got {self.branches!r}")


@dataclass(frozen=True)
class TextStage:
    rankings: list[Ranking]  # empty rankings when the text branch does not run
    notes: list[str | None]  # the query encoder's cut ("read 61 of 152 tokens"), None when it read all


@dataclass(frozen=True)
class ExtractionStage:
    tables: list[EntityTable]


@dataclass(frozen=True)
class PlanningStage:
    attempts: list[PlanAttempt]  # attempts == 0: a plan handed in, not planned here
    notes: list[str | None]  # the planner's cut of the query


@dataclass(frozen=True)
class ExecutionStage:
    rankings: list[Ranking]
    traces: list[Trace]
    graph_weights: list[float] | None = None  # each ranking's RRF weight in fusion (the plan chooser's pick)
    pools: list[Ranking] | None = None  # the plan chooser's candidate pools: what the reranker reads instead


@dataclass(frozen=True)
class FusionStage:
    rankings: list[Ranking]


@dataclass(frozen=True)
class RerankingStage:
    rankings: list[Ranking]
    scores: list[dict[int, float]]  # node id -> reranker score, for the fused top K
    # ltr with explain: node id -> top features, computed for a candidate when first read (the shown answers)
    contributions: list[Mapping[int, list[tuple[str, float]]]]
    notes: list[str | None]  # the reranker's cut of the query


@dataclass(frozen=True)
class Answers:
    """A batch's outputs of every stage that ran (None: the stage did not run), and each query's seconds per stage
    (its share of the batch's time)."""

    queries: list[str]
    text: TextStage
    extraction: ExtractionStage | None
    planning: PlanningStage | None
    execution: ExecutionStage | None
    fusion: FusionStage
    reranking: RerankingStage | None
    seconds: list[dict[str, float]]
    # per query, the nodes whose name or alias is the whole question (a bare name asks for that node): they answer
    # first, above the ranking (:meth:`AnswerPath.named`); empty for any other question
    named: list[tuple[int, ...]] = dataclasses.field(default_factory=list)

    @property
    def graph(self) -> list[Ranking]:
        """The graph rankings (empty ones when the graph branch did not run)."""
        return self.execution.rankings if self.execution else [Ranking.empty()] * len(self.queries)

    @property
    def final(self) -> list[Ranking]:
        """What the path answers: the reranked list, else the fused one, with the nodes a bare name names on top."""
        ranked = self.reranking.rankings if self.reranking else self.fusion.rankings
        if not self.named:
            return ranked
        return [named_first(r, n) for r, n in zip(ranked, self.named, strict=True)]

    def rerank_inputs(self) -> list[RerankInput]:
        """What the reranker knows of each query (also the reranker's training and validation lists): its candidates
        are the plan chooser's pool when it made one, else the fused list."""
        traces = self.execution.traces if self.execution else [None] * len(self.queries)
        tables = self.extraction.tables if self.extraction else [None] * len(self.queries)
        pools = self.execution.pools if self.execution else None
        candidates = pools if pools is not None else self.fusion.rankings
        parts = zip(self.queries, candidates, self.text.rankings, self.graph, traces, tables, strict=True)
        return [RerankInput.of(*p) for p in parts]

    def truncated(self, i: int) -> dict[str, str]:
        """Which model read only a prefix of query ``i``: model -> "read 61 of 152 tokens"."""
        stages = {"text": self.text, "planner": self.planning, "reranker": self.reranking}
        notes = {m: s.notes[i] if s is not None else None for m, s in stages.items()}
        return {m: note for m, note in notes.items() if note is not None}


def check_queries(queries: Sequence[str]) -> list[str]:
    queries = list(queries)
    for i, q in enumerate(queries):
        if not isinstance(q, str) or not q.strip():
            raise GraspError(f"query {i} is empty: give a non-empty question")
        check_unicode(q, f"query {i}")
    return queries


class AnswerPath:
    """The answer path of one dataset for ``options``: its parts load from the dataset's finished artifacts on first
    use (:meth:`load` loads them all at once). ``planner`` replaces the planner checkpoint by one in memory (a
    checkpoint under validation during training)."""

    def __init__(
        self, components: Components, options: AnswerOptions = AnswerOptions(), planner: Planner | None = None
    ):
        self.components, self.options = components, options
        self.planner_name: str | None = "in memory" if planner is not None else None  # set when the planner loads
        self._given_planner = planner
        # the text branch's helper thread: off by default, on 2 cores it made a warm question slower (the
        # `quiet-parallel` entry of benchmarks/results/question_profile.json, docs/latency.md): both branches run
        # encoder passes and hold the GIL in Python code, so they mostly wait for each other and for the cores
        self._text_pool = ThreadPoolExecutor(1, thread_name_prefix="grasp-text") if options.parallel_branches else None

    def load(self) -> AnswerPath:
        """Load every part the options use now (a missing artifact fails before any question is answered), with
        the garbage collector paused (:mod:`grasp_core.gc_pause`)."""
        with collector_paused():
            self.components.graph  # noqa: B018  (the graph alone: answering reads none of the dataset's questions)
            if self.options.branches != "graph":
                self.text_retriever  # noqa: B018
            if self.options.branches != "text":
                self.planner  # noqa: B018
                self.components.extractor  # noqa: B018
                self.components.executor  # noqa: B018
            if self.options.rerank:
                self.reranker  # noqa: B018
        return self

    # ------------------------------------------------------------------------------------------- parts
    @cached_property
    def text_retriever(self) -> BM25Retriever | DenseRetriever | MFARRetriever:
        return self.components.text_retriever(self.components.profile.text_retriever)

    @cached_property
    def planner(self) -> Planner:
        if self._given_planner is not None:
            return self._given_planner
        if self.options.planner:
            self.planner_name = self.options.planner
            checkpoint = self.components.art.require(*self.options.planner.split(":"))
        else:
            self.planner_name, checkpoint = self.components.final_planner()
        return self.components.planner(checkpoint)

    @cached_property
    def reranker(self) -> LTRReranker | PairReranker:
        return self.components.reranker()

    # ------------------------------------------------------------------------------------------ the path
    def answer(
        self,
        queries: Sequence[str],
        *,
        text: Sequence[Ranking] | None = None,
        tables: Sequence[EntityTable] | None = None,
        plans: Sequence[str] | None = None,
        explain: bool = False,
    ) -> Answers:
        """Answer a batch. ``text``, ``tables`` and ``plans`` are stage outputs the caller already holds (one per
        query); ``explain`` adds the ``ltr`` reranker's top feature contributions. The stages share one encoding
        of each text (:meth:`Encoder.remembering`): the text branch, the planner and the reranker read the same
        questions, the executor the extractor's mentions. OpenBLAS runs one thread meanwhile
        (:mod:`grasp_core.math_threads`: faster, same answers)."""
        queries = check_queries(queries)
        with Encoder.remembering(), answer_threads():
            return self._answer(queries, text, tables, plans, explain)

    def _answer(
        self,
        queries: list[str],
        text: Sequence[Ranking] | None,
        tables: Sequence[EntityTable] | None,
        plans: Sequence[str] | None,
        explain: bool,
    ) -> Answers:
        n, branches = len(queries), self.options.branches
        seconds: list[dict[str, float]] = [dict.fromkeys(ANSWER_STAGES, 0.0) for _ in queries]
        clock = _Clock(seconds)
        text_stage = TextStage([Ranking.empty()] * n, [None] * n)
        pending = None  # the text branch, when it runs beside the graph branch
        if branches != "graph":
            if text is not None:
                text_stage = TextStage(_check(list(text), n, "text rankings"), [None] * n)
            elif self._text_pool is not None:
                pending = self._text_pool.submit(contextvars.copy_context().run, self.rank_text, queries, clock)
            else:
                text_stage = self.rank_text(queries, clock)
        extraction: ExtractionStage | None = None
        planning: PlanningStage | None = None
        execution: ExecutionStage | None = None
        if branches != "text":
            if tables is not None:
                extraction = ExtractionStage(_check(list(tables), n, "entity tables"))
            else:
                extraction = self.extract(queries, clock)
            if plans is not None:
                planning = self.given_plans(_check(list(plans), n, "plans"), extraction.tables)
            elif getattr(self.planner, "chooser", None) is not None:  # it chooses among executed candidates
                if pending is not None:
                    text_stage, pending = pending.result(), None
                planning, execution = self.choose(queries, extraction.tables, text_stage.rankings, clock)
            else:
                planning = self.plan(queries, extraction.tables, clock)
            if execution is None:
                execution = self.execute(queries, extraction.tables, planning, clock)
        if pending is not None:
            text_stage = pending.result()
        graph = execution.rankings if execution else [Ranking.empty()] * n
        graph_weights = execution.graph_weights if execution else None
        with clock("fusion"):
            reward = self.components.profile.reward
            fused = FusionStage(fusion(text_stage.rankings, graph, reward, branches, graph_weights))
        named = [self.named(q) for q in queries] if branches == "both" else []
        answers = Answers(queries, text_stage, extraction, planning, execution, fused, None, seconds, named)
        if self.options.rerank:
            answers = dataclasses.replace(answers, reranking=self.rerank(answers, clock, explain))
        return answers

    # ------------------------------------------------------------------------------------------ the stages
    def rank_text(self, queries: list[str], clock: _Clock) -> TextStage:
        retriever = self.text_retriever
        notes: list[str | None] = [None] * len(queries)
        encoder = getattr(retriever, "encoder", None)
        if encoder is not None:  # a dense query encoder truncates by itself; the explanation says so
            notes = [encoder.cut(q, QUERY_MAX_TOKENS).note for q in queries]
        with clock("text"):
            rankings = retriever.rank(queries, k=TEXT_TOP_K)
        return TextStage(rankings, notes)

    def extract(self, queries: list[str], clock: _Clock) -> ExtractionStage:
        with clock("extraction"):
            return ExtractionStage(self.components.extractor.extract(queries))

    def plan(self, queries: list[str], tables: list[EntityTable], clock: _Clock) -> PlanningStage:
        planner = self.planner
        with clock("planning"):
            cuts = [planner.read(q, t) for q, t in zip(queries, tables)]
            attempts = planner.plan([c.text for c in cuts], tables)
        return PlanningStage(attempts, [c.note for c in cuts])

    def choose(
        self, queries: list[str], tables: list[EntityTable], text: list[Ranking], clock: _Clock
    ) -> tuple[PlanningStage, ExecutionStage]:
        """Planning and execution in one: the planner's shortlisted candidates are executed, it picks one with
        their results (:meth:`PlanPolicy.choose <grasp_core.planner.policy.model.PlanPolicy.choose>`); the time spent
        executing is charged to ``execution``, the rest to ``planning``."""
        planner = self.planner
        executing = 0.0

        def run(pairs: Sequence[tuple[int, str]]) -> list[Executed]:
            nonlocal executing
            t0 = time.perf_counter()
            out = self.components.executor.execute_batch(
                [p for _, p in pairs], [queries[i] for i, _ in pairs], [tables[i] for i, _ in pairs]
            )
            executing += time.perf_counter() - t0
            return [Executed(r, t.candidates, t) for r, t in out]

        t0 = time.perf_counter()
        cuts = [planner.read(q, t) for q, t in zip(queries, tables)]
        attempts, chosen, pools = planner.choose(  # type: ignore[attr-defined]
            [c.text for c in cuts],
            tables,
            text,
            run,
            self.components.profile.reward,
            pool_temperature=self.components.profile.reranker_candidates.pool_temperature
            if self.options.rerank or self.options.reranker_candidates
            else None,
        )
        clock.charge("planning", time.perf_counter() - t0 - executing)
        clock.charge("execution", executing)
        planning = PlanningStage(attempts, [c.note for c in cuts])
        rankings, traces = [c.ranking for c in chosen], [c.trace for c in chosen]
        return planning, ExecutionStage(rankings, traces, [c.graph_weight for c in chosen], pools)

    def named(self, query: str) -> tuple[int, ...]:
        """The nodes whose name or alias is the whole ``query`` (the gazetteer's dictionary): a look-up of them.
        The text branch usually ranks such a node first, but a reranker or a plan chooser trained on few look-ups
        can put its neighbours above it; a question that is exactly a name has no other reading."""
        return self.components.gazetteer.named(query)

    def given_plans(self, plans: list[str], tables: list[EntityTable]) -> PlanningStage:
        schema = self.components.graph.schema
        errors = [check_plan(p, schema, t) for p, t in zip(plans, tables)]
        return PlanningStage([PlanAttempt(p, e is None, e, 0) for p, e in zip(plans, errors)], [None] * len(plans))

    def execute(
        self, queries: list[str], tables: list[EntityTable], planning: PlanningStage, clock: _Clock
    ) -> ExecutionStage:
        with clock("execution"):
            out = self.components.executor.execute_batch([a.text for a in planning.attempts], queries, tables)
        return ExecutionStage([r for r, _ in out], [t for _, t in out])

    def rerank(self, answers: Answers, clock: _Clock, explain: bool) -> RerankingStage:
        reranker = self.reranker
        cuts = [reranker.read(q) for q in answers.queries]
        inputs = [dataclasses.replace(x, query=c.text) for x, c in zip(answers.rerank_inputs(), cuts)]
        with clock("reranking"):
            reranked = reranker.rerank(inputs, self.components.profile.rerank.top_k, explain=explain)
        scores: list[dict[int, float]] = []
        contributions: list[Mapping[int, list[tuple[str, float]]]] = []
        for x, r in zip(inputs, reranked):
            ids = x.fused.node_ids[: len(r.scores)].tolist()
            scores.append(dict(zip(ids, r.scores.tolist())))
            contributions.append(_ByNode(ids, r.contributions) if r.contributions is not None else {})
        return RerankingStage([r.ranking for r in reranked], scores, contributions, [c.note for c in cuts])


class _ByNode(Mapping[int, list[tuple[str, float]]]):
    """A candidate list's per-row values by node id; a row is read (so computed, for lazy rows) only when asked."""

    def __init__(self, ids: list[int], rows: Sequence[list[tuple[str, float]]]):
        self._rows, self._at = rows, dict(zip(ids, range(len(rows))))

    def __getitem__(self, node_id: int) -> list[tuple[str, float]]:
        return self._rows[self._at[node_id]]

    def __iter__(self) -> Iterator[int]:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)


def _check(items: list, n: int, what: str) -> list:
    if len(items) != n:
        raise ValueError(f"{len(items)} {what} for {n} queries")
    return items


class _Clock:
    """Times a stage of a batch and charges each query its share."""

    def __init__(self, seconds: list[dict[str, float]]):
        self.seconds = seconds

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.charge(stage, time.perf_counter() - t0)

    def charge(self, stage: str, seconds: float) -> None:
        share = seconds / max(1, len(self.seconds))
        for s in self.seconds:
            s[stage] += share

"""Evaluation steps: every setting's per-query metrics on every test query, and per-stage latency.

Each step scores every query of the ``test`` split (and of ``test-human`` where the dataset has one) and writes,
per split, one row per (setting, query) (``per_query_<split>.parquet``, see :mod:`grasp_core.eval.results`).
Every setting is answered by the answer path (:mod:`grasp_core.answer`), handed the stored text rankings and entity
tables: ``served`` and ``served+rerank`` are what ``grasp retrieve`` answers. ``eval_metrics`` runs the served planner
once per query and stores its plans and execution traces (``plans_<split>.parquet``) and the graph, served and
served+rerank rankings (:func:`rankings_file`); ``ablations`` reuses them and adds the other planners, the teacher
and the ablated systems. Nothing here is selected: the planner, its checkpoints and the reranker's (w, k) were
chosen on validation by earlier steps.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from grasp_core.answer import ANSWER_STAGES, AnswerOptions, AnswerPath
from grasp_core.components import EXECUTOR, EXTRACTOR, FUSED_TEXT, PLANNER, RERANKER, TEXT_RETRIEVERS, Components
from grasp_core.entities.table import EntityTable
from grasp_core.errors import GraspError
from grasp_core.eval.results import (
    RERANKED,
    SERVED,
    SPLITS,
    build_results,
    per_query_file,
    per_query_rows,
    render_markdown,
)
from grasp_core.io import atomic_dir, write_json
from grasp_core.pipeline.planner_inputs import load_teacher_plans
from grasp_core.pipeline.plots import bar_plot
from grasp_core.pipeline.step import step
from grasp_core.planner.rounds import ROUNDS
from grasp_core.provenance import code_commit
from grasp_core.ranking import Ranking, fusion, named_first
from grasp_core.text.rankings_io import read_rankings, write_rankings

ONE_BRANCH = ("text", *TEXT_RETRIEVERS, "graph")  # settings of one branch alone: no look-up of bare names


class SplitRun:
    """Every query of one split with its stored text rankings and entity tables (the text and extraction stages'
    outputs, written by ``text_rankings`` and ``entity_tables`` for every query), answered by answer paths."""

    def __init__(self, components: Components, split: str):
        self.components, self.split = components, split
        q = components.split(split)
        self.qids = q["qid"].astype(int).tolist()
        self.queries = q["query"].tolist()
        self.answers = components.answers(self.qids)
        self.tables = [components.entity_tables[x] for x in self.qids]
        self.text = [components.text_rankings[x] for x in self.qids]
        self.named = [components.gazetteer.named(q) for q in self.queries]  # bare names: AnswerPath.named
        self.rows: list[pd.DataFrame] = []

    def answer(self, path: AnswerPath, tables: list[EntityTable] | None = None, plans: list[str] | None = None):
        return path.answer(self.queries, text=self.text, tables=tables or self.tables, plans=plans)

    def fused(self, graph: list[Ranking], graph_weights: list[float] | None = None) -> list[Ranking]:
        return fusion(self.text, graph, self.components.profile.reward, graph_weights=graph_weights)

    def looked_up(self, rankings: list[Ranking]) -> list[Ranking]:
        """``rankings`` as the answer path serves a system of both branches: a bare name's nodes first."""
        return [named_first(r, n) for r, n in zip(rankings, self.named, strict=True)]

    def add(self, setting: str, rankings: list[Ranking]) -> None:
        """Score a setting's rankings; every setting but a single branch's (``ONE_BRANCH``) answers a bare name
        with its nodes first, as the served system does, so that settings compare by what else they do."""
        if setting not in ONE_BRANCH:
            rankings = self.looked_up(rankings)
        self.rows.append(per_query_rows(setting, self.qids, rankings, self.answers, self.components.skb.num_nodes))

    def write(self, directory: Path) -> pd.DataFrame:
        rows = pd.concat(self.rows, ignore_index=True)
        rows.to_parquet(directory / per_query_file(self.split))
        return rows


def rankings_file(setting: str, split: str) -> str:
    """The ``eval_metrics`` file of a setting's rankings of a split: ``graph``, ``served`` and ``served+rerank``."""
    return f"{setting}_{split}.parquet"


def splits(components: Components) -> list[str]:
    """The evaluated splits this dataset has (``test``; ``test-human`` and the held-out ``feedback`` where they exist)."""
    return [s for s in SPLITS if len(components.split(s))]


def _query_as_relevance(plan_text: str, query: str) -> str:
    """The plan rescoring its candidates by the whole query instead of its relevance text (anchors included)."""
    try:
        obj = json.loads(plan_text)
    except ValueError:
        return plan_text
    if isinstance(obj, dict):
        obj["relevance_text"] = query
    return json.dumps(obj)


def fixed_ratio_merge(text: Ranking, graph: Ranking, graph_share: float = 0.5, top: int = 100) -> Ranking:
    """AF-Retriever-style fusion: the two lists merged at a fixed ratio (graph_share of the slots to graph)."""
    out: list[int] = []
    seen: set[int] = set()
    lists = {"graph": graph.node_ids.tolist(), "text": text.node_ids.tolist()}
    pos = {"graph": 0, "text": 0}
    taken = {"graph": 0, "text": 0}
    while len(out) < top and any(pos[b] < len(lists[b]) for b in lists):
        want = "graph" if taken["graph"] < graph_share * (taken["graph"] + taken["text"] + 1) else "text"
        branch = want if pos[want] < len(lists[want]) else ("text" if want == "graph" else "graph")
        node = lists[branch][pos[branch]]
        pos[branch] += 1
        if node not in seen:
            seen.add(node)
            out.append(node)
            taken[branch] += 1
    return Ranking(np.asarray(out, np.int64), np.linspace(1.0, 0.0, len(out), dtype=np.float32))


def route(text: Ranking, graph: Ranking, error: str | None, candidates: int, max_candidates: int = 100) -> Ranking:
    """HybGRAG-style router: one branch per query — the graph ranking when the plan is valid and selective
    (``error`` and ``candidates`` are the plan's execution trace's)."""
    if error is None and len(graph) and candidates <= max_candidates:
        return graph
    return text


def _summary(components: Components, rows: pd.DataFrame, step: str) -> dict:
    """Asset metadata of an evaluation step: its test-split table and Hit@1 per setting."""
    test = rows[rows["qid"].isin(components.split("test")["qid"].astype(int))]
    results = build_results(
        test, dataset=components.dataset, profile=components.profile.name, commit=code_commit(), split="test"
    )
    hit1 = {name: m["hit@1"] for name, m in results["settings"].items()}
    return {
        "test_queries": results["n_queries"],
        f"{step}_md": render_markdown(results),
        f"{step}_png": bar_plot(hit1, "test Hit@1 by setting", "%"),
        **{f"{name}.hit@1": v for name, v in hit1.items()},
        "path": str(components.art.path(step)),
    }


@step(
    "eval_metrics",
    reads=(*EXECUTOR, *EXTRACTOR, *PLANNER, *FUSED_TEXT, *RERANKER, "name", "rerank", "reranker_candidates", "reward"),
)
def eval_metrics_step(components: Components) -> dict:
    """The served system with and without the reranker (the answer path ``grasp retrieve`` runs), its graph branch
    alone, and every text retriever."""
    served = AnswerPath(components, AnswerOptions())
    text_rankings = {
        r: read_rankings(components.art.require("text_rankings") / f"{r}.parquet") for r in TEXT_RETRIEVERS
    }
    frames, info = [], {}
    with atomic_dir(components.art.path("eval_metrics")) as tmp:
        for split in splits(components):
            run = SplitRun(components, split)
            out = run.answer(served)
            assert out.planning is not None and out.execution is not None and out.reranking is not None
            rerank_s = sum(s["reranking"] for s in out.seconds) / len(run.qids)
            info[split] = {"queries": len(run.qids), "rerank_s_per_query": rerank_s}
            run.add("text", run.text)
            for retriever, by_qid in text_rankings.items():
                run.add(retriever, [by_qid[q] for q in run.qids])
            run.add("graph", out.graph)
            run.add(SERVED, out.fusion.rankings)
            run.add(RERANKED, out.reranking.rankings)
            frames.append(run.write(tmp))
            # the served planner's plans, graph rankings and traces, reused by the ablations
            traces = out.execution.traces
            pd.DataFrame(
                {
                    "qid": run.qids,
                    "plan": [a.text for a in out.planning.attempts],
                    "error": [t.error for t in traces],
                    "candidates": [t.candidates for t in traces],
                    "graph_weight": out.execution.graph_weights or [components.profile.reward.w_graph] * len(traces),
                }
            ).to_parquet(tmp / f"plans_{split}.parquet")
            write_rankings(tmp / rankings_file("graph", split), run.qids, out.graph)
            write_rankings(tmp / rankings_file(SERVED, split), run.qids, run.looked_up(out.fusion.rankings))
            write_rankings(tmp / rankings_file(RERANKED, split), run.qids, out.final)
        K = components.profile.rerank.top_k
        name = served.planner_name
        write_json(
            tmp / "metrics.json",
            {
                "planner": name,
                "profile": components.profile.name,
                "commit": code_commit(),
                "rerank_K": K,
                "splits": info,
            },
        )
    return {"planner": name, **_summary(components, pd.concat(frames, ignore_index=True), "eval_metrics")}


def kept_planners(components: Components) -> list[tuple[str, str, str]]:
    """(setting, name, checkpoint artifact) of the SFT planner and of each RL round that wrote a planner (its gate
    passed or not); the names are :meth:`~grasp_core.components.Components.final_planner`'s."""
    from grasp_core.io import is_complete

    planners = [("sft", "sft", "sft_adapter")]
    return planners + [
        (f"rl{r}", f"round {r}", f"planner:{r}") for r in ROUNDS if is_complete(components.art.path("planner", r))
    ]


@step(
    "ablations",
    reads=(*EXECUTOR, *EXTRACTOR, *PLANNER, *FUSED_TEXT, *RERANKER, "name", "rerank", "reranker_candidates", "reward"),
)
def ablations_step(components: Components) -> dict:
    """Each planner of the progression (SFT, RL rounds), the oracle-guided teacher, and the ablations of paper
    Table 2 / ``docs/design.md`` "Evaluation", fused with the text list without the reranker."""
    name, _ = components.final_planner()
    eval_dir = components.art.require("eval_metrics")
    teacher = load_teacher_plans(components).set_index("qid")
    served_path = AnswerPath(components, AnswerOptions(rerank=False))
    others = {
        key: AnswerPath(components, AnswerOptions(rerank=False, planner=checkpoint))
        for _, key, checkpoint in kept_planners(components)
        if key != name
    }
    frames = []
    with atomic_dir(components.art.path("ablations")) as tmp:
        for split in splits(components):
            run = SplitRun(components, split)
            served = pd.read_parquet(eval_dir / f"plans_{split}.parquet")
            served_plans = served["plan"].tolist()
            by_qid = read_rankings(eval_dir / rankings_file("graph", split))
            graph = [by_qid[q] for q in run.qids]  # the served planner's, as eval_metrics executed them
            weights = served["graph_weight"].astype(float).tolist()  # the chooser's, as eval_metrics fused them
            for setting, key, _ in kept_planners(components):
                run.add(setting, run.fused(graph, weights) if key == name else run.answer(others[key]).fusion.rankings)
            if split == "test":  # the teacher taught the test queries only (never test-human)
                missing = set(run.qids) - set(teacher.index)
                if missing:
                    raise GraspError(
                        f"teacher_plans of {components.dataset!r} lack {len(missing)} test queries (built by an older version "
                        "that taught 100): rematerialize teacher_plans and what depends on it"
                    )
                plans = [teacher.loc[q, "plan"] if teacher.loc[q, "plan"] else "{}" for q in run.qids]
                run.add("teacher", run.answer(served_path, plans=plans).fusion.rankings)
            empty = [type(t)() for t in run.tables]
            run.add("no entity table", run.answer(served_path, tables=empty).fusion.rankings)
            no_relevance = [_query_as_relevance(p, q) for p, q in zip(served_plans, run.queries)]
            run.add("no relevance text", run.answer(served_path, plans=no_relevance).fusion.rankings)
            run.add("fixed-ratio fusion", [fixed_ratio_merge(t, g) for t, g in zip(run.text, graph)])
            run.add(
                "router",
                [
                    route(t, g, None if pd.isna(e) else e, int(c))
                    for t, g, e, c in zip(run.text, graph, served["error"], served["candidates"])
                ],
            )
            frames.append(run.write(tmp))
    served_rows = pd.read_parquet(eval_dir / per_query_file("test"))  # so that the metadata table has McNemar p
    return _summary(components, pd.concat([served_rows, *frames], ignore_index=True), "ablations")


@step(
    "latency",
    reads=(*EXECUTOR, *EXTRACTOR, *PLANNER, *FUSED_TEXT, *RERANKER, "eval", "rerank", "reranker_candidates", "reward"),
)
def latency_step(components: Components) -> dict:
    """Per-stage latency of single queries through the product API (paper Table A3)."""
    from grasp_core.retriever import GraspRetriever

    retriever = GraspRetriever(components)
    queries = components.split("test")["query"].head(components.profile.eval.latency_queries).tolist()
    retriever.retrieve(queries[:2])  # warm-up (lazy model loading, caches)
    per_stage: dict[str, list[float]] = {s: [] for s in (*ANSWER_STAGES, "total")}
    for q in queries:
        t0 = time.perf_counter()
        res = retriever.retrieve([q])[0]
        per_stage["total"].append(time.perf_counter() - t0)
        for s in ANSWER_STAGES:
            per_stage[s].append(res.seconds[s])
    stages = {
        s: {"mean": float(np.mean(v)), "p50": float(np.median(v)), "p95": float(np.percentile(v, 95))}
        for s, v in per_stage.items()
    }
    with atomic_dir(components.art.path("latency")) as tmp:
        write_json(tmp / "latency.json", {"queries": len(queries), "stages": stages})
    return {
        "queries": len(queries),
        "total_mean_s": stages["total"]["mean"],
        "latency_png": bar_plot(
            {s: v["mean"] for s, v in stages.items() if s != "total"}, "mean latency per stage", "s"
        ),
        "path": str(components.art.path("latency")),
    }

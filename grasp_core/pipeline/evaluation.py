"""Evaluation steps: every setting's per-query metrics on every test query, and per-stage latency.

Each step scores every query of the ``test`` split (and of ``test-human`` where the dataset has one) and writes,
per split, one row per (setting, query) (``per_query_<split>.parquet``, see :mod:`grasp_core.eval.results`).
``eval_metrics`` runs the served planner once per query and stores its plans, graph rankings and execution traces
(``plans_<split>.parquet``, ``graph_<split>.parquet``); ``ablations`` reuses them and adds the other planners, the teacher and the ablated systems. Nothing here is
selected: the planner, its checkpoints and the reranker's (w, k) were chosen on validation by earlier steps.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd

from grasp_core.components import EXECUTOR, EXTRACTOR, FUSED_TEXT, PLANNER_LLM, RERANKER, TEXT_RETRIEVERS, Components
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
from grasp_core.pipeline.planner import load_teacher_plans, planner_env
from grasp_core.pipeline.plots import bar_plot
from grasp_core.pipeline.step import step
from grasp_core.planner.inference import plan_queries
from grasp_core.planner.rounds import ROUNDS
from grasp_core.ranking import Ranking, fuse
from grasp_core.text.rankings_io import read_rankings, write_rankings


class SplitRun:
    """Per-setting rankings of every query of one split, computed lazily and shared by all settings."""

    def __init__(self, ws: Components, split: str):
        self.ws, self.split = ws, split
        q = ws.split(split)
        self.qids = q["qid"].astype(int).tolist()
        self.queries = q["query"].tolist()
        self.env = planner_env(ws)
        self.answers = [self.env.gold[x] for x in self.qids]
        self.tables = [self.env.tables[x] for x in self.qids]
        self.text = [self.env.text[x] for x in self.qids]
        self.plans: dict[str, list[str]] = {}
        self.rows: list[pd.DataFrame] = []

    def planner_plans(self, key: str, checkpoint, tables=None) -> list[str]:
        """Plans of the planner at ``checkpoint`` (cached under ``key``; one generation pass per planner)."""
        key = key if tables is None else f"{key}/no-table"
        if key not in self.plans:
            llm = self.ws.planner_llm(checkpoint)
            attempts = plan_queries(
                llm, self.ws.skb.schema, self.queries, tables or self.tables, self.ws.profile.inference
            )
            self.plans[key] = [a.text for a in attempts]
        return self.plans[key]

    def graph(self, plans: list[str], tables=None, drop_relevance: bool = False) -> tuple[list[Ranking], list]:
        if drop_relevance:
            plans = [_query_as_relevance(p, q) for p, q in zip(plans, self.queries)]
        out = self.ws.executor.execute_batch(plans, self.queries, tables or self.tables)
        return [r for r, _ in out], [t for _, t in out]

    def fused(self, graph: list[Ranking]) -> list[Ranking]:
        return [fuse(t, g, self.ws.profile.reward) for t, g in zip(self.text, graph)]

    def add(self, setting: str, rankings: list[Ranking]) -> None:
        self.rows.append(per_query_rows(setting, self.qids, rankings, self.answers, self.ws.skb.num_nodes))

    def write(self, directory: Path) -> pd.DataFrame:
        rows = pd.concat(self.rows, ignore_index=True)
        rows.to_parquet(directory / per_query_file(self.split))
        return rows


def splits(ws: Components) -> list[str]:
    """The evaluated splits this dataset has (``test``, and ``test-human`` where it exists)."""
    return [s for s in SPLITS if len(ws.split(s))]


def code_commit() -> str:
    """The checkout's commit (``+dirty`` with uncommitted changes to tracked files), or ``unknown``."""
    repo = Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=repo, capture_output=True).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


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


def _summary(ws: Components, rows: pd.DataFrame, step: str) -> dict:
    """Asset metadata of an evaluation step: its test-split table and Hit@1 per setting."""
    test = rows[rows["qid"].isin(ws.split("test")["qid"].astype(int))]
    results = build_results(test, dataset=ws.dataset, profile=ws.profile.name, commit=code_commit(), split="test")
    hit1 = {name: m["hit@1"] for name, m in results["settings"].items()}
    return {
        "test_queries": results["n_queries"],
        f"{step}_md": render_markdown(results),
        f"{step}_png": bar_plot(hit1, "test Hit@1 by setting", "%"),
        **{f"{name}.hit@1": v for name, v in hit1.items()},
        "path": str(ws.art.path(step)),
    }


@step("eval_metrics", reads=(*EXECUTOR, *PLANNER_LLM, *FUSED_TEXT, *RERANKER, "inference", "name", "rerank", "reward"))
def eval_metrics_step(ws: Components) -> dict:
    """The served system with and without the reranker, its graph branch alone, and every text retriever."""
    from grasp_core.rerank.features import RerankInput

    name, ckpt = ws.final_planner()
    reranker = ws.reranker()
    K = ws.profile.rerank.top_k
    text_rankings = {r: read_rankings(ws.art.require("text_rankings") / f"{r}.parquet") for r in TEXT_RETRIEVERS}
    frames, info = [], {}
    with atomic_dir(ws.art.path("eval_metrics")) as tmp:
        for split in splits(ws):
            run = SplitRun(ws, split)
            plans = run.planner_plans(name, ckpt)
            graph, traces = run.graph(plans)
            fused = run.fused(graph)
            t0 = time.perf_counter()
            inputs = [
                RerankInput.of(*a) for a in zip(run.queries, fused, run.text, graph, traces, run.tables, strict=True)
            ]
            reranked = reranker.rerank(inputs, K)
            info[split] = {"queries": len(run.qids), "rerank_s_per_query": (time.perf_counter() - t0) / len(run.qids)}
            run.add("text", run.text)
            for retriever, by_qid in text_rankings.items():
                run.add(retriever, [by_qid[q] for q in run.qids])
            run.add("graph", graph)
            run.add(SERVED, fused)
            run.add(RERANKED, [r.ranking for r in reranked])
            frames.append(run.write(tmp))
            # the served planner's plans, graph rankings and traces, reused by the ablations
            pd.DataFrame(
                {
                    "qid": run.qids,
                    "plan": plans,
                    "error": [t.error for t in traces],
                    "candidates": [t.candidates for t in traces],
                }
            ).to_parquet(tmp / f"plans_{split}.parquet")
            write_rankings(tmp / f"graph_{split}.parquet", run.qids, graph)
        write_json(
            tmp / "metrics.json",
            {"planner": name, "profile": ws.profile.name, "commit": code_commit(), "rerank_K": K, "splits": info},
        )
    return {"planner": name, **_summary(ws, pd.concat(frames, ignore_index=True), "eval_metrics")}


def kept_planners(ws: Components) -> list[tuple[str, str, Path]]:
    """(setting, plan-cache key, checkpoint) of the SFT planner and of each RL round that wrote a planner (its
    gate passed or not); the keys are :func:`final_planner`'s names, so the served planner's plans are reused."""
    from grasp_core.io import is_complete

    planners = [("sft", "sft", ws.art.require("sft_adapter"))]
    return planners + [
        (f"rl{r}", f"round {r}", ws.art.path("planner", r)) for r in ROUNDS if is_complete(ws.art.path("planner", r))
    ]


@step("ablations", reads=(*EXECUTOR, *PLANNER_LLM, *FUSED_TEXT, "inference", "name", "reward"))
def ablations_step(ws: Components) -> dict:
    """Each planner of the progression (SFT, RL rounds), the oracle-guided teacher, and the ablations of paper
    Table 2 / ``docs/design.md`` "Evaluation", fused with the text list without the reranker."""
    name, ckpt = ws.final_planner()
    eval_dir = ws.art.require("eval_metrics")
    teacher = load_teacher_plans(ws).set_index("qid")
    frames = []
    with atomic_dir(ws.art.path("ablations")) as tmp:
        for split in splits(ws):
            run = SplitRun(ws, split)
            served = pd.read_parquet(eval_dir / f"plans_{split}.parquet")
            run.plans[name] = served["plan"].tolist()
            by_qid = read_rankings(eval_dir / f"graph_{split}.parquet")
            graph = [by_qid[q] for q in run.qids]
            for setting, key, path in kept_planners(ws):
                planner_graph = graph if key == name else run.graph(run.planner_plans(key, path))[0]
                run.add(setting, run.fused(planner_graph))
            if split == "test":  # the teacher taught the test queries only (never test-human)
                missing = set(run.qids) - set(teacher.index)
                if missing:
                    raise GraspError(
                        f"teacher_plans of {ws.dataset!r} lack {len(missing)} test queries (built by an older version "
                        "that taught 100): rematerialize teacher_plans and what depends on it"
                    )
                plans = [teacher.loc[q, "plan"] if teacher.loc[q, "plan"] else "{}" for q in run.qids]
                run.add("teacher", run.fused(run.graph(plans)[0]))
            empty = [type(t)() for t in run.tables]
            run.add(
                "no entity table", run.fused(run.graph(run.planner_plans(name, ckpt, tables=empty), tables=empty)[0])
            )
            run.add("no relevance text", run.fused(run.graph(run.plans[name], drop_relevance=True)[0]))
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
    return _summary(ws, pd.concat([served_rows, *frames], ignore_index=True), "ablations")


@step(
    "latency",
    reads=(*EXECUTOR, *EXTRACTOR, *PLANNER_LLM, *FUSED_TEXT, *RERANKER, "eval", "inference", "rerank", "reward"),
)
def latency_step(ws: Components) -> dict:
    """Per-stage latency of single queries through the product API (paper Table A3)."""
    from grasp_core.retriever import STAGES, GraspRetriever

    retriever = GraspRetriever(ws)
    queries = ws.split("test")["query"].head(ws.profile.eval.latency_queries).tolist()
    retriever.retrieve(queries[:2])  # warm-up (lazy model loading, caches)
    per_stage: dict[str, list[float]] = {s: [] for s in (*STAGES, "total")}
    for q in queries:
        t0 = time.perf_counter()
        res = retriever.retrieve([q])[0]
        per_stage["total"].append(time.perf_counter() - t0)
        for s in STAGES:
            per_stage[s].append(res.seconds[s])
    stages = {
        s: {"mean": float(np.mean(v)), "p50": float(np.median(v)), "p95": float(np.percentile(v, 95))}
        for s, v in per_stage.items()
    }
    with atomic_dir(ws.art.path("latency")) as tmp:
        write_json(tmp / "latency.json", {"queries": len(queries), "stages": stages})
    return {
        "queries": len(queries),
        "total_mean_s": stages["total"]["mean"],
        "latency_png": bar_plot(
            {s: v["mean"] for s, v in stages.items() if s != "total"}, "mean latency per stage", "s"
        ),
        "path": str(ws.art.path("latency")),
    }

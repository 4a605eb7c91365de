"""Evaluation steps: the full system's test metrics, the ablations with McNemar tests, and per-stage latency.

One pass of the served planner over the test queries is cached (``eval_metrics/test_run.parquet``) and the
ablations recombine it, so each planner runs once per setting. Settings without the reranker are compared
(McNemar on Hit@1) with the full system without the reranker, reranked ones with the full system.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from grasp_core.components import Components
from grasp_core.eval.significance import mcnemar
from grasp_core.io import atomic_dir, write_json
from grasp_core.metrics import evaluate, per_query_hits
from grasp_core.pipeline.planner import load_teacher_plans, planner_env
from grasp_core.pipeline.plots import bar_plot, markdown_table
from grasp_core.planner.inference import check_plan, plan_queries
from grasp_core.planner.rounds import ROUNDS
from grasp_core.ranking import Ranking, fuse

METRIC_COLUMNS = ["setting", "reranker", "hit@1", "hit@5", "recall@20", "mrr", "p (McNemar)"]


class TestRun:
    """Per-setting rankings of the evaluated queries, computed lazily and shared by all tables."""

    def __init__(self, ws: Components, split: str = "test"):
        self.ws, self.split = ws, split
        q = ws.split(split).head(ws.profile.eval.max_test_queries)
        self.qids = q["qid"].astype(int).tolist()
        self.queries = q["query"].tolist()
        self.env = planner_env(ws)
        self.answers = [self.env.gold[x] for x in self.qids]
        self.tables = [self.env.tables[x] for x in self.qids]
        self.text = [self.env.text[x] for x in self.qids]
        self._reranker = None
        self.plans: dict[str, list[str]] = {}
        self.scores: dict[tuple[str, int], float] = {}  # reranker score per (query, node), shared by every setting

    # -- graph branch variants ------------------------------------------------------------------
    def planner_plans(self, name: str, checkpoint, tables=None) -> list[str]:
        key = name if tables is None else f"{name}/no-table"
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

    # -- reranker ----------------------------------------------------------------------------------
    @property
    def reranker(self):
        if self._reranker is None:
            self._reranker = self.ws.reranker()
        return self._reranker

    def rerank(self, rankings: list[Ranking], K: int, cached: bool = True) -> tuple[list[Ranking], float]:
        """Reranked rankings and the mean seconds per query (pairs already scored are reused unless ``cached`` is
        off, which is how per-query times are measured)."""
        from grasp_core.rerank.inference import rerank_batch

        scorer, builder, (w, k) = self.reranker
        t0 = time.perf_counter()
        out = rerank_batch(
            rankings, self.queries[: len(rankings)], scorer, builder, K, w, k, cache=self.scores if cached else None
        )
        return [r.ranking for r in out], (time.perf_counter() - t0) / max(1, len(rankings))

    def metrics(self, rankings: list[Ranking]) -> dict:
        return evaluate(rankings, self.answers, self.ws.skb.num_nodes)

    def hits(self, rankings: list[Ranking]) -> np.ndarray:
        return per_query_hits(rankings, self.answers, self.ws.skb.num_nodes)


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


def route(text: Ranking, graph: Ranking, trace, max_candidates: int = 100) -> Ranking:
    """HybGRAG-style router: one branch per query — the graph ranking when the plan is valid and selective."""
    if trace.error is None and len(graph) and trace.candidates <= max_candidates:
        return graph
    return text


def eval_metrics_step(ws: Components) -> dict:
    run = TestRun(ws)
    name, ckpt = ws.final_planner()
    plans = run.planner_plans(name, ckpt)
    graph, traces = run.graph(plans)
    fused = run.fused(graph)
    rows, hits = [], {}
    rows.append({"setting": f"GRASP ({name})", "reranker": "no", **run.metrics(fused)})
    hits["no-rerank"] = run.hits(fused)
    served = None
    # the deepest K is scored first and timed on every query; a shallower K reuses those scores (a pair's score
    # does not depend on K) and is timed on its own, without the cache, on the latency queries
    depths = sorted(ws.profile.eval.rerank_k_values, reverse=True)
    for K in depths:
        reranked, seconds = run.rerank(fused, K)
        if K != depths[0]:
            seconds = run.rerank(fused[: ws.profile.eval.latency_queries], K, cached=False)[1]
        if K == ws.profile.rerank.top_k:
            served = reranked
        rows.append(
            {
                "setting": f"GRASP ({name}) K={K}",
                "reranker": "yes",
                **run.metrics(reranked),
                "s/query": round(seconds, 3),
            }
        )
    out = {"split": "test", "queries": len(run.qids), "planner": name, "rows": rows}
    human = ws.split("test-human")
    if len(human):
        hrun = TestRun(ws, "test-human")
        hplans = hrun.planner_plans(name, ckpt)
        hfused = hrun.fused(hrun.graph(hplans)[0])
        out["human"] = {
            "queries": len(hrun.qids),
            "no-rerank": hrun.metrics(hfused),
            "rerank": hrun.metrics(hrun.rerank(hfused, ws.profile.rerank.top_k)[0]),
        }
    with atomic_dir(ws.art.path("eval_metrics")) as tmp:
        write_json(tmp / "metrics.json", out)
        cached = {"qid": run.qids, "plan": plans}
        if served is not None:  # the served (reranked) ranking, reused by the ablations instead of reranking again
            cached["reranked_ids"] = [r.node_ids.tolist() for r in served]
            cached["reranked_scores"] = [r.scores.tolist() for r in served]
        # the reranker's score of every pair scored, so the ablations rerank only candidates not seen here
        pairs: dict[str, tuple[list[int], list[float]]] = {q: ([], []) for q in run.queries}
        for (query, node), score in run.scores.items():
            pairs[query][0].append(node)
            pairs[query][1].append(score)
        cached["pair_nodes"] = [pairs[q][0] for q in run.queries]
        cached["pair_scores"] = [pairs[q][1] for q in run.queries]
        pd.DataFrame(cached).to_parquet(tmp / "test_run.parquet")
    main = next(r for r in rows if r["reranker"] == "yes" and r["setting"].endswith(f"K={ws.profile.rerank.top_k}"))
    return {
        "planner": name,
        "test_queries": len(run.qids),
        "hit@1": main["hit@1"],
        "hit@5": main["hit@5"],
        "recall@20": main["recall@20"],
        "mrr": main["mrr"],
        "metrics_md": markdown_table(rows, ["setting", "reranker", "hit@1", "hit@5", "recall@20", "mrr", "s/query"]),
        "metrics_png": bar_plot({r["setting"]: r["hit@1"] for r in rows}, "test Hit@1", "%"),
        "path": str(ws.art.path("eval_metrics")),
    }


def ablations_step(ws: Components) -> dict:
    """Every ablation of paper Table 2 (docs/design.md, Evaluation), with McNemar p-values against the full system."""
    run = TestRun(ws)
    cached = pd.read_parquet(ws.art.require("eval_metrics") / "test_run.parquet")
    name, ckpt = ws.final_planner()
    run.plans[name] = cached["plan"].tolist()
    graph, traces = run.graph(run.plans[name])
    full = run.fused(graph)
    K = ws.profile.rerank.top_k
    if "pair_nodes" in cached:
        run.scores.update(
            ((q, int(n)), float(v))
            for q, nodes, vals in zip(run.queries, cached["pair_nodes"], cached["pair_scores"])
            for n, v in zip(nodes, vals)
        )
    if "reranked_ids" in cached:
        full_rr = [
            Ranking(np.asarray(i, np.int64), np.asarray(v, np.float32))
            for i, v in zip(cached["reranked_ids"], cached["reranked_scores"])
        ]
    else:
        full_rr, _ = run.rerank(full, K)
    ref = {"no": run.hits(full), "yes": run.hits(full_rr)}
    settings: list[tuple[str, str, list[Ranking]]] = [
        (f"GRASP ({name})", "no", full),
        (f"GRASP ({name})", "yes", full_rr),
    ]
    settings.append(("text only", "no", run.text))
    settings.append(("text only", "yes", run.rerank(run.text, K)[0]))
    settings.append(("graph only", "no", graph))
    empty = [type(t)() for t in run.tables]
    no_table_graph = run.graph(run.planner_plans(name, ckpt, tables=empty), tables=empty)[0]
    settings.append(("no entity table", "no", run.fused(no_table_graph)))
    settings.append(
        ("no relevance text (whole query)", "no", run.fused(run.graph(run.plans[name], drop_relevance=True)[0]))
    )
    sft_plans = run.planner_plans("sft", ws.art.require("sft_adapter"))
    settings.append(("SFT only", "no", run.fused(run.graph(sft_plans)[0])))
    from grasp_core.io import is_complete

    if name != "round 1" and is_complete(ws.art.path("planner", "1")):
        settings.append(
            (
                "SFT + RL round 1",
                "no",
                run.fused(run.graph(run.planner_plans("round 1", ws.art.path("planner", "1")))[0]),
            )
        )
    teacher = load_teacher_plans(ws).set_index("qid")
    teacher_plans = [
        teacher.loc[q, "plan"] if q in teacher.index and teacher.loc[q, "plan"] else "{}" for q in run.qids
    ]
    settings.append(("teacher (oracle-guided)", "no", run.fused(run.graph(teacher_plans)[0])))
    settings.append(
        ("fixed-ratio fusion (AF-Retriever)", "no", [fixed_ratio_merge(t, g) for t, g in zip(run.text, graph)])
    )
    settings.append(("router (HybGRAG)", "no", [route(t, g, tr) for t, g, tr in zip(run.text, graph, traces)]))
    progression = planner_progression(ws, {"test": run})
    rows = []
    for setting, rr, rankings in settings:
        m = run.metrics(rankings)
        is_ref = setting.startswith("GRASP")
        p = None if is_ref else mcnemar(run.hits(rankings), ref[rr])[1]
        rows.append({"setting": setting, "reranker": rr, **m, "p (McNemar)": "—" if p is None else f"{p:.3g}"})
    with atomic_dir(ws.art.path("ablations")) as tmp:
        write_json(tmp / "ablations.json", {"queries": len(run.qids), "rows": rows, "progression": progression})
    return {
        "test_queries": len(run.qids),
        "ablations_md": markdown_table(rows, METRIC_COLUMNS),
        "progression_md": markdown_table(progression, PROGRESSION_COLUMNS),
        "ablations_png": bar_plot(
            {f"{r['setting']} [{r['reranker']}]": r["hit@1"] for r in rows}, "test Hit@1 by setting", "%"
        ),
        **{f"{r['setting']} [{r['reranker']}].hit@1": r["hit@1"] for r in rows},
        "path": str(ws.art.path("ablations")),
    }


PROGRESSION_COLUMNS = ["split", "planner", "queries", "fused hit@1", "graph hit@1", "valid plans", "p vs SFT (McNemar)"]


def kept_planners(ws: Components) -> list[tuple[str, str, Path]]:
    """(label, plan-cache key, checkpoint) of the SFT planner and each written RL round; the keys are the ones
    eval_metrics and the ablations use, so a planner already run on the test queries is not run again."""
    from grasp_core.io import is_complete

    planners = [("SFT", "sft", ws.art.require("sft_adapter"))]
    return planners + [
        (f"SFT + RL round {r}", f"round {r}", ws.art.path("planner", r))
        for r in ROUNDS
        if is_complete(ws.art.path("planner", r))
    ]


def planner_progression(ws: Components, runs: dict[str, TestRun] | None = None) -> list[dict]:
    """Fused Hit@1 (no reranker) on validation and test for text only, the teacher, SFT and each kept RL round,
    with McNemar p-values against the SFT planner (issue: the planner's progression)."""
    runs = dict(runs or {})
    planners = kept_planners(ws)
    teacher = load_teacher_plans(ws).set_index("qid")
    rows = []
    for split in ("val", "test"):
        run = runs.get(split) or TestRun(ws, split)
        settings: list[tuple[str, list[Ranking], list[str] | None]] = [("text only", run.text, None)]
        plans = [teacher.loc[q, "plan"] if q in teacher.index and teacher.loc[q, "plan"] else "{}" for q in run.qids]
        settings.append(("teacher (oracle-guided)", run.graph(plans)[0], plans))
        for name, key, path in planners:
            plans = run.planner_plans(key, path)
            settings.append((name, run.graph(plans)[0], plans))
        fused = {name: (graph if name == "text only" else run.fused(graph)) for name, graph, _ in settings}
        ref = run.hits(fused["SFT"])
        for name, graph, written in settings:
            row = {
                "split": split,
                "planner": name,
                "queries": len(run.qids),
                "fused hit@1": run.metrics(fused[name])["hit@1"],
                "graph hit@1": None if written is None else run.metrics(graph)["hit@1"],
                "valid plans": None
                if written is None
                else round(100 * float(np.mean([_is_valid(p, ws, t) for p, t in zip(written, run.tables)])), 1),
            }
            row["p vs SFT (McNemar)"] = "—" if name == "SFT" else f"{mcnemar(run.hits(fused[name]), ref)[1]:.3g}"
            rows.append(row)
    return rows


def _is_valid(plan: str, ws: Components, table) -> bool:
    return check_plan(plan, ws.skb.schema, table) is None


def latency_step(ws: Components) -> dict:
    """Per-stage latency of single queries through the product API (paper Table A3)."""
    from grasp_core.retriever import STAGES, GraspRetriever

    retriever = GraspRetriever(ws)
    queries = ws.split("test")["query"].head(ws.profile.eval.latency_queries).tolist()
    retriever.retrieve(queries[:2])  # warm-up (lazy model loading, caches)
    per_stage: dict[str, list[float]] = {s: [] for s in STAGES}
    totals = []
    for q in queries:
        t0 = time.perf_counter()
        res = retriever.retrieve([q])[0]
        totals.append(time.perf_counter() - t0)
        for s in STAGES:
            per_stage[s].append(res.seconds[s])
    rows: list[dict[str, Any]] = [
        {
            "stage": s,
            "mean (s)": float(np.mean(v)),
            "p50 (s)": float(np.median(v)),
            "p95 (s)": float(np.percentile(v, 95)),
        }
        for s, v in per_stage.items()
    ]
    rows.append(
        {
            "stage": "total",
            "mean (s)": float(np.mean(totals)),
            "p50 (s)": float(np.median(totals)),
            "p95 (s)": float(np.percentile(totals, 95)),
        }
    )
    with atomic_dir(ws.art.path("latency")) as tmp:
        write_json(tmp / "latency.json", {"queries": len(queries), "rows": rows})
    md = "| stage | mean (s) | p50 (s) | p95 (s) |\n|---|---|---|---|\n" + "\n".join(
        f"| {r['stage']} | {r['mean (s)']:.3f} | {r['p50 (s)']:.3f} | {r['p95 (s)']:.3f} |" for r in rows
    )
    return {
        "queries": len(queries),
        "total_mean_s": rows[-1]["mean (s)"],
        "latency_md": md,
        "latency_png": bar_plot({r["stage"]: r["mean (s)"] for r in rows[:-1]}, "mean latency per stage", "s"),
        "path": str(ws.art.path("latency")),
    }

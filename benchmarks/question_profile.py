"""Where one warm question's time goes: per-stage latency and a cProfile of single questions through the product API.

Run: ``python benchmarks/question_profile.py hpo [--root DIR] [--questions 30] [--planner NAME] [--no-rerank]
[--parallel-branches] [--no-profile] [--tag NAME]``; writes ``benchmarks/results/question_profile.json`` (runs with other tags are kept)
and prints the stage table and the functions with the most cumulative time.

The retriever loads once and answers 3 warm-up questions; then the first ``--questions`` test questions are
answered one at a time (as ``grasp query`` and the ``latency`` asset do), timed per stage (``Result.seconds``)
and end to end, and profiled with cProfile (``--no-profile`` measures without its overhead). The 1-minute load
average is recorded: the machine is shared.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import subprocess
import time
from pathlib import Path

import numpy as np

from grasp_core.io import read_json, write_json
from grasp_core.retriever import STAGES, GraspRetriever

RESULTS = Path(__file__).parent / "results" / "question_profile.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--root", default=None)
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--planner", default=None, help="artifact[:round] of the planner (default: the served one)")
    parser.add_argument("--no-rerank", action="store_true")
    parser.add_argument("--parallel-branches", action="store_true", help="text branch in a thread beside the graph")
    parser.add_argument("--no-profile", action="store_true", help="time only (no cProfile overhead)")
    parser.add_argument("--tag", default="run")
    parser.add_argument("--top", type=int, default=25, help="functions listed by cumulative time")
    args = parser.parse_args()

    start = time.perf_counter()
    retriever = GraspRetriever.from_artifacts(
        args.dataset,
        args.root,
        args.profile,
        rerank=not args.no_rerank,
        planner=args.planner,
        parallel_branches=args.parallel_branches,
    )
    load_s = time.perf_counter() - start
    test = retriever.ws.split("test")["query"].tolist()
    retriever.retrieve(test[-3:])  # warm-up: lazily built parts (gazetteer, caches)
    questions = test[: args.questions]
    profiler = None if args.no_profile else cProfile.Profile()
    per_stage, totals = {s: [] for s in STAGES}, []
    for q in questions:
        t0 = time.perf_counter()
        if profiler:
            profiler.enable()
        res = retriever.retrieve([q])[0]
        if profiler:
            profiler.disable()
        totals.append(time.perf_counter() - t0)
        for s in STAGES:
            per_stage[s].append(res.seconds[s])
    ms = {s: 1e3 * np.asarray(v) for s, v in {**per_stage, "total": totals}.items()}
    stages = {
        s: {
            "mean_ms": round(float(v.mean()), 1),
            "p50_ms": round(float(np.median(v)), 1),
            "p95_ms": round(float(np.percentile(v, 95)), 1),
        }
        for s, v in ms.items()
    }
    top = ""
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(args.top)
        top = out.getvalue()
    run = {
        "dataset": args.dataset,
        "questions": len(questions),
        "planner": retriever.planner_name if retriever.branches != "text" else None,
        "rerank": retriever.use_rerank,
        "parallel_branches": args.parallel_branches,
        "profiled": profiler is not None,
        "load_s": round(load_s, 1),
        "stages": stages,
        "load_avg_1min": round(os.getloadavg()[0], 2),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "cprofile_top": top.splitlines()[: args.top + 12],
    }
    runs = read_json(RESULTS) if RESULTS.exists() else {}
    runs[args.tag] = run
    write_json(RESULTS, runs)
    print(top)
    print("| stage | mean ms | p50 ms | p95 ms |\n|---|---|---|---|")
    for s, v in stages.items():
        print(f"| {s} | {v['mean_ms']} | {v['p50_ms']} | {v['p95_ms']} |")
    print(f"load avg {run['load_avg_1min']}, retriever loaded in {run['load_s']} s")


if __name__ == "__main__":
    main()

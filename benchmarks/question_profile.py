"""Where one warm question's time goes: per-stage latency and a cProfile of single questions through the product API.

Run: ``python benchmarks/question_profile.py hpo [--root DIR] [--questions 30] [--planner NAME] [--no-rerank]
[--parallel-branches] [--no-profile] [--tag NAME]``; writes the entry ``--tag`` of
``benchmarks/results/question_profile.json`` (entries with other tags are kept) and prints the stage table and the
functions with the most cumulative time.

The retriever loads once and answers 3 warm-up questions; then the first ``--questions`` test questions are
answered one at a time (as ``grasp query`` and the ``latency`` asset do), timed per stage (``Result.seconds``)
and end to end, and profiled with cProfile (``--no-profile`` measures without its overhead). Each entry holds its
run's ``record`` (commit, machine, the 1-minute load average at the start and the end: the machine is shared).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

from harness import RESULTS, Run, percentiles, read_result, write_result

from grasp_core.retriever import ANSWER_STAGES, GraspRetriever

OUT = RESULTS / "question_profile.json"


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
    bench = Run(profile=args.profile)

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
    test = retriever.components.split("test")["query"].tolist()
    retriever.retrieve(test[-3:])  # warm-up: lazily built parts (gazetteer, caches)
    questions = test[: args.questions]
    profiler = None if args.no_profile else cProfile.Profile()
    per_stage, totals = {s: [] for s in ANSWER_STAGES}, []
    for q in questions:
        t0 = time.perf_counter()
        if profiler:
            profiler.enable()
        res = retriever.retrieve([q])[0]
        if profiler:
            profiler.disable()
        totals.append(time.perf_counter() - t0)
        for s in ANSWER_STAGES:
            per_stage[s].append(res.seconds[s])
    stages = {}
    for s, seconds in {**per_stage, "total": totals}.items():
        p = percentiles([1e3 * x for x in seconds], digits=1)
        stages[s] = {"mean_ms": p["mean"], "p50_ms": p["p50"], "p95_ms": p["p95"]}
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
        "cprofile_top": top.splitlines()[: args.top + 12],
        "record": bench.finish(),
    }
    runs = read_result(OUT)
    runs[args.tag] = run
    write_result(OUT, runs, quiet=True)
    print(top)
    print("| stage | mean ms | p50 ms | p95 ms |\n|---|---|---|---|")
    for s, v in stages.items():
        print(f"| {s} | {v['mean_ms']} | {v['p50_ms']} | {v['p95_ms']} |")
    print(f"load avg {run['record']['load_average_1m']}, retriever loaded in {run['load_s']} s")


if __name__ == "__main__":
    main()

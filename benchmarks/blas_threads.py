"""One warm question with OpenBLAS at its default threads and at one thread, paired per question in one process.

    python benchmarks/blas_threads.py hpo --root dagster_home/artifacts --reps 4

The answer path runs OpenBLAS with one thread (``grasp_core/math_threads.py``). This measures why, the way a
long-lived process (``grasp serve``, the ``latency`` asset) meets it: one retriever answers the first ``--queries``
test questions one at a time, each twice in a row, once with OpenBLAS at its default thread count (the path's limit
lifted) and once at one thread, the order alternating per question; ``--reps`` passes. Writes
``benchmarks/results/blas_threads_<dataset>.json``: per pass both settings' p50/p95 in ms and the median
per-question ratio, whether both answered every question the same, and the run's ``record`` (commit, machine, load
average, date: ``benchmarks/harness.py``).
"""

from __future__ import annotations

import argparse
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd
from harness import RESULTS, Run, percentiles
from threadpoolctl import threadpool_info

from grasp_core import answer, math_threads
from grasp_core.retriever import GraspRetriever


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset")
    parser.add_argument("--root", type=Path, required=True, help="an artifact root with the dataset's finished DAG")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--reps", type=int, default=4)
    args = parser.parse_args()
    run = Run(profile="cpu")  # GraspRetriever.from_artifacts' default
    retriever = GraspRetriever.from_artifacts(args.dataset, args.root)
    queries = pd.read_parquet(Path(args.root) / args.dataset / "queries" / "queries.parquet")
    questions = queries[queries["split"] == "test"]["query"].head(args.queries).tolist()
    retriever.retrieve(questions[:2])
    default_threads = {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}
    settings = {"default": nullcontext, "one": math_threads.answer_threads}  # the path's limit lifted, or kept
    passes, same = [], True
    for rep in range(args.reps):
        ms: dict[str, list[float]] = {"default": [], "one": []}
        for i, question in enumerate(questions):
            tops: dict[str, list[int]] = {}
            for setting in ("default", "one") if i % 2 == 0 else ("one", "default"):
                answer.answer_threads = settings[setting]
                t0 = time.perf_counter()
                result = retriever.retrieve([question])[0]
                ms[setting].append(1000 * (time.perf_counter() - t0))
                tops[setting] = [a.node_id for a in result.answers]
            same &= tops["default"] == tops["one"]
        d, o = np.array(ms["default"]), np.array(ms["one"])
        passes.append(
            {
                "default_ms": percentiles(d, digits=1),
                "one_thread_ms": percentiles(o, digits=1),
                "median_ratio_one_over_default": round(float(np.median(o / d)), 3),
            }
        )
        print(f"pass {rep + 1}/{args.reps}: {passes[-1]}", flush=True)
    answer.answer_threads = math_threads.answer_threads
    report = {
        "dataset": args.dataset,
        "queries": len(questions),
        "openblas_default_threads": sorted(default_threads),
        "passes": passes,
        "same_answers": same,
    }
    run.write(RESULTS / f"blas_threads_{args.dataset}.json", report)


if __name__ == "__main__":
    main()

"""Planning time per query of the served planner (the `cpu` plan-selection policy), warm, one query at a time.

    python benchmarks/planning_latency.py --dataset hpo --artifacts dagster_home/artifacts [--queries 200]

Loads the dataset's served planner (the last RL round that passed its gate, else SFT) and times
``Planner.plan`` on single test queries with their entity tables (query encoding, candidate enumeration,
features, scoring), after a warm-up that fills the verbalization cache. Writes
``benchmarks/results/planning_latency.json`` (p50 and p95 in ms, with the run's record: commit, machine, torch
threads and the load average at the start and the end, since this machine is shared).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from harness import RESULTS, Run, load_components, percentiles


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="hpo")
    ap.add_argument("--artifacts", type=Path, required=True, help="artifact root with a trained planner")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    run = Run(profile="cpu", threads=args.threads)
    torch.set_num_threads(args.threads)
    components = load_components(args.dataset, args.artifacts, "cpu")
    name, path = components.final_planner()
    planner = components.planner(path)
    test = components.split("test").head(args.queries)
    queries, tables = test["query"].tolist(), [components.entity_tables[int(q)] for q in test["qid"]]
    planner.plan(queries[:10], tables[:10])  # warm-up
    times, candidates = [], []
    for q, t in zip(queries, tables):
        start = time.perf_counter()
        planner.plan([q], [t])
        times.append(1000 * (time.perf_counter() - start))
        candidates.append(len(planner.featurizer.candidates(q, t)))
    out = {
        "dataset": args.dataset,
        "planner": name,
        "head": planner.cfg.head,
        "queries": len(times),
        **{f"{k}_ms": v for k, v in percentiles(times).items() if k != "n"},  # n: queries
        "candidates_per_query": round(float(np.mean(candidates)), 1),
    }
    run.write(RESULTS / "planning_latency.json", out)


if __name__ == "__main__":
    main()

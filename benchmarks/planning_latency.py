"""Planning time per query of the served planner (the `cpu` plan-selection policy), warm, one query at a time.

    python benchmarks/planning_latency.py --dataset hpo --artifacts dagster_home/artifacts [--queries 200]

Loads the dataset's served planner (the last RL round that passed its gate, else SFT) and times
``Planner.plan`` on single test queries with their entity tables (query encoding, candidate enumeration,
features, scoring), after a warm-up that fills the verbalization cache. Writes
``benchmarks/results/planning_latency.json`` (p50 and p95 in ms, the load average: this machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from grasp_core.artifacts import Artifacts
from grasp_core.components import Components
from grasp_core.profiles import get_profile

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="hpo")
    ap.add_argument("--artifacts", type=Path, required=True, help="artifact root with a trained planner")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ws = Components(Artifacts.for_dataset(args.dataset, args.artifacts), get_profile("cpu"))
    name, path = ws.final_planner()
    planner = ws.planner(path)
    test = ws.split("test").head(args.queries)
    queries, tables = test["query"].tolist(), [ws.entity_tables[int(q)] for q in test["qid"]]
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
        "threads": args.threads,
        "p50_ms": round(float(np.percentile(times, 50)), 2),
        "p95_ms": round(float(np.percentile(times, 95)), 2),
        "mean_ms": round(float(np.mean(times)), 2),
        "candidates_per_query": round(float(np.mean(candidates)), 1),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "planning_latency.json").write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

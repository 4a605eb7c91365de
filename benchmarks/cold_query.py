"""What one ``grasp query`` from a cold shell costs: wall and CPU seconds, peak memory, and where the time goes.

Run: ``python benchmarks/cold_query.py hpo [--root DIR] [--runs 3] [--question TEXT]``; writes
``benchmarks/results/cold_query.json`` and prints it.

Each run starts ``grasp query DATASET QUESTION`` as a new process (the installed command, as a user types it)
and times it to exit; CPU seconds and peak RSS come from the child's resource usage. The same is done for
``python -c "import grasp_core.retriever"`` (the imports alone), so the rest is loading the artifacts and
answering. The operating system's file cache is warm after the first run (the figures are the median of the
runs); the 1-minute load average is recorded because the machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from grasp_core.io import write_json

RESULTS = Path(__file__).parent / "results" / "cold_query.json"
GRASP = Path(sys.executable).with_name("grasp")


def timed(cmd: list[str]) -> dict:
    """Wall seconds, CPU seconds and peak RSS of one child process run to completion."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return {
        "wall_s": wall,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "max_rss_mib": after.ru_maxrss / 1024,  # the largest child so far (see main)
    }


def median(runs: list[dict]) -> dict:
    return {k: round(float(np.median([r[k] for r in runs])), 2) for k in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", default="hpo")
    parser.add_argument("--root", default=None, help="artifact root (default: $GRASP_HOME or dagster_home/artifacts)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--question", default="Which genes are linked to Rett syndrome?")
    args = parser.parse_args()
    root = ["--root", args.root] if args.root else []
    query = [str(GRASP), *root, "query", args.dataset, args.question]
    imports = [sys.executable, "-c", "import grasp_core.retriever"]
    load_before = os.getloadavg()[0]
    # the imports first: peak RSS is the largest child's so far, and the query's is the larger
    import_runs = [timed(imports) for _ in range(args.runs)]
    query_runs = []
    for i in range(args.runs):
        query_runs.append(timed(query))
        print(f"run {i + 1}: query {query_runs[-1]['wall_s']:.1f} s wall", flush=True)
    result = {
        "command": " ".join(["grasp", *root, "query", args.dataset, repr(args.question)]),
        "runs": args.runs,
        "query": median(query_runs),
        "imports_only": median(import_runs),
        "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
        "cores": len(os.sched_getaffinity(0)),
    }
    write_json(RESULTS, result)
    print(result)


if __name__ == "__main__":
    main()

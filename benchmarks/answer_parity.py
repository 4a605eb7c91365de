"""What is measured is what is served, on a real dataset: every evaluated query (``test`` and ``test-human`` where
it exists) answered again through ``GraspRetriever.retrieve`` from the finished artifacts, with and without the
reranker, and compared query by query with the ``eval_metrics`` rankings the results tables come from.

Run: ``python benchmarks/answer_parity.py hpo [--root DIR] [--profile cpu]``; writes
``benchmarks/results/answer_parity_<dataset>.json`` (per setting and split: queries compared, qids that differ).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from grasp_core.artifacts import Artifacts
from grasp_core.components import Components
from grasp_core.io import write_json
from grasp_core.pipeline.answer_parity import answer_parity
from grasp_core.profiles import get_profile

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", default="hpo")
    parser.add_argument("--root", default=None, help="artifact root (default: $GRASP_HOME or dagster_home/artifacts)")
    parser.add_argument("--profile", default="cpu")
    args = parser.parse_args()
    ws = Components(Artifacts.for_dataset(args.dataset, args.root), get_profile(args.profile))
    start = time.perf_counter()
    report = answer_parity(ws, progress=print)
    out = {
        "command": f"python benchmarks/answer_parity.py {args.dataset} --profile {args.profile}",
        "dataset": args.dataset,
        "settings": report,
        "all_equal": all(not row["differ"] for row in report.values()),
        "seconds": round(time.perf_counter() - start, 1),
    }
    write_json(RESULTS / f"answer_parity_{args.dataset}.json", out)
    print(f"all equal: {out['all_equal']} ({out['seconds']} s)")


if __name__ == "__main__":
    main()

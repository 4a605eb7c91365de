"""What is measured is what is served, on a real dataset: every evaluated query (``test`` and ``test-human`` where
it exists) answered again through ``GraspRetriever.retrieve`` from the finished artifacts, with and without the
reranker, and compared query by query with the ``eval_metrics`` rankings the results tables come from.

Run: ``python benchmarks/answer_parity.py hpo [--root DIR] [--profile cpu]``; writes
``benchmarks/results/answer_parity_<dataset>.json`` (per setting and split: queries compared, qids that differ; the
seconds the comparison took; the run's ``record``: command, commit, machine, load average, date, profile).
"""

from __future__ import annotations

import argparse
import time

from harness import RESULTS, Run, load_components

from grasp_core.pipeline.answer_parity import answer_parity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", default="hpo")
    parser.add_argument("--root", default=None, help="artifact root (default: $GRASP_HOME or dagster_home/artifacts)")
    parser.add_argument("--profile", default="cpu")
    args = parser.parse_args()
    run = Run(profile=args.profile)
    components = load_components(args.dataset, args.root, args.profile)
    start = time.perf_counter()
    report = answer_parity(components, progress=print)
    out = {
        "dataset": args.dataset,
        "settings": report,
        "all_equal": all(not row["differ"] for row in report.values()),
        "seconds": round(time.perf_counter() - start, 1),
    }
    run.write(RESULTS / f"answer_parity_{args.dataset}.json", out, quiet=True)
    print(f"all equal: {out['all_equal']} ({out['seconds']} s)")


if __name__ == "__main__":
    main()

"""Warm per-question answer time of two checkouts' code on the same artifacts, interleaved (before/after a change).

    python benchmarks/answer_latency.py hpo --root dagster_home/artifacts --before /path/to/old/checkout \
        --after . --label encode_once

Each checkout answers the first ``--queries`` test questions one at a time through the product API
(:class:`~grasp_core.retriever.GraspRetriever`, as the ``latency`` asset does), in its own process with that
checkout first on ``PYTHONPATH``, after two warm-up questions. The two run alternately ``--rounds`` times, so
both see the same machine load; a question's time in a checkout is its least disturbed (smallest) total over the
rounds, and ``every_run`` is the total's p50/p95 over every (round, question), what a user meets on a machine whose
own threads disturb it. Writes ``benchmarks/results/answer_latency_<label>.json``: per checkout its commit, per-stage
and total p50/p95 (and mean) in ms, ``every_run``, and the p50 ratios after/before; also whether both gave the same
top-10 answers for every question (a speed change must not change an answer); and the run's ``record`` (this
checkout's commit, machine, load average, date: ``benchmarks/harness.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import RESULTS, Run, percentiles

CHILD = """
import json, sys, time
import pandas as pd
import grasp_core
from grasp_core.retriever import GraspRetriever
from grasp_core.answer import ANSWER_STAGES
dataset, root, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
retriever = GraspRetriever.from_artifacts(dataset, root)
queries = pd.read_parquet(f"{root}/{dataset}/queries/queries.parquet")
questions = queries[queries["split"] == "test"]["query"].head(n).tolist()
retriever.retrieve(questions[:2])
rows = []
for q in questions:
    t0 = time.perf_counter()
    res = retriever.retrieve([q])[0]
    total = time.perf_counter() - t0
    rows.append({"total": total, **{s: res.seconds[s] for s in ANSWER_STAGES}, "top": [a.node_id for a in res.answers[:10]]})
json.dump({"grasp_core": grasp_core.__file__, "rows": rows}, open(out, "w"))
"""


def _commit(checkout: Path) -> str:
    """The commit of a compared checkout (the run's record has only the one this script runs from)."""
    run = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return run.stdout.strip() or "unknown"


def _run(checkout: Path, args, out: Path) -> list[dict]:
    """One process answering with ``checkout``'s code. It runs in the checkout: ``python -c`` puts the working
    directory first on ``sys.path``, so started anywhere else inside a checkout it would import that one's code."""
    checkout = checkout.resolve()
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    run = subprocess.run(
        [sys.executable, "-c", CHILD, args.dataset, str(args.root.resolve()), str(args.queries), str(out)],
        env=env,
        cwd=checkout,
        stderr=subprocess.PIPE,
        text=True,
    )
    if run.returncode:
        raise SystemExit(f"{checkout}: the answering process failed:\n{run.stderr[-2000:]}")
    answered = json.loads(out.read_text())
    if not Path(answered["grasp_core"]).resolve().is_relative_to(checkout):
        raise SystemExit(f"{checkout}: the answering process imported {answered['grasp_core']}, not this checkout's")
    return answered["rows"]


def _ms(seconds) -> dict[str, float]:
    return percentiles((1000.0 * s for s in seconds), digits=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset")
    parser.add_argument("--root", type=Path, required=True, help="an artifact root with the dataset's finished DAG")
    parser.add_argument("--before", type=Path, required=True, help="checkout whose code runs first")
    parser.add_argument("--after", type=Path, required=True, help="checkout with the change")
    parser.add_argument("--label", required=True, help="names the results file")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    run = Run(profile="cpu")  # the children's GraspRetriever.from_artifacts default
    runs: dict[str, list[list[dict]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for side in ("before", "after"):
                runs[side].append(_run(getattr(args, side), args, Path(tmp) / f"{side}{r}.json"))
                print(f"round {r + 1}/{args.rounds} {side}: done", flush=True)
    result: dict = {
        "dataset": args.dataset,
        "queries": args.queries,
        "rounds": args.rounds,
    }
    for side in ("before", "after"):
        best = [min(per_round, key=lambda row: row["total"]) for per_round in zip(*runs[side])]
        stages = [k for k in best[0] if k != "top"]
        result[side] = {"commit": _commit(getattr(args, side)), **{s: _ms([b[s] for b in best]) for s in stages}}
        result[side]["every_run"] = {"total": _ms([row["total"] for rows in runs[side] for row in rows])}
    result["total_p50_ratio_after_over_before"] = round(
        result["after"]["total"]["p50"] / result["before"]["total"]["p50"], 3
    )
    result["every_run_total_p50_ratio_after_over_before"] = round(
        result["after"]["every_run"]["total"]["p50"] / result["before"]["every_run"]["total"]["p50"], 3
    )
    result["same_top10_answers"] = all(
        a["top"] == b["top"] for a, b in zip(runs["before"][0], runs["after"][0], strict=True)
    )
    run.write(RESULTS / f"answer_latency_{args.label}.json", result)


if __name__ == "__main__":
    main()

"""RL's effect by plan depth (the paper's Table A6 shape), from a finished pipeline's evaluation artifacts.

Run: ``python benchmarks/rl_by_depth.py hpo --root dagster_home/artifacts [--split test]``; writes
``benchmarks/results/rl_by_depth_<dataset>.json`` and prints a table.

Each question of the split is put in the bucket of the *served* planner's plan (``eval_metrics/plans_<split>``):
abstain, or the plan's depth (the longest anchor-to-target chain in hops: 0 for a zero-hop plan or a term look-up,
1, 2, 3+). Per bucket: its share of the questions, and fused Hit@1 (no reranker) of the SFT planner and of every RL
round on those questions (``ablations/per_query_<split>``), with the served planner's.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
from harness import RESULTS, Run

from grasp_core.artifacts import Artifacts
from grasp_core.eval.results import per_query_file
from grasp_core.plan.model import ABSTAIN
from grasp_core.planner.policy.model import path_keys

BUCKETS = ("abstain", "0", "1", "2", "3+")


def depth_bucket(plan: str) -> str:
    if plan == ABSTAIN or not plan:
        return "abstain"
    p = json.loads(plan)
    hops = max(len(k.split("|")) - 1 for k in path_keys(p)) if p["anchors"] and p["hops"] else 0
    return str(hops) if hops < 3 else "3+"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--root", type=Path, required=True, help="a finished pipeline's artifact root")
    parser.add_argument("--split", default="test")
    args = parser.parse_args()
    run = Run()
    art = Artifacts.for_dataset(args.dataset, args.root)
    plans = pd.read_parquet(art.require("eval_metrics") / f"plans_{args.split}.parquet")
    served = pd.read_parquet(art.require("eval_metrics") / per_query_file(args.split))
    ablations = pd.read_parquet(art.require("ablations") / per_query_file(args.split))
    rows = pd.concat([served, ablations], ignore_index=True)
    settings = [s for s in ("sft", "rl1", "rl2", "served") if s in set(rows["setting"])]
    hit = rows[rows["setting"].isin(settings)].pivot_table(index="qid", columns="setting", values="hit@1")
    bucket = plans.set_index("qid")["plan"].map(depth_bucket)
    table = []
    for b in BUCKETS:
        qids = bucket.index[bucket == b]
        if not len(qids):
            continue
        part = hit.loc[qids]
        table.append(
            {"depth": b, "share": round(100 * len(qids) / len(bucket), 1), "queries": len(qids)}
            | {s: round(100 * float(part[s].mean()), 1) for s in settings}
        )
    out = {"dataset": args.dataset, "split": args.split, "bucket_by": "served plan", "rows": table}
    run.write(RESULTS / f"rl_by_depth_{args.dataset}.json", out, quiet=True)
    print(pd.DataFrame(table).to_string(index=False))


if __name__ == "__main__":
    main()

"""RL on top of SFT at several SFT data sizes (the paper's Table A5 shape), from finished builds of the base and of
variants that set ``policy_train.sft_queries`` (``experiments/sft-250.toml``, ``experiments/sft-1000.toml``).

Run: ``python benchmarks/sft_size.py hpo --root dagster_home/artifacts --variants sft-250 sft-1000 [--split test]``
after ``grasp pipeline hpo --variant sft-250`` (and ``sft-1000``); writes ``benchmarks/results/sft_size_<dataset>.json``
and prints a table.

Per build, on every question of the split: fused Hit@1 (no reranker) of the SFT planner and of the served planner
(the last RL round whose gate passed), McNemar p of served vs SFT, and Hit@1 with the reranker. The SFT size is the
number of taught training questions whose plans SFT imitated (the base: every taught one).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from harness import RESULTS, Run

from grasp_core.eval.results import per_query_file
from grasp_core.eval.significance import mcnemar
from grasp_core.experiments import artifacts_for, resolve_profile, variant_key


def measure(dataset: str, variant: str | None, root: Path, split: str) -> dict:
    key = variant_key(dataset, variant)
    art = artifacts_for(key, root)
    rows = pd.concat(
        [pd.read_parquet(art.require(a) / per_query_file(split)) for a in ("eval_metrics", "ablations")],
        ignore_index=True,
    )
    hit = rows.pivot_table(index="qid", columns="setting", values="hit@1")
    teacher = pd.read_parquet(art.require("teacher_plans") / "plans.parquet")
    taught = int((teacher["split"] == "train").sum())
    limit = resolve_profile(key).policy_train.sft_queries
    sft, served = hit["sft"].to_numpy(bool), hit["served"].to_numpy(bool)
    return {
        "build": variant or "base",
        "sft_queries": min(limit, taught) if limit is not None else taught,
        "taught_queries": taught,
        "sft": round(100 * float(np.mean(sft)), 2),
        "served_rl": round(100 * float(np.mean(served)), 2),
        "served_vs_sft_p": float(f"{mcnemar(served, sft)[1]:.3g}"),
        "served_rerank": round(100 * float(hit["served+rerank"].mean()), 2),
        "queries": len(hit),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--root", type=Path, required=True, help="the artifact root holding the base and variants")
    parser.add_argument("--variants", nargs="+", required=True, help="variants that set policy_train.sft_queries")
    parser.add_argument("--split", default="test")
    args = parser.parse_args()
    run = Run(dataset=args.dataset, split=args.split)
    table = [measure(args.dataset, v, args.root, args.split) for v in [*args.variants, None]]
    table.sort(key=lambda r: r["sft_queries"])
    run.write(RESULTS / f"sft_size_{args.dataset}.json", {"rows": table}, quiet=True)
    print(pd.DataFrame(table).to_string(index=False))


if __name__ == "__main__":
    main()

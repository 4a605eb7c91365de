"""Random generated queries of a built dataset, with their gold answers, and its query target-type mix.

    grasp data build hpo && python benchmarks/sample_queries.py hpo [--split test] [-n 20] [--root DIR]

Reads the ``skb`` and ``queries`` artifacts (``grasp data build``) and writes
``benchmarks/results/sample_queries_<dataset>.md``: ``n`` queries of ``split`` drawn with a fixed seed, each
with its target type, gold count, up to three gold names and its template, then the target-type mix.
"""

from __future__ import annotations

import argparse
import random

import pandas as pd
from harness import RESULTS

from grasp_core.artifacts import Artifacts
from grasp_core.io import atomic_file
from grasp_core.skb.format import read_skb


def sample_table(dataset: str, split: str, n: int, root: str | None, seed: int = 0) -> str:
    art = Artifacts.for_dataset(dataset, root)
    skb = read_skb(art.require("skb"), queries_file=art.require("queries") / "queries.parquet")
    targets = skb.query_target_types()
    rows = skb.queries.index[skb.queries["split"] == split].tolist()
    names = skb.nodes["name"].to_numpy()
    lines = [
        f"{n} random `{split}` queries of `{dataset}` (seed {seed}; `benchmarks/sample_queries.py`):",
        "",
        "| query | target | gold | gold answers (≤3) | template |",
        "|---|---|---|---|---|",
    ]
    for i in sorted(random.Random(seed).sample(rows, min(n, len(rows)))):
        q = skb.queries.loc[i]
        gold = "; ".join(str(names[a]) for a in list(q["answer_ids"])[:3])
        cells = [q["query"], targets[i], str(len(q["answer_ids"])), gold, f"`{q.get('template', '')}`"]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    mix = pd.crosstab(targets, skb.queries["split"])
    mix["all"] = mix.sum(axis=1)
    mix["share"] = (100 * mix["all"] / mix["all"].sum()).map(lambda v: f"{v:.1f}%")
    lines += ["", f"Target types of all {len(skb.queries):,} `{dataset}` queries (`grasp data stats {dataset}`):", ""]
    lines += ["| target | " + " | ".join(map(str, mix.columns)) + " |", "|---" * (len(mix.columns) + 1) + "|"]
    lines += [f"| {t} | " + " | ".join(str(v) for v in row) + " |" for t, row in mix.iterrows()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", default="hpo")
    parser.add_argument("--split", default="test")
    parser.add_argument("-n", type=int, default=20)
    parser.add_argument("--root", default=None, help="artifact root (default: $GRASP_HOME or dagster_home/artifacts)")
    args = parser.parse_args()
    text = sample_table(args.dataset, args.split, args.n, args.root)
    out = RESULTS / f"sample_queries_{args.dataset}.md"
    with atomic_file(out, "w") as handle:
        handle.write(text)
    print(text + f"-> {out}")


if __name__ == "__main__":
    main()

"""Two finished pipeline runs of one dataset compared on the same test questions: per setting, Hit@1 before and
after, the McNemar p of the change (per-query Hit@1, paired by qid), and the served planner's abstentions.

Run: ``python benchmarks/compare_runs.py BEFORE_ARTIFACTS AFTER_ARTIFACTS --out benchmarks/results/NAME.json
[--split test] [--note TEXT]``, each ``$DAGSTER_HOME/artifacts/<dataset>`` of a finished run. Writes ``--out`` (per
split: the queries both runs answered, per setting Hit@1 before/after and McNemar p, the served-vs-text and
rerank-vs-served p of each run, the abstentions) with the run's ``record`` (command, commit, machine, date:
``benchmarks/harness.py``) and prints it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
from harness import Run

from grasp_core.eval.significance import mcnemar

SETTINGS = ("text", "graph", "served", "served+rerank")


def hits(art: Path, split: str) -> pd.DataFrame:
    """qid x setting per-query Hit@1 of a run's ``split``."""
    rows = pd.read_parquet(art / "eval_metrics" / f"per_query_{split}.parquet")
    return rows.pivot_table(index="qid", columns="setting", values="hit@1")


def abstains(art: Path, split: str) -> int | None:
    path = art / "eval_metrics" / f"plans_{split}.parquet"
    return int((pd.read_parquet(path)["error"] == "abstain").sum()) if path.exists() else None


def compare(before: Path, after: Path, split: str) -> dict:
    a, b = hits(before, split), hits(after, split)
    common = a.index.intersection(b.index)
    out: dict = {"split": split, "queries": len(common), "settings": {}}
    for s in SETTINGS:
        if s in a and s in b:
            x, y = a.loc[common, s].to_numpy() > 0, b.loc[common, s].to_numpy() > 0
            out["settings"][s] = {
                "before": round(100 * x.mean(), 1),
                "after": round(100 * y.mean(), 1),
                "p_before_vs_after": float(f"{mcnemar(x, y)[1]:.4g}"),
            }
    for name, frame in (("before", a), ("after", b)):
        f = frame.loc[common]
        out[f"{name}_served_vs_text_p"] = float(f"{mcnemar(f['served'] > 0, f['text'] > 0)[1]:.4g}")
        out[f"{name}_rerank_vs_served_p"] = float(f"{mcnemar(f['served+rerank'] > 0, f['served'] > 0)[1]:.4g}")
    out["abstains"] = {"before": abstains(before, split), "after": abstains(after, split)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--split", nargs="+", default=["test"])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    run = Run()
    out = {
        "note": args.note,
        "before": str(args.before),
        "after": str(args.after),
        "splits": {s: compare(args.before, args.after, s) for s in args.split},
    }
    run.write(args.out, out)


if __name__ == "__main__":
    main()

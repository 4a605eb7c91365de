"""Which graph weights the plan chooser should pick among: the served planner's chooser retrained per weight grid.

Run: ``python benchmarks/chooser_weights.py hpo --root dagster_home/artifacts [--grids 1 0.5,1,2 0,0.25,0.5,1,2,4]``;
writes ``benchmarks/results/chooser_weights_<dataset>.json`` and prints a table.

The served planner's policy shortlists every training, validation and test question (its chooser's ``k``, plus
ABSTAIN); each shortlist is executed once (the build's executed plans are reused) and offered at each grid's
graph weights (:func:`~grasp_core.planner.policy.chooser.shortlists`). For each grid a chooser is fit on the
training questions exactly as an RL round fits it (``ChooserConfig``, labels: fused Hit@1 at the option's weight)
and read on validation (where a grid is chosen) and test. Reported per grid: fused Hit@1 of its picks, and the
oracle over its options.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from harness import RESULTS, Run, load_components

from grasp_core.pipeline.planner_policy import PolicyData
from grasp_core.planner.policy.chooser_train import fit_chooser, hit1, picks


def served_shortlists(dataset: str, root: str, profile: str, weights: tuple[float, ...] | None = None):
    """The served planner's label, chooser, its config and every training, validation and test question's
    shortlist (its chooser's ``k`` plus ABSTAIN, each offered at ``weights``; default: the profile's chooser's) with
    their fused Hit@1 labels and the questions' gold answers: per split, (shortlists, labels, gold)."""
    components = load_components(dataset, root, profile)
    label, path = components.final_planner()
    policy = components.planner(path)
    chooser = getattr(policy, "chooser", None)
    if chooser is None:
        raise SystemExit(f"the served planner of {dataset} ({label}) has no chooser: build the RL rounds first")
    data = PolicyData(components, policy, path)
    env = data.env
    splits = {
        "train": [int(q) for q in components.split("train")["qid"] if env.gold.get(int(q))],
        "val": data.val_qids + data.heldout_qids,
        "test": [int(q) for q in components.split("test")["qid"] if env.gold.get(int(q))],
    }
    t0 = time.perf_counter()
    options = {}
    for split, qids in splits.items():
        options[split] = (*data.shortlists(qids, chooser.asked, chooser.k, weights), [env.gold[q] for q in qids])
        print(f"{split}: {len(qids)} shortlists, {time.perf_counter() - t0:.0f} s", flush=True)
    return label, chooser, components.profile.chooser, options


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--root", required=True, help="a finished pipeline's artifact root")
    parser.add_argument("--grids", nargs="+", default=["1", "0.5,1,2", "0,0.25,0.5,1,2,4"])
    parser.add_argument("--profile", default="cpu")
    args = parser.parse_args()
    run = Run(profile=args.profile)
    grids = [tuple(float(w) for w in g.split(",")) for g in args.grids]
    every = tuple(sorted({w for g in grids for w in g}))
    label, chooser, cfg, options = served_shortlists(args.dataset, args.root, args.profile, every)

    def restricted(split: str, grid: tuple[float, ...]):
        """The options at ``grid``'s weights (an empty result's single option always) and their labels."""
        lists, labels = [], []
        for s, lab in zip(*options[split][:2]):
            keep = [i for i, e in enumerate(s.executed) if e.graph_weight in grid or not len(e.ranking)]
            lists.append(s.subset(keep))
            labels.append(lab[keep])
        return lists, labels

    rows = []
    for grid in grids:
        booster = fit_chooser(*restricted("train", grid), cfg)
        row: dict = {"graph_weights": list(grid)}
        for split in ("val", "test"):
            lists, labels = restricted(split, grid)
            row[split] = round(hit1(lists, labels, picks(booster, lists, chooser.k)), 2)
            row[f"{split}_oracle"] = round(100.0 * float(np.mean([lab.max(initial=0) > 0 for lab in labels])), 2)
        rows.append(row)
        print(row, flush=True)
    write_rows(run, "chooser_weights", args.dataset, label, chooser, options, rows)


def write_rows(run: Run, name: str, dataset: str, label: str, chooser, options: dict, rows: list[dict]) -> None:
    """Write ``benchmarks/results/<name>_<dataset>.json``: the served planner, its ``k``, the questions per split
    and one row per refit chooser."""
    out = {
        "dataset": dataset,
        "planner": label,
        "k": chooser.k,
        "queries": {s: len(o[0]) for s, o in options.items()},
        "rows": rows,
    }
    run.write(RESULTS / f"{name}_{dataset}.json", out, quiet=True)


if __name__ == "__main__":
    main()

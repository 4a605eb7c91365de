"""What the plan chooser learns from: the served planner's chooser refit without groups of its features, or with
other LightGBM settings, on the same shortlists.

Run: ``python benchmarks/chooser_variants.py hpo --root dagster_home/artifacts``; writes
``benchmarks/results/chooser_variants_<dataset>.json`` and prints a row per variant.

The served planner's policy shortlists every training, validation and test question (its chooser's ``k``, plus
ABSTAIN, at the profile's chooser graph weights; :func:`chooser_weights.served_shortlists`). Each variant is fit on the
training questions as an RL round fits the chooser and read on validation (where a variant would be chosen) and
test, picking among the policy's first 3, 5 and ``k`` candidates. A dropped feature is set to 0 in every split
(LightGBM never splits on a constant). ``p_vs_base``: McNemar of the test hits at ``k`` against the base refit.
The policy's scores on training questions are in-sample (the policy was trained on them): ``no_policy_*`` shows
what the chooser reads from them.
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
from chooser_weights import served_shortlists, write_rows
from harness import Run

from grasp_core.eval.significance import mcnemar
from grasp_core.planner.policy.chooser import POLICY_FEATURES, feature_names
from grasp_core.planner.policy.chooser_train import fit_chooser, picks

VARIANTS: dict[str, tuple[tuple[str, ...], dict]] = {
    "base": ((), {}),
    "no_policy_scores": (("policy_logit", "policy_gap", "policy_prob"), {}),
    "no_policy_features": (POLICY_FEATURES, {}),
    "no_path_id": (("path_id",), {}),
    "leaves_3": ((), {"num_leaves": 3}),
    "leaves_15_min_child_50": ((), {"num_leaves": 15, "min_child_samples": 50}),
    "rounds_150": ((), {"n_estimators": 150}),
    "rounds_600": ((), {"n_estimators": 600}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--root", required=True, help="a finished pipeline's artifact root")
    parser.add_argument("--profile", default="cpu")
    args = parser.parse_args()
    run = Run(profile=args.profile)
    label, chooser, cfg, options = served_shortlists(args.dataset, args.root, args.profile)
    names = feature_names()

    def masked(split: str, drop: tuple[str, ...]):
        columns = [names.index(n) for n in drop]
        lists = []
        for s in options[split][0]:
            features = s.features.copy()
            features[:, columns] = 0.0
            lists.append(dataclasses.replace(s, features=features))
        return lists, options[split][1]

    ks = sorted({3, 5, chooser.k})
    rows, base = [], None
    for name, (drop, settings) in VARIANTS.items():
        booster = fit_chooser(*masked("train", drop), dataclasses.replace(cfg, **settings))
        row: dict = {"variant": name, "dropped": list(drop), "settings": settings}
        hits = {}
        for split in ("val", "test"):
            lists, labels = masked(split, drop)
            for k in ks:
                chosen = picks(booster, lists, k)
                hits[split, k] = np.array([c is not None and labels[i][c] > 0 for i, c in enumerate(chosen)])
                row[f"{split}_at_{k}"] = round(100.0 * float(hits[split, k].mean()), 2)
        test = hits["test", chooser.k]
        base = test if base is None else base
        row["p_vs_base"] = round(mcnemar(test, base)[1], 4)
        rows.append(row)
        print(row, flush=True)
    write_rows(run, "chooser_variants", args.dataset, label, chooser, options, rows)


if __name__ == "__main__":
    main()

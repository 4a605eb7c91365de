"""What the plan chooser learns from: the served planner's chooser refit without groups of its features, with
other LightGBM settings, with graded labels or with features of the options' agreement, on the same shortlists.

Run: ``python benchmarks/chooser_variants.py hpo --root dagster_home/artifacts``; writes
``benchmarks/results/chooser_variants_<dataset>.json`` and prints a row per variant.

The served planner's policy shortlists every training, validation and test question (its chooser's ``k``, plus
ABSTAIN, at the profile's chooser graph weights; :func:`chooser_weights.served_shortlists`). Each variant is fit on the
training questions as an RL round fits the chooser and read on validation (where a variant would be chosen) and
test, picking among the policy's first 3, 5 and ``k`` candidates. A dropped feature is set to 0 in every split
(LightGBM never splits on a constant). ``p_vs_base``: McNemar of the test hits at ``k`` against the base refit.
The policy's scores on training questions are in-sample (the policy was trained on them): ``no_policy_*`` shows
what the chooser reads from them. ``graded_labels`` trains on 2 when an option's fused list puts a gold answer first,
1 when within its first 3, else 0 (the hits are still counted at 1). ``agreement`` adds three columns per option: the
share of the question's options whose fused list has the same first answer, that share weighted by the policy's
probability, and the share of the other options with that answer in their first 3 (plans that agree may be right).
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
from chooser_weights import served_shortlists, write_rows
from harness import Run

from grasp_core.eval.significance import mcnemar
from grasp_core.planner.policy.chooser import POLICY_FEATURES, Shortlist, feature_names
from grasp_core.planner.policy.chooser_train import fit_chooser, picks

VARIANTS: dict[str, tuple[tuple[str, ...], dict]] = {  # name -> (features dropped, ChooserConfig settings)
    "base": ((), {}),
    "no_policy_scores": (("policy_logit", "policy_gap", "policy_prob"), {}),
    "no_policy_features": (POLICY_FEATURES, {}),
    "no_path_id": (("path_id",), {}),
    "leaves_3": ((), {"num_leaves": 3}),
    "leaves_15_min_child_50": ((), {"num_leaves": 15, "min_child_samples": 50}),
    "rounds_150": ((), {"n_estimators": 150}),
    "rounds_600": ((), {"n_estimators": 600}),
    "graded_labels": ((), {}),
    "agreement": ((), {}),
}
AGREEMENT = ("agree_top1", "agree_top1_policy_prob", "top1_in_others_top3")


def graded_labels(shortlist: Shortlist, gold) -> np.ndarray:
    """2 for an option whose fused list puts a gold answer first, 1 within its first 3, else 0."""
    ranks = [f.rank_of(gold) for f in shortlist.fused]
    return np.array([2.0 if r == 1 else 1.0 if r is not None and r <= 3 else 0.0 for r in ranks])


def agreement(shortlist: Shortlist) -> np.ndarray:
    """float32 [options, 3]: the :data:`AGREEMENT` columns of one question's options."""
    n = len(shortlist.rows)
    out = np.zeros((n, len(AGREEMENT)), np.float32)
    if n == 0:
        return out
    top1 = np.array([int(f.node_ids[0]) if len(f) else -1 for f in shortlist.fused])
    top3 = [set(f.node_ids[:3].tolist()) for f in shortlist.fused]
    prob = shortlist.features[:, feature_names().index("policy_prob")]
    for i in range(n):
        same = top1 == top1[i]
        out[i, 0] = same.mean()
        out[i, 1] = prob[same].sum() / max(float(prob.sum()), 1e-9)
        out[i, 2] = np.mean([top1[i] in top3[j] for j in range(n) if j != i]) if n > 1 else 0.0
    return out


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

    def read(split: str, name: str, drop: tuple[str, ...]):
        if name != "agreement":
            return masked(split, drop)
        lists = [dataclasses.replace(s, features=np.hstack([s.features, agreement(s)])) for s in options[split][0]]
        return lists, options[split][1]

    ks = sorted({3, 5, chooser.k})
    rows, base = [], None
    for name, (drop, settings) in VARIANTS.items():
        train, labels = read("train", name, drop)
        if name == "graded_labels":
            labels = [graded_labels(s, g) for s, g in zip(train, options["train"][2])]
        columns = [*names, *AGREEMENT] if name == "agreement" else names
        booster = fit_chooser(train, labels, dataclasses.replace(cfg, **settings), columns)
        row: dict = {"variant": name, "dropped": list(drop), "settings": settings}
        hits = {}
        for split in ("val", "test"):
            lists, labels = read(split, name, drop)
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

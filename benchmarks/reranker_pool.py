"""What the ``ltr`` reranker reads: the chosen plan's fused list or the plan chooser's candidate pool, and training
lists from the served chooser (in sample) or from choosers fit without each fold (``reranker_candidates.chooser_folds``).

Run: ``python benchmarks/reranker_pool.py hpo --root dagster_home/artifacts [--temperatures 0.25 0.5 1]``;
writes ``benchmarks/results/reranker_pool_<dataset>.json`` and prints a table.

On a finished build (its served planner must have a chooser): every training, validation and test question's
shortlist is executed (the build's executed plans are reused; the training questions' shortlists are executed twice,
once inside ``served_inputs``' fold choosers and once here: a benchmark-only cost) and scored by the served chooser (training
questions: by the chooser of their fold, as ``reranker_hard_negatives`` does). Per row, the reranker is trained on
the training questions' lists exactly as the ``reranker`` step trains it (early stopping and its (w, k) on the
build's validation questions) and read on the whole test split: Hit@1 of the reranked lists, recall@K of its
candidates, and McNemar's test against the first row (the reranker before candidate pools: the chosen list, training
lists from the in-sample chooser). The served setting is the row with the best validation Hit@1.
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
from harness import RESULTS, Run, load_components

from grasp_core.components import Components
from grasp_core.eval.significance import mcnemar
from grasp_core.pipeline.asked_type import fit_asked_type_model
from grasp_core.pipeline.planner_policy import PolicyData, out_of_fold_planners
from grasp_core.pipeline.reranker import served_inputs
from grasp_core.planner.policy.chooser import candidate_pool
from grasp_core.planner.policy.chooser_train import within
from grasp_core.ranking import fuse
from grasp_core.rerank.inference import ValItem, fuse_reranked, select_rrf_params
from grasp_core.rerank.ltr import labels_of, train_ranker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--root", required=True, help="a finished pipeline's artifact root")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.25, 0.5, 1.0])
    parser.add_argument("--profile", default="cpu")
    args = parser.parse_args()
    run = Run(profile=args.profile)
    components = load_components(args.dataset, args.root, args.profile)
    profile = components.profile
    K, folds, weights = profile.rerank.top_k, profile.reranker_candidates.chooser_folds, profile.reward
    label, checkpoint = components.final_planner()
    policy = components.planner(checkpoint)
    chooser = getattr(policy, "chooser", None)
    if chooser is None:
        raise SystemExit(f"the served planner of {args.dataset} ({label}) has no chooser: build the RL rounds first")

    # the chosen plans' reranker inputs (the candidates are replaced per row below)
    in_sample = Components(
        components.art,
        profile.replace(reranker_candidates=dataclasses.replace(profile.reranker_candidates, chooser_folds=1)),
    )
    base = {"train in sample": served_inputs(in_sample, "train", profile.ltr.train_queries)}
    base["train"] = served_inputs(components, "train", profile.ltr.train_queries)
    base["val"] = served_inputs(components, "val", profile.ltr.val_queries)
    base["test"] = served_inputs(components, "test")
    print("inputs", {s: len(v[1]) for s, v in base.items()}, flush=True)

    # every question's shortlist and the chooser scores of its options
    data = PolicyData(components, policy, checkpoint)
    kmax = max(profile.chooser.shortlist)
    fold_booster = {
        q: p.chooser.booster  # type: ignore[union-attr]
        for qids, p in out_of_fold_planners(components, policy, checkpoint, base["train"][1], folds)
        for q in qids
    }
    options: dict[str, list] = {}
    for split in ("train", "val", "test"):
        qids = base[split][1]
        lists, _ = data.shortlists(qids, chooser.asked, kmax)
        for key in (split, "train in sample") if split == "train" else (split,):
            options[key] = []
            for q, s in zip(qids, lists):
                allowed = within(s, chooser.k)
                booster = fold_booster[q] if key == "train" else chooser.booster
                sub = s.subset(allowed)
                options[key].append((sub, np.asarray(booster.predict(sub.features, num_threads=1))))
        print(f"{split}: {len(qids)} shortlists", flush=True)

    def candidates(split: str, temperature: float | None):
        out = []
        for x, (s, scores), q in zip(base[split][2], options[split], base[split][1]):
            text = components.text_rankings[q]
            if not len(s.rows):
                pool = fuse(text, type(x.graph).empty(), weights)
            elif temperature is None:
                pool = s.fused[int(np.argmax(scores))]
            else:
                pool = candidate_pool(s, scores, weights.rrf_k, temperature)
            out.append(dataclasses.replace(x, fused=pool))
        return out

    asked, _ = fit_asked_type_model(components)
    features = components.reranker_features(asked)
    rows, first = [], None
    settings = [(None, "train in sample"), (None, "train")] + [(t, "train") for t in args.temperatures]
    for temperature, train_key in settings:
        lists = {
            "train": candidates(train_key, temperature),
            "val": candidates("val", temperature),
            "test": candidates("test", temperature),
        }
        gold = {s: base[s][3] for s in ("val", "test")} | {"train": base[train_key][3]}
        xs = {s: features.build(v, K) for s, v in lists.items()}
        ys = {s: [labels_of(x.fused.node_ids[:K], g) for x, g in zip(lists[s], gold[s])] for s in lists}
        trained = train_ranker((xs["train"], ys["train"]), (xs["val"], ys["val"]), features.names, profile.ltr)

        predicted = {
            split: [
                np.asarray(trained.booster.predict(X, num_iteration=trained.best_round), np.float32)
                if len(X)
                else np.zeros(0, np.float32)
                for X in xs[split]
            ]
            for split in ("val", "test")
        }
        val_items = [ValItem(x.fused, s, g) for x, s, g in zip(lists["val"], predicted["val"], gold["val"])]
        w, k, _ = select_rrf_params(val_items, profile.rerank.grid_w, profile.rerank.grid_k)
        hits = {}
        for split, split_scores in predicted.items():
            hits[split] = np.array(
                [
                    fuse_reranked(x.fused, s, w, k).rank_of(g) == 1
                    for x, s, g in zip(lists[split], split_scores, gold[split])
                ]
            )
        recall = [(x.fused.rank_of(g) or K + 1) <= K for x, g in zip(lists["test"], gold["test"])]
        first = hits["test"] if first is None else first
        _, p = mcnemar(hits["test"], first)
        row = {
            "candidates": "chosen plan's fused list" if temperature is None else f"pool, temperature {temperature}",
            "training_lists": "served chooser (in sample)"
            if train_key == "train in sample"
            else f"out of fold ({folds})",
            "val_hit1": round(100 * float(hits["val"].mean()), 2),
            "test_hit1": round(100 * float(hits["test"].mean()), 2),
            "test_recall_at_K": round(100 * float(np.mean(recall)), 1),
            "test_p_vs_first": round(float(p), 4),
            "rrf_w": w if np.isfinite(w) else "inf",
            "rrf_k": k,
        }
        rows.append(row)
        print(row, flush=True)
    best = max(range(len(rows)), key=lambda i: (rows[i]["val_hit1"], -i))
    out = {
        "dataset": args.dataset,
        "planner": label,
        "K": K,
        "queries": {s: len(base[s][1]) for s in ("train", "val", "test")},
        "rows": rows,
        "chosen_on_val": rows[best],
    }
    run.write(RESULTS / f"reranker_pool_{args.dataset}.json", out, quiet=True)


if __name__ == "__main__":
    main()

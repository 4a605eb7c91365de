"""How much the ``ltr`` reranker's figures move with its LightGBM seed alone, from a dataset's finished artifacts.

Run: ``python benchmarks/reranker_seeds.py hpo --root dagster_home/artifacts [--seeds 5] [--profile cpu]``; writes
``benchmarks/results/reranker_seeds_<dataset>.json`` and prints a table.

The reranker step's own inputs are rebuilt once from the artifacts by the step's own function
(:func:`grasp_core.pipeline.reranker.ltr_data`, with the asked-type model the ``reranker`` artifact stored), and
the served planner's fused lists of every evaluation split are added; then the reranker is trained as the step
trains it (the profile's ``LTRConfig``, early stopping on val, the ``(w, k)`` grid on val) once per seed
``0 .. --seeds-1``, which changes only LightGBM's bagging and feature sampling. Each seed's Hit@1 and Hit@5 on every
split (val and val-human select, test and test-human claim) are reported with their range over the seeds, and so
is a bag: the mean score of all the seeds' models (grid on val as well). Seed 0 is the profile's default, so it
retrains the served model: its ``best_round`` and figures are the pipeline's ``served+rerank`` row.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np
from harness import RESULTS, Run, load_components

from grasp_core.metrics import evaluate
from grasp_core.pipeline.reranker import ltr_data, served_inputs
from grasp_core.rerank.asked_type import AskedType
from grasp_core.rerank.inference import ValItem, fuse_reranked, select_rrf_params
from grasp_core.rerank.ltr import train_ranker

EVAL_SPLITS = ("val", "test", "val-human", "test-human")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--root", type=Path, required=True, help="a finished pipeline's artifact root")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--profile", default="cpu")
    args = parser.parse_args()

    run = Run(profile=args.profile, seeds=args.seeds)
    components = load_components(args.dataset, args.root, args.profile)
    if components.reranker_kind != "ltr":
        raise SystemExit(
            f"the {args.profile} profile's reranker is {components.reranker_kind!r}; this measures the ltr one"
        )
    K, cfg = components.profile.rerank.top_k, components.profile.ltr
    t0 = time.perf_counter()
    asked = AskedType.load(components.art.require("reranker"))
    if asked is None:
        raise SystemExit("the reranker artifact holds no asked-type model: rematerialize `reranker` first")
    data = ltr_data(components, asked)
    present = set(components.skb.queries["split"])
    splits = {
        s: served_inputs(components, s, cfg.val_queries if s == "val" else None) for s in EVAL_SPLITS if s in present
    }
    matrices = {s: data.features.build(inputs, K) for s, (_, _, inputs, _) in splits.items()}
    setup_seconds = time.perf_counter() - t0

    def figures(scores_of) -> dict:
        """(w, k) on val, then Hit@1/Hit@5 per split, of one scoring (split -> per-query reranker scores)."""
        items = {
            s: [ValItem(x.fused, sc, g) for x, sc, g in zip(inputs, scores_of[s], answers)]
            for s, (_, _, inputs, answers) in splits.items()
        }
        w, k, _ = select_rrf_params(items["val"], components.profile.rerank.grid_w, components.profile.rerank.grid_k)
        out: dict = {"w": w if np.isfinite(w) else "inf", "k": k}
        for s, its in items.items():
            metrics = evaluate(
                [fuse_reranked(i.fused, i.scores, w, k) for i in its],
                [i.answers for i in its],
                components.skb.num_nodes,
            )
            out[s] = {"hit@1": round(metrics["hit@1"], 1), "hit@5": round(metrics["hit@5"], 1)}
        return out

    runs, all_scores = {}, []
    for seed in range(args.seeds):
        t0 = time.perf_counter()
        model = train_ranker(data.train, data.val, data.features.names, dataclasses.replace(cfg, seed=seed))
        scores = {
            s: [
                np.asarray(model.booster.predict(X, num_iteration=model.best_round), np.float32)
                if len(X)
                else np.zeros(0, np.float32)
                for X in mats
            ]
            for s, mats in matrices.items()
        }
        all_scores.append(scores)
        runs[str(seed)] = {
            "best_round": model.best_round,
            "train_seconds": round(time.perf_counter() - t0, 1),
            **figures(scores),
        }
        print(
            f"seed {seed}: "
            + ", ".join(f"{s} {runs[str(seed)][s]['hit@1']:.1f}/{runs[str(seed)][s]['hit@5']:.1f}" for s in splits),
            flush=True,
        )
    bag = {s: [np.mean([sc[s][q] for sc in all_scores], axis=0) for q in range(len(matrices[s]))] for s in matrices}
    spread = {
        s: {
            m: {
                "min": min(r[s][m] for r in runs.values()),
                "max": max(r[s][m] for r in runs.values()),
                "mean": round(float(np.mean([r[s][m] for r in runs.values()])), 2),
            }
            for m in ("hit@1", "hit@5")
        }
        for s in splits
    }
    out = {
        "dataset": args.dataset,
        "profile": args.profile,
        "planner": splits["test"][0],
        "queries": {s: len(v[1]) for s, v in splits.items()},
        "setup_seconds": round(setup_seconds, 1),
        "seeds": runs,
        "spread": spread,
        "bag": figures(bag),
    }
    run.write(RESULTS / f"reranker_seeds_{args.dataset}.json", out, quiet=True)
    print("\n| split | Hit@1 min-max (mean) | Hit@5 min-max (mean) | bag Hit@1 / Hit@5 |\n|---|---|---|---|")
    for s, sp in spread.items():
        h1, h5 = sp["hit@1"], sp["hit@5"]
        print(
            f"| {s} | {h1['min']:.1f}-{h1['max']:.1f} ({h1['mean']:.1f}) | {h5['min']:.1f}-{h5['max']:.1f} ({h5['mean']:.1f}) "
            f"| {out['bag'][s]['hit@1']:.1f} / {out['bag'][s]['hit@5']:.1f} |"
        )


if __name__ == "__main__":
    main()

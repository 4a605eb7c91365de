"""How many folds the out-of-fold text rankings need: for each fold count, the training queries' out-of-fold mFAR
Hit@1 beside the full model's on train (fitted on them) and on val (unseen). The folds are right when out of fold
train looks like val: fewer folds fit each model on fewer queries (pessimistic), more cost one mFAR fit each.

Run: ``python benchmarks/oof_folds.py DATASET [--root DIR] [--folds 2 3 5]`` on a finished pipeline's artifacts
(the field index and the full mFAR are read, the fold models fitted here); writes
``benchmarks/results/oof_folds_<dataset>.json`` with the run's record (commit, machine, load average, command).
"""

from __future__ import annotations

import argparse
import time

from harness import RESULTS, Run, load_components

from grasp_core.metrics import evaluate
from grasp_core.text.config import OutOfFoldConfig
from grasp_core.text.mfar import MFARRetriever
from grasp_core.text.oof import rank_by_folds, train_fold_models


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--root", default=None, help="artifact root (default: $GRASP_HOME or dagster_home/artifacts)")
    parser.add_argument("--folds", type=int, nargs="+", default=[2, 3, 5])
    args = parser.parse_args()
    run = Run(profile="cpu")
    components = load_components(args.dataset, args.root, "cpu")
    full = components.text_retriever("mfar")
    assert isinstance(full, MFARRetriever)
    train, val = components.skb.split("train"), components.skb.split("val")

    def hit1(rankings, part) -> float:
        return round(
            evaluate(rankings, [list(map(int, a)) for a in part["answer_ids"]], components.skb.num_nodes)["hit@1"], 1
        )

    out = {
        "dataset": args.dataset,
        "train_queries": len(train),
        "full_model": {"train_hit@1": hit1(full.rank(train["query"].tolist()), train)},
        "val_hit@1": hit1(full.rank(val["query"].tolist()), val),
        "folds": {},
    }
    for k in args.folds:
        start = time.perf_counter()
        assignment, models, _ = train_fold_models(
            components.skb, components.index, components.encoder, full, OutOfFoldConfig(folds=k)
        )
        out["folds"][str(k)] = {
            "out_of_fold_train_hit@1": hit1(rank_by_folds(full, assignment, models, train), train),
            "seconds": round(time.perf_counter() - start, 1),
        }
        print(k, out["folds"][str(k)], flush=True)
    run.write(RESULTS / f"oof_folds_{args.dataset}.json", out)


if __name__ == "__main__":
    main()

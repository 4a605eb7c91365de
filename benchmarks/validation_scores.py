"""The served answers on the validation splits, for choosing between two builds of a dataset without its test splits.

Run: ``python benchmarks/validation_scores.py hpo --root DIR --label NAME``; writes
``benchmarks/results/validation_<dataset>_<label>.json``.

The evaluation (``eval_metrics``) scores ``test`` and ``test-human`` only, the splits claims are made on. A choice
between two settings whose effect runs through the whole pipeline (an index, a threshold) is made here instead:
:class:`~grasp_core.retriever.GraspRetriever` answers every question of ``val`` and ``val-human`` (when the dataset
has them) through the served path, with and without the reranker, and Hit@1, Hit@5 and MRR are written per split.
``commit`` is the build's (its evaluation's), the ``record``'s the checkout's that measured it.
"""

from __future__ import annotations

import argparse

from harness import RESULTS, Run

from grasp_core.components import Components
from grasp_core.io import read_json
from grasp_core.metrics import evaluate
from grasp_core.retriever import GraspRetriever

SPLITS = ("val", "val-human")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--root", required=True, help="an artifact root with the dataset's finished DAG")
    parser.add_argument("--label", required=True, help="names the build in the results file")
    args = parser.parse_args()
    run = Run(profile="cpu")  # GraspRetriever.from_artifacts's default
    result: dict = {"dataset": args.dataset, "root": args.root, "label": args.label, "splits": {}}
    retrievers = {
        "served+rerank": GraspRetriever.from_artifacts(args.dataset, args.root),
        "served": GraspRetriever.from_artifacts(args.dataset, args.root, rerank=False),
    }
    components: Components = retrievers["served"].components
    result["commit"] = read_json(components.art.require("eval_metrics") / "metrics.json")["commit"]  # the build's
    for split in SPLITS:
        frame = components.split(split)
        if frame.empty:
            continue
        gold = components.answers(frame["qid"])
        result["splits"][split] = {"queries": len(frame)}
        for setting, retriever in retrievers.items():
            rankings = [r.ranking for r in retriever.retrieve(frame["query"].tolist())]
            metrics = evaluate(rankings, gold, components.skb.num_nodes)
            result["splits"][split][setting] = {m: round(metrics[m], 2) for m in ("hit@1", "hit@5", "mrr")}
        print(f"[val] {split}: {result['splits'][split]}", flush=True)
    run.write(RESULTS / f"validation_{args.dataset}_{args.label}.json", result, quiet=True)


if __name__ == "__main__":
    main()

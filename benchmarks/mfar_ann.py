"""What HNSW nominees change in mFAR's rankings, against the exact products, on one trained mFAR.

Run: ``python benchmarks/mfar_ann.py synth-prime --root DIR [--profile cpu] [--questions 50]``; writes
``benchmarks/results/mfar_ann_<dataset>.json`` (with the run's record: commit, machine, load, profile, date).

From ``MFARConfig.dense_ann_min_nodes`` nodes a dense scorer's nominees come from an HNSW index over its field's
vectors. This loads the dataset's trained mFAR (the artifact must hold such indexes) and ranks every ``val`` and
``test`` question twice with the same model: as served (HNSW nominees) and with the HNSW indexes removed (every
dense scorer's nominees from its exact product with every node). Per split: Hit@1, Hit@5, Recall@20 and MRR of
both, and the share of questions whose top 10 is identical. Then the first ``--questions`` test questions are ranked
one at a time both ways, interleaved, with one BLAS thread as on the answer path, the median kept
(``rank_ms_p50``, :func:`interleaved.p50_ms`).
"""

from __future__ import annotations

import argparse

import interleaved
import numpy as np
from harness import RESULTS, Run, load_components

from grasp_core.errors import GraspError
from grasp_core.metrics import evaluate
from grasp_core.text.mfar import FieldIndex, MFARRetriever

SPLITS = ("val", "test")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--root", required=True, help="an artifact root with the dataset's trained mFAR")
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--questions", type=int, default=50)
    args = parser.parse_args()
    run = Run(profile=args.profile, questions=args.questions)
    components = load_components(args.dataset, args.root, args.profile)
    served = components.text_retriever("mfar")
    if not isinstance(served, MFARRetriever) or not served.fields.ann:
        raise GraspError(f"{args.dataset}'s mFAR has no HNSW nominees (fewer nodes than dense_ann_min_nodes)")
    f = served.fields
    exact_fields = FieldIndex(f.fields, f.lexical, f.dense, f.bm25, f.identity)
    exact = MFARRetriever(exact_fields, served.model, served.encoder, served.cfg)
    retrievers = {"hnsw": served, "exact": exact}
    result: dict = {"dataset": args.dataset, "nodes": f.num_nodes, "ann_fields": list(f.ann), "splits": {}}
    for split in SPLITS:
        frame = components.split(split)
        gold, questions = components.answers(frame["qid"]), frame["query"].tolist()
        rankings = {n: r.rank(questions) for n, r in retrievers.items()}
        row: dict = {"queries": len(questions)}
        for name, ranked in rankings.items():
            row[name] = {m: round(v, 2) for m, v in evaluate(ranked, gold, f.num_nodes).items()}
        same = [list(a.node_ids[:10]) == list(b.node_ids[:10]) for a, b in zip(rankings["hnsw"], rankings["exact"])]
        row["same_top10"] = round(float(np.mean(same)), 4)
        result["splits"][split] = row
        print(f"[mfar-ann] {split}: {row}", flush=True)
    test = components.split("test")["query"].tolist()[: args.questions]
    result["rank_ms_p50"] = interleaved.p50_ms({n: r.rank for n, r in retrievers.items()}, test)
    result["timed_questions"] = len(test)
    print(f"[mfar-ann] one question, p50 ms: {result['rank_ms_p50']}", flush=True)
    run.write(RESULTS / f"mfar_ann_{args.dataset}.json", result, quiet=True)


if __name__ == "__main__":
    main()

"""Reranked vs fused test Hit@1 of the configured reranker, from a dataset's finished artifacts.

Run: ``python benchmarks/rerank_quality.py hpo --source-root dagster_home/artifacts --scratch /tmp/rerank``.
The source artifacts are only read: the scratch root links to them and receives this run's
``reranker_hard_negatives`` and ``reranker`` (built by the pipeline's own steps: the served planner's fused
lists of every train query, early stopping and the ``(w, k)`` grid on validation). Then the served planner
runs once on every test query and the fused lists are reranked at each K of ``--k``; McNemar's test compares
per-query Hit@1 with the fused order. Writes ``benchmarks/results/rerank_quality_<dataset>.json`` with the run's
record (commit, machine, profile, load average, command).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from harness import RESULTS, Run, load_components

from grasp_core.components import Components
from grasp_core.eval.significance import mcnemar
from grasp_core.io import is_complete
from grasp_core.metrics import evaluate, per_query_hits
from grasp_core.pipeline.reranker import hard_negatives_step, reranker_step, served_inputs

OWN = ("reranker_hard_negatives", "reranker", "reranker_work")


def scratch_workspace(dataset: str, source: Path, scratch: Path, profile: str) -> Components:
    """A workspace whose artifacts are links to ``source``'s finished ones, except the reranker's own."""
    (scratch / dataset).mkdir(parents=True, exist_ok=True)
    for item in (source / dataset).iterdir():
        link = scratch / dataset / item.name
        if item.name not in OWN and not item.name.startswith(".") and not link.exists():
            link.symlink_to(item.resolve())
    return load_components(dataset, scratch, profile)


def _plain(result: dict) -> dict:
    return {k: v for k, v in result.items() if not k.endswith("_png")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--source-root", type=Path, required=True)
    parser.add_argument("--scratch", type=Path, required=True)
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--k", type=int, nargs="+", default=[20, 50])
    args = parser.parse_args()
    run = Run(profile=args.profile)
    components = scratch_workspace(args.dataset, args.source_root, args.scratch, args.profile)
    out: dict = {"dataset": args.dataset, "kind": components.reranker_kind}
    t0 = time.perf_counter()
    if not is_complete(components.art.path("reranker_hard_negatives")):
        out["hard_negatives"] = hard_negatives_step(components)
    out["hard_negatives_seconds"] = round(time.perf_counter() - t0, 1)
    t0 = time.perf_counter()
    if not is_complete(components.art.path("reranker")):
        out["reranker"] = _plain(reranker_step(components))
    out["reranker_seconds"] = round(time.perf_counter() - t0, 1)
    planner, qids, inputs, gold = served_inputs(components, "test")
    n = components.skb.num_nodes
    fused = [x.fused for x in inputs]
    fused_hits = per_query_hits(fused, gold, n)
    out.update(planner=planner, test_queries=len(qids), fused=evaluate(fused, gold, n), reranked={})
    reranker = components.reranker()
    out["rrf"] = {"w": reranker.w, "k": reranker.k}
    for K in args.k:
        t0 = time.perf_counter()
        reranked = [r.ranking for r in reranker.rerank(inputs, K)]
        seconds = (time.perf_counter() - t0) / max(1, len(inputs))
        hits = per_query_hits(reranked, gold, n)
        stat, p = mcnemar(hits, fused_hits)
        out["reranked"][f"K={K}"] = {
            **evaluate(reranked, gold, n),
            "mcnemar_p": p,
            "reranked_only_hits": int(np.sum(hits & ~fused_hits)),
            "fused_only_hits": int(np.sum(~hits & fused_hits)),
            "seconds_per_query_batched": round(seconds, 4),
        }
    run.write(RESULTS / f"rerank_quality_{args.dataset}.json", out, quiet=True)
    print(f"{args.dataset} ({planner}, {len(qids)} test queries): fused Hit@1 {out['fused']['hit@1']:.1f}")
    for key, row in out["reranked"].items():
        print(f"  reranked {key}: Hit@1 {row['hit@1']:.1f} (McNemar p = {row['mcnemar_p']:.2g})")


if __name__ == "__main__":
    main()

"""The planner progression on every validation and test query (the pipeline's evaluation caps them at 100 on cpu).

Fused Hit@1 / Hit@5 / MRR (no reranker) of text only, the SFT planner and each kept RL round, with McNemar
p-values against SFT and against text only, read from a finished pipeline's artifacts (nothing is trained).
The teacher row is left out: its plans exist for the capped queries only.
Run: ``python benchmarks/planner_progression_full.py DATASET [ARTIFACTS_ROOT]``; writes
``benchmarks/results/planner_progression_full_<dataset>.{json,md}``.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from grasp_core.artifacts import Artifacts
from grasp_core.components import Components
from grasp_core.eval.significance import mcnemar
from grasp_core.pipeline.evaluation import TestRun, kept_planners
from grasp_core.pipeline.plots import markdown_table
from grasp_core.profiles import get_profile

COLUMNS = ["split", "planner", "queries", "hit@1", "hit@5", "mrr", "p vs SFT", "p vs text"]


def main() -> None:
    dataset = sys.argv[1] if len(sys.argv) > 1 else "hpo"
    art = Artifacts.for_dataset(dataset, sys.argv[2] if len(sys.argv) > 2 else None)
    profile = get_profile("cpu")
    ws = Components(art, profile.replace(eval=dataclasses.replace(profile.eval, max_test_queries=None)))
    planners = kept_planners(ws)
    rows = []
    for split in ("val", "test"):
        run = TestRun(ws, split)
        fused = {"text only": run.text}
        for name, key, path in planners:
            fused[name] = run.fused(run.graph(run.planner_plans(key, path))[0])
        hits = {name: run.hits(r) for name, r in fused.items()}
        for name, rankings in fused.items():
            m = run.metrics(rankings)
            rows.append(
                {
                    "split": split,
                    "planner": name,
                    "queries": len(run.qids),
                    "hit@1": m["hit@1"],
                    "hit@5": m["hit@5"],
                    "mrr": m["mrr"],
                    "p vs SFT": "—" if name == "SFT" else f"{mcnemar(hits[name], hits['SFT'])[1]:.3g}",
                    "p vs text": "—" if name == "text only" else f"{mcnemar(hits[name], hits['text only'])[1]:.3g}",
                }
            )
        print(markdown_table(rows[-len(fused) :], COLUMNS), flush=True)
    out = Path(__file__).parent / "results" / f"planner_progression_full_{dataset}"
    out.with_suffix(".json").write_text(json.dumps({"dataset": dataset, "root": str(art.root), "rows": rows}, indent=2))
    out.with_suffix(".md").write_text(markdown_table(rows, COLUMNS) + "\n")


if __name__ == "__main__":
    main()

"""The README's text-branch table, read from each dataset's `text_rankings` asset (test split).

Run after `grasp pipeline DATASET` (or the text steps) for the datasets you want:
    .venv/bin/python benchmarks/text_branch_table.py   # writes benchmarks/results/text_branch_pipeline.md
"""

from pathlib import Path

from grasp_core.artifacts import Artifacts
from grasp_core.io import atomic_file, is_complete, read_json

DATASETS = ("hpo", "synth-amazon", "synth-mag", "synth-prime")
METRICS = ("hit@1", "hit@5", "recall@20", "mrr")


def table() -> str:
    rows = [
        "| dataset | BM25 H@1 / H@5 / R@20 / MRR | dense H@1 / H@5 / R@20 / MRR | mFAR H@1 / H@5 / R@20 / MRR |",
        "|---|---|---|---|",
    ]
    for ds in DATASETS:
        art = Artifacts.for_dataset(ds)
        if not is_complete(art.path("text_rankings")):
            continue
        test = {
            r["retriever"]: r for r in read_json(art.path("text_rankings") / "metrics.json") if r["split"] == "test"
        }
        cells = [" / ".join(f"{test[name][m]:.1f}" for m in METRICS) for name in ("bm25", "dense", "mfar")]
        rows.append(f"| {ds} | {cells[0]} | {cells[1]} | **{cells[2]}** |")
    return "\n".join(rows)


if __name__ == "__main__":
    text = table()
    out = Path(__file__).parent / "results" / "text_branch_pipeline.md"
    with atomic_file(out) as handle:
        handle.write(text + "\n")
    print(text)

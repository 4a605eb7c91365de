"""Results as markdown, read from finished evaluation artifacts (never typed by hand): one dataset's tables, and
the ablations across datasets with Stouffer-combined McNemar p-values."""

from __future__ import annotations

from collections.abc import Sequence

from grasp_core.artifacts import Artifacts
from grasp_core.eval.significance import stouffer
from grasp_core.io import is_complete, read_json
from grasp_core.pipeline.evaluation import PROGRESSION_COLUMNS
from grasp_core.pipeline.plots import markdown_table

METRICS = ["hit@1", "hit@5", "recall@20", "mrr"]


def dataset_report(art: Artifacts) -> str:
    parts = [f"## Results: `{art.dataset}`"]
    eval_dir = art.path("eval_metrics")
    if is_complete(eval_dir):
        m = read_json(eval_dir / "metrics.json")
        parts.append(f"Test set ({m['queries']} queries), served planner: {m['planner']}.\n")
        parts.append(markdown_table(m["rows"], ["setting", "reranker", *METRICS, "s/query"]))
        if "human" in m:
            h = m["human"]
            rows = [
                {"setting": "GRASP", "reranker": "no", **h["no-rerank"]},
                {"setting": "GRASP", "reranker": "yes", **h["rerank"]},
            ]
            parts.append(
                f"\nHuman-written test set ({h['queries']} queries):\n\n"
                + markdown_table(rows, ["setting", "reranker", *METRICS])
            )
    else:
        parts.append("(eval_metrics not built yet)")
    text_dir = art.path("text_rankings")
    if is_complete(text_dir):
        rows = [r for r in read_json(text_dir / "metrics.json") if r["split"] == "test"]
        parts.append("\n### Text branch (test)\n\n" + markdown_table(rows, ["retriever", *METRICS]))
    abl = art.path("ablations")
    if is_complete(abl):
        a = read_json(abl / "ablations.json")
        parts.append(
            f"\n### Ablations (test, {a['queries']} queries; McNemar on Hit@1 vs GRASP with the same reranker setting)\n\n"
            + markdown_table(a["rows"], ["setting", "reranker", *METRICS, "p (McNemar)"])
        )
        if a.get("progression"):
            parts.append(
                "\n### Planner progression (fused Hit@1 without reranker; McNemar against the SFT planner)\n\n"
                + markdown_table(a["progression"], PROGRESSION_COLUMNS)
            )
    lat = art.path("latency")
    if is_complete(lat):
        t = read_json(lat / "latency.json")
        rows = [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()} for r in t["rows"]]
        parts.append(
            f"\n### Latency per query ({t['queries']} single queries)\n\n"
            + "| stage | mean (s) | p50 (s) | p95 (s) |\n|---|---|---|---|\n"
            + "\n".join(
                f"| {r['stage']} | {r['mean (s)']:.3f} | {r['p50 (s)']:.3f} | {r['p95 (s)']:.3f} |" for r in rows
            )
        )
    return "\n".join(parts)


def cross_dataset_report(arts: Sequence[Artifacts]) -> str:
    """Each ablation's test Hit@1 per dataset (with its McNemar p against GRASP at the same reranker setting) and
    the p-values combined across datasets by Stouffer's method, signed by the direction of each difference."""
    tables = {
        a.dataset: read_json(a.path("ablations") / "ablations.json") for a in arts if is_complete(a.path("ablations"))
    }
    if not tables:
        return "(no dataset has its ablations built yet)"
    rows: dict[tuple[str, str], dict] = {}
    for dataset, table in tables.items():
        full = {r["reranker"]: r["hit@1"] for r in table["rows"] if r["setting"].startswith("GRASP")}
        for r in table["rows"]:
            setting = "GRASP" if r["setting"].startswith("GRASP") else r["setting"]
            row = rows.setdefault(
                (setting, r["reranker"]), {"setting": setting, "reranker": r["reranker"], "tests": []}
            )
            p = r["p (McNemar)"]
            row[dataset] = f"{r['hit@1']:.1f}" + ("" if p == "—" else f" (p {p})")
            if p != "—":
                row["tests"].append((float(p), r["hit@1"] - full[r["reranker"]]))
    for row in rows.values():
        tests = row.pop("tests")
        row["Stouffer p"] = f"{stouffer([p for p, _ in tests], [d for _, d in tests]):.3g}" if tests else "—"
    names = list(tables)
    head = (
        f"## Ablations across datasets (test Hit@1; McNemar p vs GRASP at the same reranker setting; Stouffer "
        f"across {', '.join(f'`{n}`' for n in names)})\n\n"
    )
    return head + markdown_table(list(rows.values()), ["setting", "reranker", *names, "Stouffer p"])

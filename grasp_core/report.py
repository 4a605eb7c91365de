"""Results read from finished evaluation artifacts (never typed by hand): one dataset's results documents
(:mod:`grasp_core.eval.results`) per evaluated split, the markdown rendered from them, and the settings across
datasets with Stouffer-combined McNemar p-values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from grasp_core.artifacts import Artifacts
from grasp_core.errors import GraspError
from grasp_core.eval.results import (
    SERVED,
    SPLITS,
    build_results,
    compared,
    markdown_table,
    read_per_query,
    render_markdown,
)
from grasp_core.eval.significance import stouffer
from grasp_core.io import atomic_file, is_complete, read_json
from grasp_core.provenance import machine_summary

EVALUATION_ASSETS = ("eval_metrics", "ablations")  # the assets whose per-query rows make up the settings
# the README's summary: the answer path's stages, and the learned parts against what they replace
HEADLINE = (("text", "text alone"), ("served", "GRASP"), ("served+rerank", "GRASP + reranker"))
UPPER_BOUND = "teacher"
LEARNED_VS_FIXED = ("sft", "fixed-ratio fusion", "router", "no entity table")
README_BEGIN, README_END = "<!-- results:begin (grasp report --readme) -->", "<!-- results:end -->"


def evaluation_dirs(art: Artifacts) -> list[Path]:
    """The finished evaluation artifacts whose per-query rows make up a dataset's settings."""
    return [art.path(a) for a in EVALUATION_ASSETS if is_complete(art.path(a))]


def dataset_results(art: Artifacts, steps: Mapping[str, float] | None = None) -> dict[str, dict]:
    """{split: results document} of every evaluated split; latency and step times go with the test split."""
    meta = read_json(art.require("eval_metrics") / "metrics.json")
    latency_dir = art.path("latency")
    latency = read_json(latency_dir / "latency.json")["stages"] if is_complete(latency_dir) else {}
    dirs = evaluation_dirs(art)
    evaluated = datetime.fromtimestamp((art.require("eval_metrics") / "metrics.json").stat().st_mtime, UTC)
    out = {}
    for split in SPLITS:
        rows = read_per_query(dirs, split)
        if len(rows):
            out[split] = build_results(
                rows,
                dataset=getattr(art, "key", art.dataset),  # a variant's partition key (hpo+rerank-k20)
                profile=meta["profile"],
                commit=meta["commit"],
                split=split,
                latency=latency if split == "test" else None,
                steps=steps if split == "test" else None,
            ) | {"machine": machine_summary(), "date": evaluated.date().isoformat()}
    return out


def results_path(out_dir: Path, dataset: str, split: str) -> Path:
    return Path(out_dir) / (f"pipeline_{dataset}.json" if split == "test" else f"pipeline_{dataset}_{split}.json")


def recorded_results(out_dir: Path, dataset: str) -> dict[str, dict]:
    """{split: results document} of a dataset as an earlier ``grasp report`` wrote them into ``out_dir``."""
    import json

    out = {}
    for split in SPLITS:
        path = results_path(out_dir, dataset, split)
        if path.is_file():
            out[split] = json.loads(path.read_text())
    if not out:
        raise GraspError(
            f"no recorded results of {dataset!r} in {out_dir}: run `grasp report {dataset}` once it is built, or "
            "give --results-dir (benchmarks/results holds the checkout's recorded ones)"
        )
    return out


def write_results(results: Mapping[str, dict], out_dir: Path) -> list[Path]:
    import json

    paths = []
    for split, doc in results.items():
        path = results_path(out_dir, doc["dataset"], split)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path) as handle:
            handle.write(json.dumps(doc, indent=2) + "\n")
        paths.append(path)
    return paths


def dataset_report(results: Mapping[str, dict]) -> str:
    return "\n\n".join(render_markdown(doc) for doc in results.values())


def cross_dataset_report(docs: Sequence[dict]) -> str:
    """Each setting's test Hit@1 per dataset with its McNemar p against the setting it is compared with, and the
    p-values combined across datasets by Stouffer's method, signed by the direction of each difference."""
    if not docs:
        return "(no dataset has its evaluation built yet)"
    names = ", ".join(f"`{d['dataset']}`" for d in docs)
    head = (
        "### Settings across datasets (test Hit@1; McNemar p vs `served`, or `served+rerank` vs `served`; "
        f"Stouffer across {names})\n\n"
    )
    return head + cross_dataset_table(docs)


def cross_dataset_table(docs: Sequence[dict], settings: Sequence[str] | None = None) -> str:
    """The table of :func:`cross_dataset_report`, over ``settings`` (default: every setting of any dataset)."""
    names = [d["dataset"] for d in docs]
    every = list(dict.fromkeys(s for d in docs for s in d["settings"]))
    rows = []
    for setting in every if settings is None else [s for s in settings if s in every]:
        cells, tests = [], []
        for d in docs:
            if setting not in d["settings"]:
                cells.append("—")
                continue
            hit1 = d["settings"][setting]["hit@1"]
            pair = compared(d).get(setting)
            if pair is None:
                cells.append(f"{hit1:.1f}")
                continue
            ref, p = pair
            cells.append(f"{hit1:.1f} (p {p:.3g})")
            tests.append((p, hit1 - d["settings"][ref]["hit@1"]))
        combined = f"{stouffer([p for p, _ in tests], [s for _, s in tests]):.3g}" if tests else "—"
        rows.append([setting, *cells, combined])
    return markdown_table(["setting", *names, "Stouffer p"], rows)


def _caption(docs: Sequence[Mapping], what: str) -> str:
    """One line under a table: the files it was rendered from, and each dataset's commit, machine and date."""
    files = ", ".join(f"`{results_path(Path('.'), d['dataset'], d['split'])}`" for d in docs)
    origin: dict[str, Mapping] = {}
    for d in docs:
        origin.setdefault(d["dataset"], d)
    where = "; ".join(
        f"{name}: commit {d['commit']}, "
        + (f"{d['machine']}, {d['date']}" if d.get("machine") else "machine and date not recorded")
        for name, d in origin.items()
    )
    return f"*{what} `grasp report` rendered it from {files} (in `--results-dir`). {where}.*"


def summary_report(results: Mapping[str, Mapping[str, dict]]) -> str:
    """The README's results: for every dataset and split, Hit@1 along the answer path (text alone → GRASP →
    reranked), Hit@5 reranked, the oracle-guided teacher as an upper bound and the warm p50; then, on the test
    splits, what the learned parts are worth against the fixed alternatives (Hit@1, McNemar p vs GRASP, and
    Stouffer across datasets). The full tables are what :func:`dataset_report` renders."""
    docs = [doc for by_split in results.values() for doc in by_split.values()]
    if not docs:
        return "(no dataset has its evaluation built yet)"
    header = ["dataset", "split", "questions", *(label for _, label in HEADLINE), "Hit@5 reranked"]
    header += ["teacher (upper bound)", "p50 ms"]
    rows = []
    for d in docs:
        s, p50 = d["settings"], d["latency"].get("total", {}).get("p50")
        cells = [f"{s[k]['hit@1']:.1f}" if k in s else "—" for k, _ in HEADLINE]
        rows.append(
            [
                f"`{d['dataset']}`",
                d["split"],
                d["n_queries"],
                *cells,
                f"{s['served+rerank']['hit@5']:.1f}" if "served+rerank" in s else "—",
                f"{s[UPPER_BOUND]['hit@1']:.1f}" if UPPER_BOUND in s else "—",
                f"{1000 * p50:.0f}" if p50 else "—",
            ]
        )
    tests = [by_split["test"] for by_split in results.values() if "test" in by_split]
    parts = [
        "Hit@1 in percent on every question of each split; p50: one warm question, all stages (the `latency` asset).",
        "",
        markdown_table(header, rows),
        "",
        _caption(docs, "Along the answer path."),
    ]
    if tests:
        parts += [
            "",
            "What the learned parts are worth: test Hit@1 of GRASP with one part replaced (p: McNemar vs GRASP; "
            "Stouffer across datasets, signed by the direction of each difference).",
            "",
            cross_dataset_table(tests, (SERVED, *LEARNED_VS_FIXED)),
            "",
            _caption(tests, "Learned vs fixed."),
        ]
    return "\n".join(parts)


def replace_readme_block(readme: Path, rendered: str) -> None:
    """Put ``rendered`` between the README's results markers (the README's results are never typed by hand)."""
    text = Path(readme).read_text()
    begin, end = text.find(README_BEGIN), text.find(README_END)
    if begin < 0 or end < begin:
        raise GraspError(f"{readme} has no results block: add the lines {README_BEGIN!r} and {README_END!r}")
    with atomic_file(readme) as handle:
        handle.write(text[: begin + len(README_BEGIN)] + "\n" + rendered + "\n" + text[end:])

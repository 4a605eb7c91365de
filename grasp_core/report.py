"""Results read from finished evaluation artifacts (never typed by hand): one dataset's results documents
(:mod:`grasp_core.eval.results`) per evaluated split, the markdown rendered from them, and the settings across
datasets with Stouffer-combined McNemar p-values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from grasp_core.artifacts import Artifacts
from grasp_core.errors import GraspError
from grasp_core.eval.results import SPLITS, build_results, compared, read_per_query, render_markdown
from grasp_core.eval.significance import stouffer
from grasp_core.io import atomic_file, is_complete, read_json

EVALUATION_ASSETS = ("eval_metrics", "ablations")  # the assets whose per-query rows make up the settings
README_BEGIN, README_END = "<!-- results:begin (grasp report --readme) -->", "<!-- results:end -->"


def dataset_results(art: Artifacts, steps: Mapping[str, float] | None = None) -> dict[str, dict]:
    """{split: results document} of every evaluated split; latency and step times go with the test split."""
    meta = read_json(art.require("eval_metrics") / "metrics.json")
    latency_dir = art.path("latency")
    latency = read_json(latency_dir / "latency.json")["stages"] if is_complete(latency_dir) else {}
    dirs = [art.path(a) for a in EVALUATION_ASSETS if is_complete(art.path(a))]
    out = {}
    for split in SPLITS:
        rows = read_per_query(dirs, split)
        if len(rows):
            out[split] = build_results(
                rows,
                dataset=art.dataset,
                profile=meta["profile"],
                commit=meta["commit"],
                split=split,
                latency=latency if split == "test" else None,
                steps=steps if split == "test" else None,
            )
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
            f"no recorded results of {dataset!r} in {out_dir}: run `grasp report {dataset}` once it is built"
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
    names = [d["dataset"] for d in docs]
    settings = list(dict.fromkeys(s for d in docs for s in d["settings"]))
    header = ["setting", *names, "Stouffer p"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for setting in settings:
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
        lines.append("| " + " | ".join([setting, *cells, combined]) + " |")
    head = (
        f"### Settings across datasets (test Hit@1; McNemar p vs `served`, or `served+rerank` vs `served`; "
        f"Stouffer across {', '.join(f'`{n}`' for n in names)})\n\n"
    )
    return head + "\n".join(lines)


def replace_readme_block(readme: Path, rendered: str) -> None:
    """Put ``rendered`` between the README's results markers (the README's results are never typed by hand)."""
    text = Path(readme).read_text()
    begin, end = text.find(README_BEGIN), text.find(README_END)
    if begin < 0 or end < begin:
        raise GraspError(f"{readme} has no results block: add the lines {README_BEGIN!r} and {README_END!r}")
    with atomic_file(readme) as handle:
        handle.write(text[: begin + len(README_BEGIN)] + "\n" + rendered + "\n" + text[end:])

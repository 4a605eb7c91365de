"""One dataset's results as a JSON document, and the markdown rendered from it (the only renderer).

The evaluation steps write, per split, one row per (setting, query) with that query's hit@1, hit@5, recall@20
and mrr (``per_query_<split>.parquet`` in their artifacts). A setting is just a name, so any step adds one by
writing rows under a new name. :func:`build_results` turns the rows into::

    {"dataset", "profile", "commit", "split", "n_queries",
     "settings": {NAME: {"hit@1", "hit@5", "recall@20", "mrr"}},   # percent
     "mcnemar": {"A vs B": p},                                      # two-sided, on per-query hit@1
     "latency": {STAGE: {"mean", "p50", "p95"}},                    # seconds per single query
     "steps": {ASSET: seconds}}                                     # from the orchestrator's run records

McNemar pairs: ``served+rerank vs served``, and ``served vs X`` for every other setting X.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from grasp_core.errors import GraspError
from grasp_core.eval.significance import mcnemar
from grasp_core.metrics import METRICS, per_query
from grasp_core.ranking import Ranking

SERVED, RERANKED = "served", "served+rerank"
SPLITS = ("test", "test-human", "feedback")  # feedback: the held-out questions from use, where there are any


def per_query_rows(
    setting: str, qids: Sequence[int], rankings: Sequence[Ranking], answers: Sequence[Sequence[int]], num_nodes: int
) -> pd.DataFrame:
    """The rows of one setting: its per-query metrics (fractions) keyed by ``qid``."""
    frame = per_query(rankings, answers, num_nodes)
    frame.insert(0, "qid", np.asarray(qids, np.int64))
    frame.insert(0, "setting", setting)
    return frame


def per_query_file(split: str) -> str:
    return f"per_query_{split}.parquet"


def read_per_query(dirs: Iterable[Path], split: str) -> pd.DataFrame:
    """Every setting's rows for ``split`` from the given artifact directories (a directory without the file adds
    nothing); a setting written twice keeps its last occurrence."""
    frames = [pd.read_parquet(d / per_query_file(split)) for d in dirs if (d / per_query_file(split)).exists()]
    if not frames:
        return pd.DataFrame(columns=["setting", "qid", *METRICS])
    rows = pd.concat(frames, ignore_index=True)
    return rows.drop_duplicates(["setting", "qid"], keep="last").reset_index(drop=True)


def percentages(rows: pd.DataFrame) -> dict[str, float]:
    """Each metric's mean over one setting's per-query rows, in percent (two decimals)."""
    return {m: round(100 * float(rows[m].mean()), 2) for m in METRICS}


def mcnemar_pairs(settings: Sequence[str]) -> list[tuple[str, str]]:
    pairs = [(RERANKED, SERVED)] if RERANKED in settings and SERVED in settings else []
    if SERVED in settings:
        pairs += [(SERVED, s) for s in settings if s not in (SERVED, RERANKED)]
    return pairs


def build_results(
    rows: pd.DataFrame,
    *,
    dataset: str,
    profile: str,
    commit: str,
    split: str,
    latency: Mapping[str, Mapping[str, float]] | None = None,
    steps: Mapping[str, float] | None = None,
) -> dict:
    """The results document of one split (see the module docstring). Every setting must cover the same queries."""
    names = list(dict.fromkeys(rows["setting"]))
    hits, settings, qids = {}, {}, None
    for name in names:
        part = rows[rows["setting"] == name].sort_values("qid")
        these = part["qid"].to_numpy()
        if qids is None:
            qids = these
        elif not np.array_equal(qids, these):
            raise GraspError(
                f"setting {name!r} of {dataset!r} ({split}) covers {len(these)} queries, {names[0]!r} {len(qids)}: "
                "rematerialize the evaluation assets so that every setting scores the same queries"
            )
        settings[name] = percentages(part)
        hits[name] = part["hit@1"].to_numpy() > 0.5
    return {
        "dataset": dataset,
        "profile": profile,
        "commit": commit,
        "split": split,
        "n_queries": 0 if qids is None else len(qids),
        "settings": settings,
        "mcnemar": {f"{a} vs {b}": float(f"{mcnemar(hits[a], hits[b])[1]:.4g}") for a, b in mcnemar_pairs(names)},
        "latency": {k: dict(v) for k, v in (latency or {}).items()},
        "steps": dict(steps or {}),
    }


def compared(results: dict) -> dict[str, tuple[str, float]]:
    """setting -> (the setting it is compared with, McNemar p), from the document's pairs."""
    out = {}
    for pair, p in results["mcnemar"].items():
        a, b = pair.split(" vs ")
        other, ref = (b, a) if a == SERVED else (a, b)
        out[other] = (ref, p)
    return out


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _minutes(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"


def render_markdown(results: dict, level: int = 3) -> str:
    """The results tables of one split: settings with McNemar p, latency per stage, step times."""
    h = "#" * level
    p_of = compared(results)
    parts = [
        f"{h} `{results['dataset']}`, {results['split']} split ({results['n_queries']} queries; "
        f"profile `{results['profile']}`, commit {results['commit']})\n",
        "Hit@1, Hit@5, Recall@20, MRR in percent; p: two-sided McNemar on per-query Hit@1.\n",
        markdown_table(
            ["setting", "hit@1", "hit@5", "recall@20", "mrr", "McNemar p"],
            (
                [
                    name,
                    *(f"{m[k]:.1f}" for k in METRICS),
                    f"vs {p_of[name][0]}: {p_of[name][1]:.3g}" if name in p_of else "—",
                ]
                for name, m in results["settings"].items()
            ),
        ),
    ]
    if results["latency"]:
        parts.append(f"\n{h}# Latency per single query (seconds)\n")
        parts.append(
            markdown_table(
                ["stage", "mean", "p50", "p95"],
                ([s, *(f"{v[k]:.3f}" for k in ("mean", "p50", "p95"))] for s, v in results["latency"].items()),
            )
        )
    if results["steps"]:
        total = sum(results["steps"].values())
        parts.append(f"\n{h}# Step times (Dagster run records, latest success per asset; sum {_minutes(total)})\n")
        parts.append(markdown_table(["asset", "time"], ([a, _minutes(s)] for a, s in results["steps"].items())))
    return "\n".join(parts)

"""Turn a step's result dict into Dagster metadata and an MLflow run, the same way for every asset."""

from __future__ import annotations

import base64
from collections.abc import Mapping

import dagster as dg

from grasp_core.tracking import TrackedRun


def to_metadata(result: Mapping[str, object]) -> dict[str, dg.MetadataValue]:
    """Numbers stay numbers (plottable in the UI), dicts become JSON, markdown keys (`*_md`) render."""
    out: dict[str, dg.MetadataValue] = {}
    for key, value in result.items():
        if key.endswith("_md"):
            out[key.removesuffix("_md")] = dg.MetadataValue.md(str(value))
        elif key.endswith("_png"):
            b64 = base64.b64encode(value).decode()  # type: ignore[arg-type]
            out[key.removesuffix("_png")] = dg.MetadataValue.md(f"![plot](data:image/png;base64,{b64})")
        elif key == "path":
            out[key] = dg.MetadataValue.path(str(value))
        elif isinstance(value, bool):
            out[key] = dg.MetadataValue.bool(value)
        elif isinstance(value, int):
            out[key] = dg.MetadataValue.int(value)
        elif isinstance(value, float):
            out[key] = dg.MetadataValue.float(value)
        elif isinstance(value, (dict, list)):
            out[key] = dg.MetadataValue.json(value)
        else:
            out[key] = dg.MetadataValue.text(str(value))
    return out


def log_result(run: TrackedRun, result: Mapping[str, object]) -> None:
    """Numeric entries (also one level inside dicts) become MLflow metrics; markdown and plots artifacts."""
    metrics: dict[str, float] = {}
    for key, value in result.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            metrics[key] = float(value)
        elif isinstance(value, dict):
            metrics.update(
                {
                    f"{key}.{k}": float(v)
                    for k, v in value.items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool)
                }
            )
        elif key.endswith("_md"):
            run.log_text(str(value), f"{key.removesuffix('_md')}.md")
        elif key.endswith("_png"):
            run.log_png(value, f"{key.removesuffix('_png')}.png")  # type: ignore[arg-type]
    run.log_metrics(metrics)

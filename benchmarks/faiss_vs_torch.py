"""Exact top-100 inner-product search: faiss IndexFlatIP (default BLAS threshold and threshold 1) vs
torch and numpy matmul + top-k, for 1 and 64 queries against 5k and 130k normalized 384-d vectors.

Run: ``python benchmarks/faiss_vs_torch.py`` (no arguments); writes ``benchmarks/results/faiss_vs_torch.json`` (with
the run's record: commit, machine, load, date) and prints a table. Each figure is the minimum over ``REPEATS`` timed
calls after one warm-up call.
The result decides ``IndexConfig.blas_threshold`` in ``grasp_core/embed/vector_index.py``.
"""

from __future__ import annotations

import argparse

import faiss
import numpy as np
import torch
from harness import RESULTS, Run, timed

DIM, K, REPEATS = 384, 100, 30
SIZES, QUERIES = (5_000, 130_000), (1, 64)


def best_ms(fn) -> float:
    return float(min(timed(fn, n=REPEATS, warmup=1)))  # min: the machine is shared, contention only adds time


def numpy_topk(queries: np.ndarray, vectors: np.ndarray):
    scores = queries @ vectors.T
    top = np.argpartition(-scores, K, axis=1)[:, :K]
    part = np.take_along_axis(scores, top, 1)
    order = np.argsort(-part, axis=1)
    return np.take_along_axis(part, order, 1), np.take_along_axis(top, order, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args()
    run = Run()
    rng = np.random.default_rng(0)
    default_threshold = faiss.cvar.distance_compute_blas_threshold
    rows = []
    for n in SIZES:
        vectors = rng.standard_normal((n, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        index = faiss.IndexFlatIP(DIM)
        index.add(vectors)
        tensor = torch.from_numpy(vectors)
        for q in QUERIES:
            queries = np.ascontiguousarray(vectors[rng.choice(n, q)])
            row = {"vectors": n, "queries": q}
            for label, threshold in (
                (f"faiss (threshold {default_threshold}, default)", default_threshold),
                ("faiss (threshold 1)", 1),
            ):
                faiss.cvar.distance_compute_blas_threshold = threshold
                row[label] = best_ms(lambda index=index, queries=queries: index.search(queries, K))
            faiss.cvar.distance_compute_blas_threshold = default_threshold
            row["torch matmul+topk"] = best_ms(
                lambda queries=queries, tensor=tensor: torch.topk(torch.from_numpy(queries) @ tensor.T, K)
            )
            row["numpy matmul+argpartition"] = best_ms(
                lambda queries=queries, vectors=vectors: numpy_topk(queries, vectors)
            )
            rows.append(row)
    result = {
        "unit": "ms per batch (min over repeats)",
        "dim": DIM,
        "k": K,
        "faiss": faiss.__version__,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "default_blas_threshold": default_threshold,
        "rows": rows,
    }
    run.write(RESULTS / "faiss_vs_torch.json", result, quiet=True)
    methods = [k for k in rows[0] if k not in ("vectors", "queries")]
    print("| vectors | queries | " + " | ".join(methods) + " |")
    print("|---|---|" + "---|" * len(methods))
    for row in rows:
        print(f"| {row['vectors']} | {row['queries']} | " + " | ".join(f"{row[m]:.2f}" for m in methods) + " |")


if __name__ == "__main__":
    main()

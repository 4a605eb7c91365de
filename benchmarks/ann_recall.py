"""Recall of the HNSW index against exact search, at the size where the product switches to it.

Run: ``python benchmarks/ann_recall.py EMBEDDINGS_DIR [--sizes 129375 1000000] [--queries 1000]``, where
``EMBEDDINGS_DIR`` is a ``node_embeddings`` artifact (the scale benchmark leaves synth-prime's full-size one under
``benchmarks/.cache/scale-synth-prime-full/artifacts/synth-prime/node_embeddings``). A node type with at least
``IndexConfig.hnsw_min_size`` (1,000,000) nodes gets an ``IndexHNSWFlat`` (M 32, efConstruction 200, efSearch 256)
instead of an exact ``IndexFlatIP``; this measures what that costs in recall, with the product's own index
constructor and parameters (the graph built on one thread, as the product builds it). The name index switches far
sooner (``name_hnsw_min_size``); what that changes in linking is ``benchmarks/name_index_linking.py``.

The corpus is the artifact's document vectors; a size beyond them is filled with vectors between two random real
ones (``normalize(a * u + (1 - a) * v)``, ``a`` uniform in [0.25, 0.75]), which keeps the corpus on the documents'
region of the sphere and makes it denser there than the real one, so neighbours are closer together and harder to
tell apart: a conservative stand-in for a real corpus of that size, which this machine cannot encode in a session
(~50 documents/s). The queries are the name vectors of ``--queries`` random nodes (what a question's mention looks
like to the index), searched against the whole corpus. Per size: recall@10 and recall@100 of HNSW's top k among the
exact top k, the build time of both indexes, the median time of one query (batches of 1) and the index's bytes.
Writes ``benchmarks/results/ann_recall.json`` (rewritten after each size) with the run's ``record`` (commit,
machine, load average, date: ``benchmarks/harness.py``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import faiss
import numpy as np
from harness import RESULTS, Run, percentiles, timed

from grasp_core.embed.config import IndexConfig
from grasp_core.embed.node_embeddings import load_node_embeddings
from grasp_core.embed.vector_index import filled, new_index

SEED = 0


def corpus(doc: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` unit vectors: the real ones first, then mixtures of two random real ones."""
    if size <= len(doc):
        return np.ascontiguousarray(doc[:size], dtype=np.float32)
    extra = size - len(doc)
    a = rng.uniform(0.25, 0.75, size=(extra, 1)).astype(np.float32)
    u, v = doc[rng.integers(len(doc), size=extra)], doc[rng.integers(len(doc), size=extra)]
    mixed = a * u + (1 - a) * v
    mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
    return np.ascontiguousarray(np.concatenate([doc, mixed]), dtype=np.float32)


def recall(found: np.ndarray, exact: np.ndarray, k: int) -> float:
    hits = sum(len(np.intersect1d(f[:k], e[:k])) for f, e in zip(found, exact, strict=True))
    return hits / (k * len(exact))


def one_query_ms(index: faiss.Index, queries: np.ndarray, k: int, n: int = 200) -> float:
    """The median milliseconds of one search (a batch of 1), over the first ``n`` queries, each once."""
    batch = iter(queries[:n])
    ms = timed(lambda: index.search(next(batch)[None], k), n=len(queries[:n]))
    return percentiles(ms, points=(50,), digits=3)["p50"]


def measure(vectors: np.ndarray, queries: np.ndarray, cfg: IndexConfig) -> dict:
    dim = vectors.shape[1]
    start = time.perf_counter()
    exact = faiss.IndexFlatIP(dim)
    exact.add(vectors)
    exact_build = time.perf_counter() - start
    start = time.perf_counter()
    hnsw = new_index(dim, cfg.hnsw_min_size, cfg, "doc")  # the document index a type of this size gets
    assert isinstance(hnsw, faiss.IndexHNSWFlat)
    filled(hnsw, vectors)  # built as the product builds it (one thread)
    hnsw_build = time.perf_counter() - start
    _, exact_ids = exact.search(queries, 100)
    _, hnsw_ids = hnsw.search(queries, 100)
    return {
        "vectors": len(vectors),
        "recall@10": round(recall(hnsw_ids, exact_ids, 10), 4),
        "recall@100": round(recall(hnsw_ids, exact_ids, 100), 4),
        "build_seconds": {"exact": round(exact_build, 1), "hnsw": round(hnsw_build, 1)},
        "one_query_ms": {"exact": one_query_ms(exact, queries, 100), "hnsw": one_query_ms(hnsw, queries, 100)},
        "index_bytes": {
            "exact": int(faiss.serialize_index(exact).nbytes),
            "hnsw": int(faiss.serialize_index(hnsw).nbytes),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("embeddings", type=Path, help="a node_embeddings artifact directory")
    parser.add_argument("--sizes", nargs="+", type=int, default=None, help="corpus sizes (default: real, 1M)")
    parser.add_argument("--queries", type=int, default=1000)
    args = parser.parse_args()
    run = Run()
    emb = load_node_embeddings(args.embeddings)
    cfg = IndexConfig()
    faiss.cvar.distance_compute_blas_threshold = cfg.blas_threshold
    rng = np.random.default_rng(SEED)
    queries = np.ascontiguousarray(emb.name[rng.choice(len(emb.name), args.queries, replace=False)], np.float32)
    result: dict = {
        "embeddings": str(args.embeddings),
        "real_vectors": len(emb.doc),
        "queries": args.queries,
        "config": {k: getattr(cfg, k) for k in ("hnsw_min_size", "hnsw_m", "hnsw_ef_construction", "hnsw_ef_search")},
        "threads": faiss.omp_get_max_threads(),
        "faiss": faiss.__version__,
        "rows": [],
    }
    for size in args.sizes or [len(emb.doc), cfg.hnsw_min_size]:
        print(f"[ann] {size:,} vectors", flush=True)
        result["rows"].append(measure(corpus(emb.doc, size, rng), queries, cfg))
        print(f"[ann] {result['rows'][-1]}", flush=True)
        run.write(RESULTS / "ann_recall.json", result, quiet=True)


if __name__ == "__main__":
    main()

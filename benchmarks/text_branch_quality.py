"""Text-branch quality: BM25, dense and mFAR side by side on hpo and the small synthetic SKBs.

    python benchmarks/text_branch_quality.py [--datasets hpo synth-amazon synth-mag synth-prime]

Writes ``benchmarks/results/text_branch_quality.json`` and ``.md`` (test-split Hit@1, Hit@5, R@20, MRR
from :func:`grasp_core.metrics.evaluate`, plus mFAR's training time, history and mean field weights). The JSON keeps
the datasets an earlier run measured; each dataset's entry carries the ``record`` of the run that measured it.

Setup: each SKB is ``build_graph(name, DatasetConfig())`` (synthetic ones at scale ``small``) with the
queries of ``build_queries`` (3,000, split 60/20/20); the SKB with queries and its node embeddings
(MiniLM, ``doc_max_tokens=256``) are cached under ``benchmarks/.cache/`` (git-ignored), so only the first
run pays the encoding. BM25 is :class:`BM25Retriever` over node documents, dense is
:class:`DenseRetriever` over the document index, and mFAR is :func:`train_mfar` with the ``cpu`` defaults of
:class:`MFARConfig` (lexical scorer on every field, dense scorer on ``doc`` and ``name``). On a machine whose
cores are shared with other jobs the timings are upper bounds; run it there with ``OMP_NUM_THREADS=1``: torch's
OpenMP threads otherwise spin against the other jobs.

``--lexical-only`` skips the node embeddings (no dense row; mFAR with ``dense_fields=()``), for machines where
encoding every node document with MiniLM is too slow.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import asdict

from harness import RESULTS, ROOT, Run, read_result, write_result

from grasp_core.datasets import DatasetConfig, build_graph, build_queries
from grasp_core.embed.config import EncoderConfig
from grasp_core.embed.encoder import Encoder, load_encoder
from grasp_core.embed.node_embeddings import build_node_embeddings, load_node_embeddings
from grasp_core.embed.vector_index import NodeIndex
from grasp_core.io import atomic_file, is_complete
from grasp_core.metrics import evaluate
from grasp_core.questions.querygen import with_queries
from grasp_core.skb.format import SKB, read_skb, write_skb
from grasp_core.text.bm25 import BM25Retriever
from grasp_core.text.config import MFARConfig
from grasp_core.text.dense import DenseRetriever
from grasp_core.text.mfar import FieldIndex
from grasp_core.text.mfar_train import train_mfar

CACHE = ROOT / "benchmarks" / ".cache" / "text_branch"
OUT = RESULTS / "text_branch_quality"
DATASETS = ("hpo", "synth-amazon", "synth-mag", "synth-prime")
ENCODER = EncoderConfig(doc_max_tokens=256)
K = 100


def prepare(name: str, encoder: Encoder, embed: bool = True) -> tuple[SKB, NodeIndex | None]:
    """The SKB with its synthesized queries and (when ``embed``) its node index, built once and cached."""
    skb_dir = CACHE / name / "skb"
    if not is_complete(skb_dir):
        graph = build_graph(name, DatasetConfig())
        write_skb(with_queries(graph, build_queries(name, graph, DatasetConfig())), skb_dir)
    skb = read_skb(skb_dir)
    if not embed:
        return skb, None
    embeddings = build_node_embeddings(skb, encoder, CACHE / name / "embeddings", ENCODER)
    return skb, NodeIndex.build(skb, load_node_embeddings(embeddings))


def clocked(fn):
    """(what ``fn()`` returns, its wall seconds): one call, no warm-up."""
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def evaluate_dataset(name: str, encoder: Encoder, lexical_only: bool) -> dict:
    """Test-split metrics of BM25, dense and mFAR on one dataset (dense and mFAR's dense scorers need embeddings)."""
    skb, index = prepare(name, encoder, embed=not lexical_only)
    test = skb.split("test")
    queries, answers = test["query"].tolist(), [list(map(int, a)) for a in test["answer_ids"]]
    out: dict = {"num_nodes": skb.num_nodes, "splits": skb.split_counts(), "metrics": {}, "rank_s": {}}

    def measure(label: str, retriever) -> None:
        rankings, seconds = clocked(lambda: retriever.rank(queries, K))
        out["metrics"][label] = evaluate(rankings, answers, skb.num_nodes)
        out["rank_s"][label] = seconds

    bm25, out["bm25_build_s"] = clocked(lambda: BM25Retriever.build(skb))
    measure("bm25", bm25)
    if index is not None:
        measure("dense", DenseRetriever(index, encoder))
    cfg = MFARConfig() if index is not None else MFARConfig(dense_fields=())
    fields, out["mfar_field_index_s"] = clocked(lambda: FieldIndex.build(skb, index, encoder, cfg))
    (mfar, history), out["mfar_train_s"] = clocked(lambda: train_mfar(skb, index, encoder, cfg, fields=fields))
    measure("mfar", mfar)
    out["mfar_config"] = asdict(cfg)
    out["mfar_history"] = history
    weights = mfar.field_weights(queries).mean(0)
    out["mfar_mean_weights"] = dict(sorted(zip(fields.scorer_names, map(float, weights)), key=lambda kv: -kv[1]))
    return out


def markdown(results: dict) -> str:
    lines = ["| dataset | retriever | Hit@1 | Hit@5 | R@20 | MRR |", "|---|---|---|---|---|---|"]
    for name, r in results.items():
        for label, m in r["metrics"].items():
            lexical_only = r["mfar_config"]["dense_fields"] is not None and not r["mfar_config"]["dense_fields"]
            note = " (lexical scorers only)" if label == "mfar" and lexical_only else ""
            lines.append(
                f"| {name} | {label}{note} | {m['hit@1']:.1f} | {m['hit@5']:.1f} | {m['recall@20']:.1f} "
                f"| {m['mrr']:.1f} |"
            )
    lines += ["", "| dataset | nodes | mFAR field index (s) | mFAR training (s) | epochs |", "|---|---|---|---|---|"]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['num_nodes']} | {r['mfar_field_index_s']:.0f} | {r['mfar_train_s']:.0f} "
            f"| {len(r['mfar_history']) - 1} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument(
        "--lexical-only",
        action="store_true",
        help="skip node embeddings (no dense retriever; mFAR with lexical scorers only): for machines "
        "where encoding every node document is too slow",
    )
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    encoder = load_encoder(ENCODER)
    path = OUT.with_suffix(".json")
    results = read_result(path)  # earlier datasets are kept
    for name in args.datasets:
        run = Run(dataset=name, lexical_only=args.lexical_only)
        entry = evaluate_dataset(name, encoder, args.lexical_only)
        results[name] = {"record": run.finish(), **entry}
        write_result(path, results, quiet=True)
    with atomic_file(OUT.with_suffix(".md"), "w") as handle:
        handle.write(markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()

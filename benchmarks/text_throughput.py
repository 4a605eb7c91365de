"""Text-branch throughput on the real HPO SKB (~37k nodes): BM25 and mFAR against stark-qa's BM25.

    python benchmarks/text_throughput.py [--queries 1000] [--embed-sample 256]

- stark-qa's ``stark_qa.models.BM25`` is run as is: its constructor only needs an object with
  ``candidate_ids``, ``num_candidates`` and ``get_doc_info(i)``, so it gets our node documents
  (``skb.document(i)``) through a small adapter; it is called once per query (``forward``), as stark-qa does.
  One fix is needed: stark-qa 1.1.0 passes ``corpus=`` to ``bm25s.BM25``, and with the installed bm25s
  0.3.16 ``retrieve`` then returns document texts instead of positions, so ``forward`` raises KeyError.
  We set ``retriever.corpus = None`` after construction, which restores the positions stark-qa expects
  (the scoring path is unchanged).
- ``BM25Retriever.rank`` and ``MFARRetriever.rank`` get the whole batch of queries.
- mFAR's query path is exactly the trained one (query encoding with MiniLM, BM25 of every field, dense
  scoring of the ``cpu`` default's dense fields (doc and name), vectorized candidate union, weighting), but
  its dense vectors are random unit vectors of the right shape and its weights untrained: speed does not
  depend on their values. ``mfar_without_query_encoding`` subtracts the separately timed MiniLM encoding
  of the same queries.
- ``field_embedding`` is the one-off cost of giving every other field a dense scorer (the ``gpu``
  setting, ``MFARConfig.dense_fields=None``): MiniLM texts/s on ``--embed-sample`` texts of each field,
  extrapolated to all of them. ``--embed-sample 0`` skips it and keeps the previous measurement.
- Queries: ``--queries`` (1,000) pseudo-queries, each 12 words sampled from a random node's document (seeded).

Writes ``benchmarks/results/text_throughput.json`` (queries per second of each, their ratio to stark-qa's BM25,
index build seconds, the field-embedding estimate) and prints a table.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from harness import RESULTS, Run, read_result

from grasp_core.embed.config import EncoderConfig
from grasp_core.embed.encoder import load_encoder
from grasp_core.sources.hpo import build_hpo_skb
from grasp_core.text.bm25 import BM25Retriever, LexicalIndex
from grasp_core.text.config import MFARConfig
from grasp_core.text.fields import field_texts
from grasp_core.text.mfar import QUERY_MAX_TOKENS, FieldIndex, FieldWeights, MFARRetriever

OUT = RESULTS / "text_throughput.json"


class StarkAdapter:
    """The part of stark-qa's SKB interface its BM25 reads."""

    def __init__(self, docs: list[str]):
        self.docs = docs
        self.candidate_ids = list(range(len(docs)))
        self.num_candidates = len(docs)

    def get_doc_info(self, idx: int) -> str:
        return self.docs[idx]


def pseudo_queries(docs: list[str], n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for i in rng.choice(len(docs), n, replace=False):
        words = docs[i].split()
        out.append(" ".join(rng.choice(words, min(12, len(words)), replace=False)))
    return out


def clocked(fn):
    """(what ``fn()`` returns, its wall seconds): one call, no warm-up."""
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument(
        "--embed-sample", type=int, default=256, help="texts per field timed for the embedding estimate"
    )
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    run = Run(queries=args.queries, embed_sample=args.embed_sample)

    skb = build_hpo_skb()
    docs = skb.documents()
    queries = pseudo_queries(docs, args.queries)
    cfg = MFARConfig()
    previous = read_result(OUT)
    results: dict = {"dataset": "hpo", "num_nodes": skb.num_nodes, "num_queries": len(queries), "k": 100}

    from stark_qa.models import BM25 as StarkBM25

    stark, stark_build = clocked(lambda: StarkBM25(StarkAdapter(docs)))
    stark.retriever.corpus = None  # see the module docstring
    _, stark_time = clocked(lambda: [stark.forward(q, k=100) for q in queries])

    ours, bm25_build = clocked(lambda: BM25Retriever.build(skb))
    _, bm25_time = clocked(lambda: ours.rank(queries, k=100))

    encoder = load_encoder(EncoderConfig())
    texts = field_texts(skb, cfg.max_neighbours)
    rng = np.random.default_rng(0)
    lexical, dense, embed = {}, {}, {}
    for f, values in texts.items():
        rows = np.flatnonzero([bool(t) for t in values])
        lexical[f] = LexicalIndex.build([values[i] for i in rows], rows, skb.num_nodes, cfg.bm25)
        if f in cfg.dense_fields:
            vectors = rng.standard_normal((skb.num_nodes, encoder.dim)).astype(np.float32)
            dense[f] = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        elif args.embed_sample and len(rows):
            sample = [values[i] for i in rng.choice(rows, min(args.embed_sample, len(rows)), replace=False)]
            _, seconds = clocked(lambda sample=sample: encoder.encode(sample, cfg.field_max_tokens))
            embed[f] = {
                "texts": int(len(rows)),
                "texts_per_s": len(sample) / seconds,
                "estimated_s": len(rows) * seconds / len(sample),
            }
    fields = FieldIndex(list(texts), lexical, dense, cfg.bm25, encoder.identity)
    mfar = MFARRetriever(fields, FieldWeights(encoder.dim, fields.num_scorers), encoder, cfg)
    _, mfar_time = clocked(lambda: mfar.rank(queries, k=100))
    _, encode_time = clocked(lambda: encoder.encode(queries, QUERY_MAX_TOKENS))

    qps = {
        "stark_qa_bm25": len(queries) / stark_time,
        "bm25": len(queries) / bm25_time,
        "mfar": len(queries) / mfar_time,
        "mfar_without_query_encoding": len(queries) / max(mfar_time - encode_time, 1e-9),
        "query_encoding_only": len(queries) / encode_time,
    }
    results.update(
        {
            "queries_per_s": qps,
            "ratio_vs_stark_qa_bm25": {k: v / qps["stark_qa_bm25"] for k, v in qps.items()},
            "index_build_s": {"stark_qa_bm25": stark_build, "bm25": bm25_build},
            "mfar_fields": fields.fields,
            "mfar_scorers": fields.scorer_names,
            "field_embedding": (
                {
                    "field_max_tokens": cfg.field_max_tokens,
                    "per_field": embed,
                    "estimated_total_s": sum(e["estimated_s"] for e in embed.values()),
                }
                if embed
                else previous.get("field_embedding")
            ),
        }
    )
    run.write(OUT, results, quiet=True)
    print("| retriever | queries/s | × stark-qa BM25 |\n|---|---|---|")
    for name, v in qps.items():
        print(f"| {name} | {v:.1f} | {v / qps['stark_qa_bm25']:.2f} |")
    if results["field_embedding"]:
        print(
            f"\nfield embedding of the other fields (MiniLM, {cfg.field_max_tokens} tokens): estimated "
            f"{results['field_embedding']['estimated_total_s']:.0f} s"
        )


if __name__ == "__main__":
    main()

"""Text-branch quality: BM25, dense and mFAR side by side on hpo and the small synthetic SKBs.

    python benchmarks/text_branch_quality.py [--datasets hpo synth-amazon synth-mag synth-prime]

Writes ``benchmarks/results/text_branch_quality.json`` and ``.md`` (test-split Hit@1, Hit@5, R@20, MRR
from :func:`grasp_core.metrics.evaluate`, plus mFAR's training time, history and mean field weights).

Setup: each SKB is ``build_graph(name, DatasetConfig())`` (synthetic ones at scale ``small``) with the
queries of ``build_queries`` (3,000, split 60/20/20); the SKB with queries and its node embeddings
(MiniLM, ``doc_max_tokens=256``) are cached under ``benchmarks/.cache/`` (git-ignored), so only the first
run pays the encoding. BM25 is :class:`BM25Retriever` over node documents, dense is
:class:`DenseRetriever` over the document index, and mFAR is :func:`train_mfar` with the ``cpu`` defaults of
:class:`MFARConfig` (lexical scorer on every field, dense scorer on ``doc`` and ``name``). Timings come from a
machine whose 2 cores are shared with other jobs: they are upper bounds.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from grasp_core.datasets import DatasetConfig, build_graph, build_queries  # noqa: E402
from grasp_core.embed.encoder import Encoder, EncoderConfig, load_encoder  # noqa: E402
from grasp_core.embed.node_embeddings import build_node_embeddings, load_node_embeddings  # noqa: E402
from grasp_core.embed.vector_index import NodeIndex  # noqa: E402
from grasp_core.io import atomic_file, is_complete, write_json  # noqa: E402
from grasp_core.metrics import evaluate  # noqa: E402
from grasp_core.skb.format import SKB, read_skb, write_skb  # noqa: E402
from grasp_core.skb.querygen import with_queries  # noqa: E402
from grasp_core.text.bm25 import BM25Retriever  # noqa: E402
from grasp_core.text.dense import DenseRetriever  # noqa: E402
from grasp_core.text.mfar import MFARConfig, MFARRetriever, train_mfar  # noqa: E402

ROOT = Path(__file__).parent
CACHE = ROOT / ".cache" / "text_branch"
RESULTS = ROOT / "results" / "text_branch_quality"
DATASETS = ("hpo", "synth-amazon", "synth-mag", "synth-prime")
ENCODER = EncoderConfig(doc_max_tokens=256)
K = 100


def prepare(name: str, encoder: Encoder) -> tuple[SKB, NodeIndex]:
    """The SKB with its synthesized queries and its node index, built once and cached."""
    skb_dir = CACHE / name / "skb"
    if not is_complete(skb_dir):
        graph = build_graph(name, DatasetConfig())
        write_skb(with_queries(graph, build_queries(name, graph, DatasetConfig())), skb_dir)
    skb = read_skb(skb_dir)
    embeddings = build_node_embeddings(skb, encoder, CACHE / name / "embeddings", ENCODER)
    return skb, NodeIndex.build(skb, load_node_embeddings(embeddings))


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start

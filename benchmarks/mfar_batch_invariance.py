"""Does a question's mFAR text ranking depend on the batch it is ranked in, and what does the guarantee cost?

For the first ``--queries`` questions of a split, mFAR ranks them as one batch and each question alone, once as
the code before did (the dense field scores one matrix product per batch, ``query_vecs @ vectors.T``, and the field
weights a ``torch.nn.Linear``) and once as served now (one matrix-vector product per question,
``grasp_core.text.mfar.row_products``, and the weights a per-row sum). Reported per
variant: the questions whose top 100 differ alone and in the batch (node ids, or any score bit), and the batch's
ranking throughput (questions per second, the best of ``--repeats`` interleaved runs, so both variants see the
same machine).

Run: ``python benchmarks/mfar_batch_invariance.py hpo [--root DIR] [--split test] [--queries 600] [--repeats 3]``;
writes ``benchmarks/results/mfar_batch_invariance_<dataset>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from unittest import mock

import numpy as np
import torch
from harness import RESULTS, Run, load_components

from grasp_core.text import mfar

BEFORE = "matrix products per batch (before)"
SERVED = "a matrix-vector product and a row sum per question (served)"


def before(retriever: mfar.MFARRetriever):
    """The scoring of the code before, patched in for the block."""
    stack = contextlib.ExitStack()
    stack.enter_context(
        mock.patch.object(mfar, "row_products", lambda queries, vectors: np.asarray(queries, np.float32) @ vectors.T)
    )
    linear = retriever.model.linear
    stack.enter_context(mock.patch.object(retriever.model, "weights", lambda vecs: torch.softmax(linear(vecs), dim=-1)))
    return stack


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", default="hpo")
    parser.add_argument("--root", default=None, help="artifact root (default: $GRASP_HOME or dagster_home/artifacts)")
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--split", default="test")
    parser.add_argument("--queries", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    run = Run(profile=args.profile)
    components = load_components(args.dataset, args.root, args.profile)
    retriever = components.text_retriever("mfar")
    questions = components.split(args.split)["query"].head(args.queries).tolist()
    out: dict[str, dict[str, object]] = {}
    best: dict[str, float] = {}
    for _ in range(args.repeats):
        for name in (BEFORE, SERVED):
            with before(retriever) if name == BEFORE else contextlib.nullcontext():
                start = time.perf_counter()
                batch = retriever.rank(questions, k=100)
                best[name] = min(best.get(name, np.inf), time.perf_counter() - start)
                if name not in out:
                    differ = 0
                    for question, ranking in zip(questions, batch):
                        [alone] = retriever.rank([question], k=100)
                        differ += not (
                            np.array_equal(alone.node_ids, ranking.node_ids)
                            and np.array_equal(alone.scores, ranking.scores)
                        )
                    out[name] = {"questions_differing_alone_and_in_batch": differ}
    for name, seconds in best.items():
        out[name]["batch_questions_per_second"] = round(len(questions) / seconds, 1)
    doc = {"dataset": args.dataset, "split": args.split, "questions": len(questions), "variants": out}
    run.write(RESULTS / f"mfar_batch_invariance_{args.dataset}.json", doc)


if __name__ == "__main__":
    main()

"""What is measured is what is served: every evaluated query answered again by the product API
(:meth:`GraspRetriever.retrieve`, with and without the reranker) and compared, query by query, with the
``eval_metrics`` artifact's ``served+rerank`` and ``served`` rankings of it (top 100: node ids exactly, scores to
a relative 1e-6)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from grasp_core.components import Components
from grasp_core.eval.results import RERANKED, SERVED
from grasp_core.pipeline.evaluation import rankings_file, splits
from grasp_core.retriever import GraspRetriever
from grasp_core.text.rankings_io import read_rankings

TOP = 100


def answer_parity(
    components: Components, progress: Callable[[str], None] | None = None
) -> dict[str, dict[str, object]]:
    """Per ``setting/split``: the number of queries compared and the qids whose served answer differs."""
    eval_dir = components.art.require("eval_metrics")
    report: dict[str, dict[str, object]] = {}
    for rerank, setting in ((True, RERANKED), (False, SERVED)):
        retriever = GraspRetriever(components, rerank=rerank)
        for split in splits(components):
            part = components.split(split)
            stored = read_rankings(eval_dir / rankings_file(setting, split))
            results = retriever.retrieve(part["query"].tolist(), k=TOP)
            differ = []
            for qid, res in zip(part["qid"].astype(int).tolist(), results, strict=True):
                want = stored[qid].top(TOP)
                same = res.ranking.node_ids.tolist() == want.node_ids.tolist() and np.allclose(
                    res.ranking.scores, want.scores, rtol=1e-6, atol=0
                )
                if not same:
                    differ.append(qid)
            report[f"{setting}/{split}"] = {"queries": len(part), "differ": differ}
            if progress:
                progress(f"{setting}/{split}: {len(part)} queries, {len(differ)} differ")
    return report

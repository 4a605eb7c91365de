"""What is measured is what is served: every evaluated query answered by the product API, compared with the
``eval_metrics`` artifact's ``served`` and ``served+rerank`` rankings of it."""

from __future__ import annotations

import numpy as np

from grasp_core.components import Components
from grasp_core.eval.results import RERANKED, SERVED
from grasp_core.pipeline.evaluation import rankings_file, splits
from grasp_core.retriever import GraspRetriever
from grasp_core.text.rankings_io import read_rankings


def assert_retrieve_answers_as_evaluated(ws: Components) -> dict[str, int]:
    """Answer every query of every evaluated split with ``GraspRetriever.retrieve`` (with and without the reranker)
    and compare each query's top 100 with the evaluation's; returns the number of queries per split."""
    eval_dir = ws.art.require("eval_metrics")
    checked = {}
    for rerank, setting in ((True, RERANKED), (False, SERVED)):
        retriever = GraspRetriever(ws, rerank=rerank)
        for split in splits(ws):
            part = ws.split(split)
            stored = read_rankings(eval_dir / rankings_file(setting, split))
            results = retriever.retrieve(part["query"].tolist(), k=100)
            for qid, res in zip(part["qid"].astype(int), results, strict=True):
                want = stored[qid].top(100)
                assert res.ranking.node_ids.tolist() == want.node_ids.tolist(), (setting, split, qid)
                np.testing.assert_allclose(res.ranking.scores, want.scores, rtol=1e-6)
            checked[split] = len(part)
    return checked

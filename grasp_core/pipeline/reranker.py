"""Pipeline steps of the reranker: hard negatives from the trained planner's fused rankings, then training."""

from __future__ import annotations

import shutil
import time

import numpy as np
import pandas as pd

from grasp_core.components import Components
from grasp_core.io import atomic_dir, write_json
from grasp_core.pipeline.plots import line_plot, markdown_table
from grasp_core.planner.scoring import evaluate_planner
from grasp_core.rerank.weights import RRF_FILE


def _fused_for(ws: Components, split: str, cap: int | None):
    """Fused rankings of the served planner on ``split`` (the planner runs once per query)."""
    from grasp_core.pipeline.planner import planner_env

    name, ckpt = ws.final_planner()
    env = planner_env(ws)
    qids = ws.split(split)["qid"].astype(int).head(cap).tolist()
    result = evaluate_planner(ws.planner_llm(ckpt), env, qids, ws.profile.inference)
    return name, qids, result["fused_rankings"], env


def hard_negatives_step(ws: Components) -> dict:
    from grasp_core.rerank.hard_negatives import mine_hard_negatives

    cap = ws.profile.rl.max_queries
    planner, qids, fused, env = _fused_for(ws, "train", cap)
    negs = mine_hard_negatives(qids, fused, [env.gold[q] for q in qids])
    with atomic_dir(ws.art.path("reranker_hard_negatives")) as tmp:
        negs.to_parquet(tmp / "hard_negatives.parquet")
    return {
        "planner": planner,
        "train_queries": len(qids),
        "queries_with_positive": len(negs),
        "mean_negatives": round(float(negs["negatives"].map(len).mean()), 1) if len(negs) else 0.0,
        "path": str(ws.art.path("reranker_hard_negatives")),
    }


def reranker_step(ws: Components, log_fn=None) -> dict:
    from grasp_core.rerank.inference import RerankValidation, ValItem, rerank_batch, select_rrf_params
    from grasp_core.rerank.train import train_reranker

    negs = pd.read_parquet(ws.art.require("reranker_hard_negatives") / "hard_negatives.parquet")
    scorer, builder = ws.reranker_scorer(), ws.reranker_documents()
    val_cap = ws.profile.grpo.val_queries
    _, val_qids, val_fused, env = _fused_for(ws, "val", val_cap)
    val_queries = [env.queries[q] for q in val_qids]
    val_answers = [env.gold[q] for q in val_qids]
    K = ws.profile.rerank.top_k
    validation = RerankValidation(val_fused, val_queries, val_answers, builder, K)
    work = ws.art.path("reranker_work")
    t0 = time.perf_counter()
    result = train_reranker(
        scorer,
        builder,
        negs,
        ws.skb.queries[["qid", "query"]],
        validation,
        ws.profile.reranker_train,
        work,
        log_fn=log_fn,
    )
    train_seconds = time.perf_counter() - t0
    if validation.last is not None and result.best_step == result.history[-1]["step"]:
        items = validation.last  # the kept checkpoint was the one validated last in this process: its scores
    else:
        reranked = rerank_batch(val_fused, val_queries, scorer, builder, K)
        items = [ValItem(f, r.scores, a) for f, r, a in zip(val_fused, reranked, val_answers)]
    w, k, grid = select_rrf_params(items, ws.profile.rerank.grid_w, ws.profile.rerank.grid_k)
    with atomic_dir(ws.art.path("reranker")) as tmp:
        shutil.copytree(result.best_dir, tmp, dirs_exist_ok=True)
        write_json(tmp / RRF_FILE, {"w": w, "k": k, "grid": grid.to_dict(orient="records"), "K": K})
    shutil.rmtree(work, ignore_errors=True)
    losses = [(h["step"], h["val"]) for h in result.history]
    fused_hit1 = 100 * float(np.mean([f.rank_of(a) == 1 for f, a in zip(val_fused, val_answers)]))
    return {
        "train_queries": len(negs),
        "best_step": result.best_step,
        "val_hit1_reranker_order": result.best_val,
        "val_hit1_fused": fused_hit1,
        "rrf_w": w,
        "rrf_k": k,
        "train_seconds": round(train_seconds, 1),
        "rrf_grid_md": markdown_table(grid.to_dict(orient="records"), ["w", "k", "hit@1", "mrr"]),
        "validation_png": line_plot(
            {"val Hit@1": ([s for s, _ in losses], [v for _, v in losses])}, "reranker checkpoints", "step", "Hit@1 (%)"
        ),
        "path": str(ws.art.path("reranker")),
    }

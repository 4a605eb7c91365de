"""Pipeline steps of the reranker: training data from the served planner's fused rankings, then training.

``Profile.reranker_kind`` chooses the reranker: ``ltr`` (the ``cpu`` default: LightGBM lambdarank over
:mod:`grasp_core.rerank.features`), ``cross-encoder`` (MiniLM) or ``causal-lm`` (the ``gpu`` profile's
Qwen3-Reranker + LoRA). Both steps and :meth:`Components.reranker` (which loads the result) follow it; the
``reranker`` artifact records its kind in ``rrf.json``, so a model of another kind is refused with a message
instead of being misread.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from grasp_core.answer import AnswerOptions, AnswerPath
from grasp_core.components import EXECUTOR, EXTRACTOR, FUSED_TEXT, PLANNER, RERANKER, Components
from grasp_core.io import atomic_dir, write_json
from grasp_core.pipeline.asked_type import fit_asked_type_model
from grasp_core.pipeline.plots import bar_plot, line_plot, markdown_table
from grasp_core.pipeline.step import step
from grasp_core.ranking import Ranking
from grasp_core.rerank.features import FeatureBuilder, RerankInput
from grasp_core.rerank.weights import RRF_FILE

if TYPE_CHECKING:
    from grasp_core.planner.interface import Planner
    from grasp_core.rerank.asked_type import AskedType

LISTS_FILE = "lists.parquet"  # the training queries' reranker inputs (ltr)
VAL_LISTS_FILE = "val_lists.parquet"  # the first ``LTRConfig.val_queries`` val questions' inputs (ltr)


def served_inputs(components: Components, split: str, cap: int | None = None):
    """The served planner's name, the split's first ``cap`` query ids (None: all), their reranker inputs (the answer
    path up to fusion, on the stored text rankings and entity tables) and gold answers. On ``train``, a planner with a
    plan chooser answers each fold of ``reranker_candidates.chooser_folds`` with a chooser fit without it
    (:func:`~grasp_core.pipeline.planner_policy.out_of_fold_planners`)."""
    part = components.split(split).head(cap)
    qids = part["qid"].astype(int).tolist()
    name, checkpoint = components.final_planner()
    served = components.planner(checkpoint)
    folds = components.profile.reranker_candidates.chooser_folds
    groups: Sequence[tuple[list[int], Planner]] = [(qids, served)]
    if split == "train" and folds > 1 and getattr(served, "chooser", None) is not None:
        from grasp_core.pipeline.planner_policy import out_of_fold_planners

        groups = out_of_fold_planners(components, served, checkpoint, qids, folds)  # type: ignore[arg-type]
        name = f"{name}, chooser out of fold ({folds} folds)"
    queries = dict(zip(qids, part["query"]))
    inputs: dict[int, RerankInput] = {}
    for group, planner in groups:
        options = AnswerOptions(rerank=False, reranker_candidates=True)
        path = AnswerPath(components, options, planner=planner)
        out = path.answer(
            [queries[q] for q in group],
            text=[components.text_rankings[q] for q in group],
            tables=[components.entity_tables[q] for q in group],
        )
        inputs.update(zip(group, out.rerank_inputs()))
    return name, qids, [inputs[q] for q in qids], components.answers(qids)


def _train_cap(components: Components) -> int | None:
    return (
        components.profile.ltr.train_queries if components.reranker_kind == "ltr" else components.profile.rl.max_queries
    )


@step(
    "reranker_hard_negatives",
    reads=(
        *EXECUTOR,
        *EXTRACTOR,
        *PLANNER,
        *FUSED_TEXT,
        *RERANKER,
        "chooser",
        "grpo",
        "ltr",
        "policy",
        "policy_train",
        "rerank",
        "reranker_candidates",
        "reward",
        "rl",
        "teacher",
    ),
)
def hard_negatives_step(components: Components) -> dict:
    """The served planner's fused lists the reranker learns from: the training questions' (and their hard
    negatives) and, for ``ltr``, the val questions' it is early-stopped on. The answer path runs without the
    reranker, so K is never read at run time and a variant that changes only K reuses this artifact."""
    from grasp_core.rerank.hard_negatives import mine_hard_negatives

    planner, qids, inputs, gold = served_inputs(components, "train", _train_cap(components))
    negs = mine_hard_negatives(qids, [x.fused for x in inputs], gold)
    with atomic_dir(components.art.path("reranker_hard_negatives")) as tmp:
        negs.to_parquet(tmp / "hard_negatives.parquet")
        _inputs_frame(qids, inputs).to_parquet(tmp / LISTS_FILE)
        if components.reranker_kind == "ltr":
            _, val_qids, val_inputs, _ = served_inputs(components, "val", components.profile.ltr.val_queries)
            _inputs_frame(val_qids, val_inputs).to_parquet(tmp / VAL_LISTS_FILE)
    return {
        "planner": planner,
        "train_queries": len(qids),
        "queries_with_positive": len(negs),
        "mean_negatives": round(float(negs["negatives"].map(len).mean()), 1) if len(negs) else 0.0,
        "path": str(components.art.path("reranker_hard_negatives")),
    }


def _inputs_frame(qids, inputs: list[RerankInput]) -> pd.DataFrame:
    """One row per query: its rankings, plan target type and bindings (entity tables live in their own asset)."""
    return pd.DataFrame(
        {
            "qid": qids,
            **{
                f"{name}_{part}": [getattr(x, name)[i].tolist() for x in inputs]
                for name in ("fused", "text", "graph")
                for i, part in enumerate(("ids", "scores"))
            },
            "target_type": [x.target_type for x in inputs],
            "binding_ids": [[b for b, _ in x.bindings] for x in inputs],
            "binding_scores": [[s for _, s in x.bindings] for x in inputs],
        }
    )


def _inputs_of(components: Components, frame: pd.DataFrame) -> tuple[list[int], list[RerankInput]]:
    queries = dict(zip(components.skb.queries["qid"].astype(int), components.skb.queries["query"]))
    tables = components.entity_tables
    out = []
    for row in frame.itertuples(index=False):
        q = int(row.qid)
        rankings = {
            name: Ranking(
                np.asarray(getattr(row, f"{name}_ids"), np.int64),
                np.asarray(getattr(row, f"{name}_scores"), np.float32),
            )
            for name in ("fused", "text", "graph")
        }
        base = RerankInput.of(queries[q], rankings["fused"], rankings["text"], rankings["graph"], None, tables[q])
        bindings = tuple(zip(map(int, row.binding_ids), map(float, row.binding_scores)))
        out.append(dataclasses.replace(base, target_type=row.target_type, bindings=bindings))
    return frame["qid"].astype(int).tolist(), out


@step(
    "reranker",
    reads=(
        *EXECUTOR,
        *EXTRACTOR,
        *PLANNER,
        *FUSED_TEXT,
        *RERANKER,
        "asked_type",
        "chooser",
        "grpo",
        "ltr",
        "policy",
        "policy_train",
        "rerank",
        "reranker_candidates",
        "reranker_train",
        "reward",
        "teacher",
    ),
)
def reranker_step(components: Components, log_fn=None) -> dict:
    if components.reranker_kind == "ltr":
        return _ltr_step(components)
    return _pair_step(components, log_fn)


@dataclasses.dataclass(frozen=True)
class LTRData:
    """The ``ltr`` reranker's training inputs: the training lists and the val lists, their feature matrices and
    graded labels (one matrix and one label vector per query), and the feature builder that made them."""

    features: FeatureBuilder
    train: tuple[list[np.ndarray], list[np.ndarray]]
    val_inputs: list[RerankInput]
    val_gold: list
    val: tuple[list[np.ndarray], list[np.ndarray]]


def ltr_data(components: Components, asked: AskedType) -> LTRData:
    """Rebuild the ``ltr`` step's inputs from the artifacts: the training and val lists ``reranker_hard_negatives``
    stored, and their features with the asked-type model ``asked``. The step and ``benchmarks/reranker_seeds.py`` both call this, so they train on the
    same data."""
    from grasp_core.rerank.ltr import labels_of

    K = components.profile.rerank.top_k
    lists = components.art.require("reranker_hard_negatives")
    train_qids, train_inputs = _inputs_of(components, pd.read_parquet(lists / LISTS_FILE))
    val_qids, val_inputs = _inputs_of(components, pd.read_parquet(lists / VAL_LISTS_FILE))
    features = components.reranker_features(asked)
    gold = dict(zip(components.skb.queries["qid"].astype(int), components.skb.queries["answer_ids"]))
    val_gold = [gold[q] for q in val_qids]
    train_y = [labels_of(x.fused.node_ids[:K], gold[q]) for q, x in zip(train_qids, train_inputs)]
    val_y = [labels_of(x.fused.node_ids[:K], g) for x, g in zip(val_inputs, val_gold)]
    return LTRData(
        features,
        (features.build(train_inputs, K), train_y),
        val_inputs,
        val_gold,
        (features.build(val_inputs, K), val_y),
    )


def _ltr_step(components: Components) -> dict:
    from grasp_core.rerank.inference import ValItem, select_rrf_params
    from grasp_core.rerank.ltr import train_ranker
    from grasp_core.rerank.ranker import FEATURES_FILE, MODEL_FILE

    K = components.profile.rerank.top_k
    asked, asked_metrics = fit_asked_type_model(components)
    t0 = time.perf_counter()
    data = ltr_data(components, asked)
    features, val_inputs, val_gold = data.features, data.val_inputs, data.val_gold
    data_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    trained = train_ranker(data.train, data.val, features.names, components.profile.ltr)
    train_seconds = time.perf_counter() - t0
    val_scores = [
        np.asarray(trained.booster.predict(X, num_iteration=trained.best_round)) if len(X) else np.zeros(0)
        for X in data.val[0]
    ]
    items = [ValItem(x.fused, s.astype(np.float32), g) for x, s, g in zip(val_inputs, val_scores, val_gold)]
    w, k, grid = select_rrf_params(items, components.profile.rerank.grid_w, components.profile.rerank.grid_k)
    with atomic_dir(components.art.path("reranker")) as tmp:
        trained.booster.save_model(str(tmp / MODEL_FILE), num_iteration=trained.best_round)
        write_json(tmp / FEATURES_FILE, {"names": features.names, "importance_gain": trained.importance})
        asked.save(tmp)
        write_json(tmp / RRF_FILE, {"kind": "ltr", "w": w, "k": k, "grid": grid.to_dict(orient="records"), "K": K})
    hit1 = {
        "val_hit1_fused": 100.0 * float(np.mean([x.fused.rank_of(g) == 1 for x, g in zip(val_inputs, val_gold)])),
        "val_hit1_reranker_order": 100.0
        * float(
            np.mean(
                [
                    Ranking.from_scores(i.fused.node_ids[: len(i.scores)], i.scores).rank_of(i.answers) == 1
                    for i in items
                ]
            )
        ),
    }
    top, at = dict(list(trained.importance.items())[:15]), components.profile.ltr.early_stopping_at
    train_gold_in_top_k = [bool(y.size and y.max() > 0) for y in data.train[1]]
    return {
        "kind": "ltr",
        "train_queries": len(data.train[0]),
        "train_gold_in_top_k_share": round(100.0 * float(np.mean(train_gold_in_top_k)), 1)
        if train_gold_in_top_k
        else 0.0,
        "train_groups": trained.train_groups,
        "val_queries": len(val_inputs),
        "best_round": trained.best_round,
        **hit1,
        "rrf_w": w if math.isfinite(w) else "inf (ranker order)",
        "rrf_k": k,
        **asked_metrics,
        "data_seconds": round(data_seconds, 1),
        "train_seconds": round(train_seconds, 1),
        "rrf_grid_md": markdown_table(grid.to_dict(orient="records"), ["w", "k", "hit@1", "mrr"]),
        "feature_importance_md": markdown_table(
            [{"feature": n, "gain": v} for n, v in trained.importance.items()], ["feature", "gain"]
        ),
        "feature_importance_png": bar_plot(top, "reranker feature importance (gain, top 15)", "total gain"),
        "validation_png": line_plot(
            {f"val NDCG@{at}": (list(range(1, len(trained.val_curve) + 1)), trained.val_curve)},
            "ltr reranker early stopping",
            "boosting round",
            f"NDCG@{at} (%)",
        ),
        "path": str(components.art.path("reranker")),
    }


def _pair_step(components: Components, log_fn=None) -> dict:
    from grasp_core.rerank.inference import RerankValidation, ValItem, rerank_batch, select_rrf_params
    from grasp_core.rerank.train import train_reranker

    negs = pd.read_parquet(components.art.require("reranker_hard_negatives") / "hard_negatives.parquet")
    scorer, builder = components.reranker_scorer(), components.reranker_documents()
    _, _, val, val_answers = served_inputs(components, "val", components.profile.grpo.val_queries)
    val_fused, val_queries = [x.fused for x in val], [x.query for x in val]
    K = components.profile.rerank.top_k
    validation = RerankValidation(val_fused, val_queries, val_answers, builder, K)
    work = components.art.path("reranker_work")
    t0 = time.perf_counter()
    result = train_reranker(
        scorer,
        builder,
        negs,
        components.skb.queries[["qid", "query"]],
        validation,
        components.profile.reranker_train,
        work,
        log_fn=log_fn,
    )
    train_seconds = time.perf_counter() - t0
    if validation.last is not None and result.best_step == result.history[-1]["step"]:
        items = validation.last  # the kept checkpoint was the one validated last in this process: its scores
    else:
        reranked = rerank_batch(val_fused, val_queries, scorer, builder, K)
        items = [ValItem(f, r.scores, a) for f, r, a in zip(val_fused, reranked, val_answers)]
    w, k, grid = select_rrf_params(items, components.profile.rerank.grid_w, components.profile.rerank.grid_k)
    with atomic_dir(components.art.path("reranker")) as tmp:
        shutil.copytree(result.best_dir, tmp, dirs_exist_ok=True)
        write_json(
            tmp / RRF_FILE,
            {"kind": components.reranker_kind, "w": w, "k": k, "grid": grid.to_dict(orient="records"), "K": K},
        )
    shutil.rmtree(work, ignore_errors=True)
    losses = [(h["step"], h["val"]) for h in result.history]
    fused_hit1 = 100 * float(np.mean([f.rank_of(a) == 1 for f, a in zip(val_fused, val_answers)]))
    return {
        "kind": components.reranker_kind,
        "train_queries": len(negs),
        "best_step": result.best_step,
        "val_hit1_reranker_order": result.best_val,
        "val_hit1_fused": fused_hit1,
        "rrf_w": w if math.isfinite(w) else "inf (reranker order)",
        "rrf_k": k,
        "train_seconds": round(train_seconds, 1),
        "rrf_grid_md": markdown_table(grid.to_dict(orient="records"), ["w", "k", "hit@1", "mrr"]),
        "validation_png": line_plot(
            {"val Hit@1": ([s for s, _ in losses], [v for _, v in losses])}, "reranker checkpoints", "step", "Hit@1 (%)"
        ),
        "path": str(components.art.path("reranker")),
    }

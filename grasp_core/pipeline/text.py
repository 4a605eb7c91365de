"""Pipeline steps of the text branch: indexes (BM25 + mFAR fields), the trained mFAR, rankings of every query."""

from __future__ import annotations

import time

from grasp_core.components import FUSED_TEXT, TEXT_RETRIEVERS, Components
from grasp_core.io import atomic_dir, write_json
from grasp_core.metrics import evaluate
from grasp_core.pipeline.plots import line_plot, markdown_table
from grasp_core.pipeline.step import step
from grasp_core.skb.format import SPLITS


@step("text_index", reads=("bm25", "encoder", "mfar"))
def text_index_step(components: Components) -> dict:
    from grasp_core.text.bm25 import BM25Retriever
    from grasp_core.text.mfar import FieldIndex

    start = time.perf_counter()
    with atomic_dir(components.art.path("text_index")) as tmp:
        BM25Retriever.build(components.graph, components.profile.bm25).save(tmp / "bm25")
        bm25_seconds = time.perf_counter() - start
        fields = FieldIndex.build(
            components.graph,
            components.index,
            components.encoder,
            components.profile.mfar,
            work_dir=components.art.path("text_index_work"),
        )
        (tmp / "fields").mkdir()
        fields.save(tmp / "fields")
    return {
        "bm25_seconds": round(bm25_seconds, 2),
        "field_seconds": round(time.perf_counter() - start - bm25_seconds, 2),
        "fields": len(fields.fields),
        "scorers": fields.num_scorers,
        "path": str(components.art.path("text_index")),
    }


@step("mfar_model", reads=("encoder", "mfar", "oof"))
def mfar_model_step(components: Components, log_fn=None) -> dict:
    """The full mFAR (val, test and serving) and, with ``oof.folds``, one fold model per fold of the training
    queries (their out-of-fold rankings, :mod:`grasp_core.text.oof`)."""
    from grasp_core.text.mfar import FieldIndex
    from grasp_core.text.mfar_train import train_mfar
    from grasp_core.text.oof import save_folds, train_fold_models

    fields = FieldIndex.load(components.art.require("text_index") / "fields")
    start = time.perf_counter()

    def progress(entry: dict) -> None:
        if log_fn:
            log_fn(entry["epoch"], {k: v for k, v in entry.items() if isinstance(v, (int, float))})

    retriever, history = train_mfar(
        components.skb, components.index, components.encoder, components.profile.mfar, progress=progress, fields=fields
    )
    seconds = time.perf_counter() - start
    assignment, fold_models, fold_histories = train_fold_models(
        components.skb, components.index, components.encoder, retriever, components.profile.oof
    )
    with atomic_dir(components.art.path("mfar_model")) as tmp:
        retriever.write(tmp)
        save_folds(tmp, assignment, fold_models)
    epochs = [h["epoch"] for h in history]
    plot = line_plot({"val MRR": (epochs, [h["val_mrr"] for h in history])}, "mFAR training", "epoch", "val MRR (%)")
    return {
        "train_seconds": round(seconds, 1),
        "epochs": len(history) - 1,
        "initial_val_mrr": history[0]["val_mrr"],
        "best_val_mrr": max(h["val_mrr"] for h in history),
        "folds": len(fold_models),
        **{f"fold_{i}.best_val_mrr": max(h["val_mrr"] for h in f) for i, f in enumerate(fold_histories)},
        "fold_seconds": round(time.perf_counter() - start - seconds, 1),
        "training_curve_png": plot,
        "path": str(components.art.path("mfar_model")),
    }


@step("text_rankings", reads=(*FUSED_TEXT, "encoder"))
def text_rankings_step(components: Components) -> dict:
    """Top 100 of every query of every split for BM25, dense and mFAR (training queries: out of fold where the
    mfar_model has folds); metrics per split."""
    from grasp_core.text.mfar import MFARRetriever
    from grasp_core.text.oof import out_of_fold_rank
    from grasp_core.text.rankings_io import write_rankings

    queries = components.skb.queries
    qids, texts = queries["qid"].tolist(), queries["query"].tolist()
    answers = [list(map(int, a)) for a in queries["answer_ids"]]
    rows, seconds = [], {}
    with atomic_dir(components.art.path("text_rankings")) as tmp:
        for name in TEXT_RETRIEVERS:
            retriever = components.text_retriever(name)
            start = time.perf_counter()
            if isinstance(retriever, MFARRetriever):
                rankings = out_of_fold_rank(components.art.require("mfar_model"), retriever, queries, k=100)
            else:
                rankings = retriever.rank(texts, k=100)
            seconds[name] = time.perf_counter() - start
            write_rankings(tmp / f"{name}.parquet", qids, rankings)
            for split in SPLITS:
                idx = [i for i, s in enumerate(queries["split"]) if s == split]
                if idx:
                    m = evaluate([rankings[i] for i in idx], [answers[i] for i in idx], components.skb.num_nodes)
                    rows.append({"retriever": name, "split": split, **m})
        write_json(tmp / "metrics.json", rows)
    return {
        "main_retriever": components.profile.text_retriever,
        "queries_per_second": {k: round(len(texts) / max(v, 1e-9), 1) for k, v in seconds.items()},
        "metrics_md": markdown_table(rows, ["retriever", "split", "hit@1", "hit@5", "recall@20", "mrr"]),
        **{f"{r['retriever']}.{r['split']}.hit@1": r["hit@1"] for r in rows},
        "path": str(components.art.path("text_rankings")),
    }

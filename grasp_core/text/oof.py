"""Out-of-fold mFAR rankings of the training queries (stacking without the fitted model's optimism).

Everything after the text branch that learns from training queries (the teacher's reward table, the planner's
RFT/RL rewards, the reranker's training lists) compares plans against the text ranking of the same query. The mFAR
that ranks val, test and served questions was fitted on those training queries, so on them it looks better than
on any question it has not seen (on ``pystdlib`` its Hit@1 is clearly higher on train than on val:
``benchmarks/results/text_optimism_pystdlib_before.json``), and a graph plan is judged
against a text ranking that no served question gets. The standard remedy for stacked models: split the training
queries into ``folds`` folds, fit one mFAR per fold on the other folds (same field index, same validation
selection), and rank each training query with the model that did not see it. Val, test and served questions keep
the full model; serving never loads the fold models. BM25 and dense have no parameters fitted on queries, so
their rankings need no folds.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from grasp_core.embed.encoder import Encoder
from grasp_core.embed.vector_index import NodeIndex
from grasp_core.errors import CorruptArtifactError, GraspError
from grasp_core.io import read_json, write_json
from grasp_core.ranking import Ranking
from grasp_core.skb.format import SKB
from grasp_core.text.config import OutOfFoldConfig
from grasp_core.text.mfar import FieldWeights, MFARRetriever
from grasp_core.text.mfar_train import train_mfar

FOLDS_DIR = "folds"  # inside the mfar_model artifact, beside the full model
ASSIGNMENT_FILE = "assignment.json"


def assign_folds(qids: Sequence[int], cfg: OutOfFoldConfig) -> dict[int, int]:
    """Each training query's fold (0..folds-1): a seeded permutation dealt round robin, so fold sizes differ by
    at most one and the assignment depends only on the qids and the seed."""
    if cfg.folds == 1 or cfg.folds < 0:
        raise GraspError(f"OutOfFoldConfig.folds must be 0 (off) or at least 2, got {cfg.folds}")
    order = np.random.default_rng(cfg.seed).permutation(np.sort(np.asarray(qids, np.int64)))
    return {int(q): i % cfg.folds for i, q in enumerate(order)}


def train_fold_models(
    skb: SKB,
    index: NodeIndex | None,
    encoder: Encoder,
    retriever: MFARRetriever,
    cfg: OutOfFoldConfig,
) -> tuple[dict[int, int], list[FieldWeights], list[list[dict]]]:
    """The fold assignment of ``skb``'s training queries, one mFAR weighting per fold (trained like ``retriever``
    on the training queries outside the fold, over its field index) and each fold's training history."""
    if cfg.folds == 0:
        return {}, [], []
    if retriever.cfg.finetune_encoder:  # a fold model is saved without the query encoder it would fine-tune
        raise GraspError(
            "out-of-fold rankings need the query encoder fixed (a fold would rank with the full model's fine-tuned "
            "encoder, fitted on its held-out queries): set OutOfFoldConfig.folds=0 or MFARConfig.finetune_encoder=False"
        )
    assignment = assign_folds(skb.split("train")["qid"].astype(int).tolist(), cfg)
    models, histories = [], []
    for fold in range(cfg.folds):
        held_out = {q for q, f in assignment.items() if f == fold}
        model, history = train_mfar(
            skb,
            index,
            encoder,
            retriever.cfg,
            fields=retriever.fields,
            exclude=held_out,
        )
        models.append(model.model)
        histories.append(history)
    return assignment, models, histories


def save_folds(path: Path, assignment: dict[int, int], models: Sequence[FieldWeights]) -> None:
    """Write the fold models into ``path`` (a directory being built by the mfar_model step)."""
    if not models:
        return
    (path / FOLDS_DIR).mkdir()
    write_json(path / FOLDS_DIR / ASSIGNMENT_FILE, {"folds": len(models), "qid_fold": assignment})
    for fold, model in enumerate(models):
        torch.save(model.state_dict(), path / FOLDS_DIR / f"fold_{fold}.pt")


def out_of_fold_rank(path: Path, retriever: MFARRetriever, queries: pd.DataFrame, k: int = 100) -> list[Ranking]:
    """Top ``k`` of every query of ``queries`` (columns ``qid``, ``query``): by the full ``retriever`` (loaded
    from ``path``), except the training queries with a fold, ranked by the fold model that did not train on them."""
    folds = path / FOLDS_DIR
    if not folds.exists():
        return retriever.rank(queries["query"].tolist(), k=k)
    meta = read_json(folds / ASSIGNMENT_FILE)
    assignment = {int(q): int(f) for q, f in meta["qid_fold"].items()}
    models = [_load_fold(folds, fold, retriever) for fold in range(int(meta["folds"]))]
    return rank_by_folds(retriever, assignment, models, queries, k)


def rank_by_folds(
    retriever: MFARRetriever,
    assignment: dict[int, int],
    models: Sequence[FieldWeights],
    queries: pd.DataFrame,
    k: int = 100,
) -> list[Ranking]:
    """Top ``k`` of every query of ``queries``: a query of ``assignment`` by its fold's model (over ``retriever``'s
    field index and encoder), any other by ``retriever``."""
    texts = queries["query"].tolist()
    fold_of = [assignment.get(q, -1) for q in queries["qid"].astype(int).tolist()]
    rankings: dict[int, Ranking] = {}
    for fold in range(-1, len(models)):
        rows = [i for i, f in enumerate(fold_of) if f == fold]
        if rows:
            ranker = (
                retriever
                if fold < 0
                else MFARRetriever(retriever.fields, models[fold], retriever.encoder, retriever.cfg)
            )
            rankings.update(zip(rows, ranker.rank([texts[i] for i in rows], k=k)))
    return [rankings[i] for i in range(len(texts))]


def _load_fold(folds: Path, fold: int, full: MFARRetriever) -> FieldWeights:
    model = FieldWeights(full.encoder.dim, full.fields.num_scorers)
    try:
        model.load_state_dict(torch.load(folds / f"fold_{fold}.pt", weights_only=True))
    except (OSError, RuntimeError) as exc:
        raise CorruptArtifactError(f"{folds / f'fold_{fold}.pt'}: unreadable fold model ({exc}); retrain") from exc
    return model

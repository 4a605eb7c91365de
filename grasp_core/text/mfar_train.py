"""Training mFAR's field weights (:mod:`grasp_core.text.mfar`) on an SKB's train split, selected on val.

Training. Contrastive cross-entropy: each training query takes one of its gold answers (a random one
each epoch) as positive; the candidates are every positive and every hard negative in the batch (in-batch
negatives), where a query's hard negatives are the top ``hard_negatives`` non-gold nodes of whole-document
BM25. The other gold answers of a query are masked out of its softmax. After each epoch the validation
MRR (gold first in the ranked candidate pool; a query whose gold is not in the pool counts 0) is measured;
the best epoch's weights are kept, and training stops after ``patience`` epochs without improvement.

Encoder fine-tuning (``finetune_encoder``, GPU only, off by default). The field vectors are computed
once and stay fixed, so only the *query* side of the encoder is trained (an asymmetric dual encoder):
field vectors stay valid and no re-indexing is needed. The fine-tuned query encoder is saved inside the
retriever's directory. On CPU the flag raises: back-propagating through the encoder for every batch on
two cores would take hours.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from grasp_core.embed.encoder import Encoder
from grasp_core.embed.vector_index import NodeIndex
from grasp_core.errors import GraspError
from grasp_core.skb.format import SKB
from grasp_core.text.bm25 import tokenize
from grasp_core.text.config import MFARConfig
from grasp_core.text.fields import DOC
from grasp_core.text.mfar import QUERY_MAX_TOKENS, FieldIndex, FieldWeights, MFARRetriever, Pools, rankings_of


def _mrr(pools: Pools, scores: np.ndarray, answers: list[set[int]]) -> float:
    """MRR (percent) of the ranked pools; a query whose gold is not in its pool counts 0."""
    ranks = [r.rank_of(list(gold)) for r, gold in zip(rankings_of(pools, scores, None), answers)]
    return float(100.0 * sum(1.0 / r for r in ranks if r) / max(len(answers), 1))


def _hard_negatives(
    fields: FieldIndex, tokens: list[list[str]], answers: list[set[int]], n: int, batch: int = 256
) -> list[np.ndarray]:
    """Top-``n`` non-gold nodes of whole-document BM25 for each query."""
    out = []
    for start in range(0, len(tokens), batch):
        scores = fields.lexical[DOC].scores(tokens[start : start + batch])
        for row, gold in zip(scores, answers[start : start + batch]):
            k = min(n + len(gold), len(row))
            top = np.argpartition(-row, k - 1)[:k]
            top = top[np.argsort(-row[top], kind="stable")]
            out.append(np.array([i for i in top if i not in gold and row[i] > 0][:n], np.int64))
    return out


def train_mfar(
    skb: SKB,
    index: NodeIndex | None,
    encoder: Encoder,
    cfg: MFARConfig = MFARConfig(),
    progress: Callable[[dict], None] | None = None,
    work_dir: str | Path | None = None,
    fields: FieldIndex | None = None,
    exclude: Collection[int] = (),
) -> tuple[MFARRetriever, list[dict]]:
    """Build the field index (unless given), train the weights on ``train`` (less the qids in ``exclude``: a
    held-out fold, see :mod:`grasp_core.text.oof`), select on ``val``.

    Returns the retriever with the best validation MRR and the history: one dict per epoch with
    ``epoch`` (0 = before training), ``train_loss`` (None at epoch 0) and ``val_mrr`` (percent).
    ``progress`` is called with each history entry as soon as it exists.
    """
    if cfg.finetune_encoder and next(encoder.model.parameters()).dtype != torch.float32:
        raise GraspError(
            "MFARConfig.finetune_encoder trains the query encoder's weights, which needs them in float32; "
            "load the encoder with EncoderConfig.dtype='float32'"
        )
    if cfg.finetune_encoder and not torch.cuda.is_available():
        raise GraspError("MFARConfig.finetune_encoder needs a CUDA GPU (none is visible); set it to False on CPU")
    train, val = skb.split("train"), skb.split("val").head(cfg.max_val_queries)
    train = train[~train["qid"].astype(int).isin(set(exclude))].reset_index(drop=True)
    if len(train) == 0 or len(val) == 0:
        raise GraspError(f"mFAR training needs train and val queries; the SKB has {skb.split_counts()}")
    rng = np.random.default_rng(cfg.seed)
    torch.manual_seed(cfg.seed)
    fields = fields or FieldIndex.build(skb, index, encoder, cfg, work_dir)
    model = FieldWeights(encoder.dim, fields.num_scorers)
    retriever = MFARRetriever(fields, model, encoder, cfg)

    train_q = train["query"].tolist()
    train_gold = [set(map(int, a)) for a in train["answer_ids"]]
    train_tokens = tokenize(train_q, cfg.bm25)
    train_vecs = encoder.encode(train_q, QUERY_MAX_TOKENS)
    negatives = _hard_negatives(fields, train_tokens, train_gold, cfg.hard_negatives)

    sample = rng.permutation(len(train_q))[: cfg.norm_queries]
    norm_pools = retriever.pools_of([train_tokens[i] for i in sample], train_vecs[sample])
    pooled = norm_pools.raw[norm_pools.valid]
    model.mean.copy_(torch.from_numpy(pooled.mean(0)))
    model.std.copy_(torch.from_numpy(np.where(pooled.std(0) > 1e-6, pooled.std(0), 1.0)))

    val_gold = [set(map(int, a)) for a in val["answer_ids"]]
    val_vecs, val_pools = retriever.pools(val["query"].tolist())

    def evaluate() -> float:
        model.eval()
        return _mrr(val_pools, retriever.score_pools(val_vecs, val_pools), val_gold)

    best = evaluate()
    history: list[dict] = [{"epoch": 0, "train_loss": None, "val_mrr": best}]
    if progress:
        progress(history[-1])
    best_state, since_best = copy.deepcopy(model.state_dict()), 0
    params = [{"params": model.parameters(), "lr": cfg.lr, "weight_decay": cfg.weight_decay}]
    if cfg.finetune_encoder:
        encoder = _trainable_copy(encoder)
        retriever.encoder = encoder
        params.append({"params": encoder.model.parameters(), "lr": cfg.encoder_lr, "weight_decay": 0.0})
    best_encoder = copy.deepcopy(encoder.model.state_dict()) if cfg.finetune_encoder else None
    optimizer = torch.optim.AdamW(params)
    for epoch in tqdm(range(1, cfg.epochs + 1), desc="mFAR epochs", unit="epoch"):
        model.train()
        losses = []
        order = rng.permutation(len(train_q))
        for start in range(0, len(order), cfg.batch_size):
            idx = order[start : start + cfg.batch_size]
            positives = np.array([rng.choice(sorted(train_gold[i])) for i in idx], np.int64)
            docs = np.unique(np.concatenate([positives, *(negatives[i] for i in idx)]))
            if cfg.finetune_encoder:
                vecs = _trainable_query_vectors(encoder, [train_q[i] for i in idx])
            else:
                vecs = torch.from_numpy(train_vecs[idx])
            raw = fields.scores_at([train_tokens[i] for i in idx], vecs, docs)
            logits = model(vecs, raw)
            other_gold = torch.from_numpy(
                np.array([[d in train_gold[i] and d != p for d in docs] for i, p in zip(idx, positives)], dtype=bool)
            )
            logits = logits.masked_fill(other_gold, float("-inf"))
            loss = torch.nn.functional.cross_entropy(logits, torch.from_numpy(np.searchsorted(docs, positives)))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        if cfg.finetune_encoder:  # candidate pools depend on the query vectors
            val_vecs, val_pools = retriever.pools(val["query"].tolist())
        val_mrr = evaluate()
        history.append({"epoch": epoch, "train_loss": float(np.mean(losses)), "val_mrr": val_mrr})
        if progress:
            progress(history[-1])
        if val_mrr > best:
            best, best_state, since_best = val_mrr, copy.deepcopy(model.state_dict()), 0
            best_encoder = copy.deepcopy(encoder.model.state_dict()) if cfg.finetune_encoder else None
        else:
            since_best += 1
            if since_best >= cfg.patience:
                break
    model.load_state_dict(best_state)
    if best_encoder is not None:
        encoder.model.load_state_dict(best_encoder)
    return MFARRetriever(fields, model.eval(), encoder, cfg), history


def _trainable_copy(encoder: Encoder) -> Encoder:
    """``encoder`` with weights of its own, so load_encoder's cached instance stays untouched. (A deep copy of the
    Encoder itself fails: its tokenizer lock cannot be copied; the copy shares tokenizer and lock.)"""
    clone = copy.copy(encoder)
    clone.model = copy.deepcopy(encoder.model)
    return clone


def _trainable_query_vectors(encoder: Encoder, queries: list[str]) -> torch.Tensor:
    """Query vectors with gradients through the encoder (its device), returned on CPU."""
    encoder.model.train()
    return encoder.model(*encoder.tensors(queries, QUERY_MAX_TOKENS)).float().cpu()

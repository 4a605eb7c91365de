"""Listwise reranker training on hard negatives (paper §3.3 and Appendix B), one loop top to bottom.

Each step takes ``queries_per_batch`` (16) training queries; for each it samples one positive and
``group_size − 1`` (23) hard negatives (with replacement only when the query has fewer), builds their
candidate documents and minimizes the cross-entropy over the group's logits with the positive as the
label. AdamW (β = 0.9, 0.95, weight decay 0.1), lr 3e-5 with 5% linear warmup then cosine decay, gradient
clipping at 1.0, 3 epochs. The data order is a function of (seed, epoch) and the group sampling of
(seed, step), so a resumed run draws exactly what the uninterrupted run would have.

Checkpoints and selection. The base model is candidate 0 (validated before the first step, unless
``validate_base`` is off); every ``checkpoint_every_epochs`` (0.5) epochs and at the end the trainable
weights are validated by ``val_fn(scorer) -> float`` (the pipeline passes val Hit@1 of the reranked fused rankings, see
:class:`grasp_core.rerank.inference.RerankValidation`) and saved atomically under
``out_dir/checkpoints/step-NNNNNN/`` (``weights.safetensors``; the latest one also holds
``optimizer.pt`` — optimizer, scheduler and RNG states — for resuming; ``state.json`` the validation
history). Only the latest and the best checkpoint are kept on disk. At the end the best candidate (highest
validation score; ties: the earlier one) is loaded into ``scorer`` and copied to ``out_dir/best/``.

Resuming. Rerunning with the same ``out_dir`` continues after the latest complete checkpoint; one made
with a different configuration or different training data is refused, and a corrupt one raises
:class:`CorruptArtifactError` naming the file (delete that checkpoint directory to fall back to the one
before it, or ``out_dir`` to start over).
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tqdm.auto import tqdm
from transformers import get_cosine_schedule_with_warmup

from grasp_core.errors import CorruptArtifactError, GraspError
from grasp_core.io import atomic_dir, is_complete, read_json, write_json
from grasp_core.rerank.config import RerankerTrainConfig
from grasp_core.rerank.documents import CandidateDocumentBuilder
from grasp_core.rerank.scorers import Group
from grasp_core.rerank.weights import WEIGHTS, load_weights

OPTIMIZER, STATE = "optimizer.pt", "state.json"


class RerankerTrainResult(NamedTuple):
    best_dir: Path  # out_dir/best: weights.safetensors + selection.json
    best_step: int  # 0 = the base model
    best_val: float
    history: list[dict]  # [{"step", "val"}] for the base model and every checkpoint


def train_reranker(
    scorer,
    builder: CandidateDocumentBuilder,
    hard_negs: pd.DataFrame,
    queries: pd.DataFrame,
    val_fn: Callable[[object], float],
    cfg: RerankerTrainConfig,
    out_dir: str | Path,
    log_fn: Callable[[int, dict], None] | None = None,
) -> RerankerTrainResult:
    """Train ``scorer`` in place; ``hard_negs`` from :func:`mine_hard_negatives`, ``queries`` has qid and query."""
    log_fn = log_fn or (lambda step, metrics: None)
    out_dir = Path(out_dir)
    text_of = dict(zip(queries["qid"].astype(int), queries["query"].astype(str)))
    missing = sorted(set(hard_negs["qid"].astype(int)) - set(text_of))
    if missing:
        raise GraspError(f"hard negatives name {len(missing)} qids with no query text, e.g. {missing[:5]}")
    if len(hard_negs) == 0:
        raise GraspError("no training queries: no query has a gold answer in its fused top 100")
    qids = hard_negs["qid"].astype(int).tolist()
    positives, negatives = list(hard_negs["positives"]), list(hard_negs["negatives"])
    query_vecs = builder.embed_queries([text_of[q] for q in qids])

    # --- the schedule: steps, checkpoints, optimizer --------------------------------------------------
    n, per_batch = len(qids), cfg.queries_per_batch
    steps_per_epoch = math.ceil(n / per_batch)
    total_steps = max(1, math.ceil(cfg.epochs * steps_per_epoch))
    every = max(1, round(cfg.checkpoint_every_epochs * steps_per_epoch))
    checkpoint_steps = set(range(every, total_steps, every)) | {total_steps}
    params = scorer.trainable_parameters()
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay)
    scheduler = get_cosine_schedule_with_warmup(optimizer, math.ceil(cfg.warmup_ratio * total_steps), total_steps)
    plan = json.loads(json.dumps({"config": asdict(cfg), "total_steps": total_steps, "qids": qids}))  # as stored

    # --- resume from the latest checkpoint, or validate the base model as candidate 0 ------------------
    torch.manual_seed(cfg.seed)
    latest = _latest_checkpoint(out_dir)
    if latest is not None:
        state = _load_checkpoint(latest, scorer, optimizer, scheduler, plan)
        start, history = state["step"], state["history"]
    elif cfg.validate_base:
        start, history = 0, [{"step": 0, "val": float(val_fn(scorer))}]
        log_fn(0, {"val_score": history[0]["val"]})
        _save_checkpoint(out_dir, 0, scorer, optimizer, scheduler, plan, history)
    else:
        start, history = 0, []

    # --- the loop ---------------------------------------------------------------------------------
    for step in tqdm(range(start + 1, total_steps + 1), desc="reranker", initial=start, total=total_steps):
        epoch, slot = divmod(step - 1, steps_per_epoch)
        order = np.random.default_rng([cfg.seed, epoch]).permutation(n)
        batch = order[slot * per_batch : (slot + 1) * per_batch]
        rng = np.random.default_rng([cfg.seed, 1_000_003, step])
        optimizer.zero_grad(set_to_none=True)
        loss_sum = 0.0
        for lo in range(0, len(batch), cfg.micro_batch_queries):
            groups = []
            for i in batch[lo : lo + cfg.micro_batch_queries]:
                negs = negatives[i]
                ids = [rng.choice(positives[i])] + list(
                    rng.choice(negs, cfg.group_size - 1, replace=len(negs) < cfg.group_size - 1)
                )
                query = text_of[qids[i]]
                groups.append(
                    Group(query, builder.build(query_vecs[i], ids, scorer.tokenizer, scorer.prompt_tokens(query)))
                )
            logits = scorer.group_logits(groups)
            labels = torch.zeros(len(groups), dtype=torch.long, device=logits.device)  # the positive is first
            loss = F.cross_entropy(logits, labels, reduction="sum") / len(batch)
            loss.backward()
            loss_sum += loss.item()
        grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
        optimizer.step()
        scheduler.step()
        log_fn(
            step,
            {
                "loss": loss_sum,
                "grad_norm": float(grad_norm),
                "lr": scheduler.get_last_lr()[0],
                "epoch": step / steps_per_epoch,
            },
        )
        if step in checkpoint_steps:
            history.append({"step": step, "val": float(val_fn(scorer))})
            log_fn(step, {"val_score": history[-1]["val"]})
            _save_checkpoint(out_dir, step, scorer, optimizer, scheduler, plan, history)

    # --- select among {base model, checkpoints} by the validation score ---------------------------
    best = max(history, key=lambda h: (h["val"], -h["step"]))
    best_ckpt = _checkpoint_dir(out_dir, best["step"])
    scorer.load_trainable_state(load_weights(best_ckpt / WEIGHTS), str(best_ckpt / WEIGHTS))
    with atomic_dir(out_dir / "best") as tmp:
        shutil.copy2(best_ckpt / WEIGHTS, tmp / WEIGHTS)
        write_json(
            tmp / "selection.json",
            {"best_step": best["step"], "best_val": best["val"], "history": history, "total_steps": total_steps},
        )
    return RerankerTrainResult(out_dir / "best", best["step"], best["val"], history)


def _checkpoint_dir(out_dir: Path, step: int) -> Path:
    return out_dir / "checkpoints" / f"step-{step:06d}"


def _latest_checkpoint(out_dir: Path) -> Path | None:
    done = sorted(p for p in (out_dir / "checkpoints").glob("step-*") if is_complete(p))
    return done[-1] if done else None


def _save_checkpoint(out_dir, step, scorer, optimizer, scheduler, plan, history) -> None:
    """Write checkpoint ``step`` atomically, then drop every checkpoint that is neither it nor the best."""
    rng: dict[str, object] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    with atomic_dir(_checkpoint_dir(out_dir, step)) as tmp:
        save_file({k: v.contiguous() for k, v in scorer.trainable_state().items()}, str(tmp / WEIGHTS))
        torch.save(
            {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": rng}, tmp / OPTIMIZER
        )
        write_json(tmp / STATE, {"step": step, "history": history, "plan": plan})
    best_step = max(history, key=lambda h: (h["val"], -h["step"]))["step"]
    keep = {_checkpoint_dir(out_dir, step), _checkpoint_dir(out_dir, best_step)}
    for old in (out_dir / "checkpoints").glob("step-*"):
        if old not in keep:
            shutil.rmtree(old, ignore_errors=True)
        elif old != _checkpoint_dir(out_dir, step):
            (old / OPTIMIZER).unlink(missing_ok=True)


def _load_checkpoint(ckpt: Path, scorer, optimizer, scheduler, plan: dict) -> dict:
    """Restore weights, optimizer, scheduler and RNG states from ``ckpt``; returns its state.json."""
    try:
        state = read_json(ckpt / STATE)
        extra = torch.load(ckpt / OPTIMIZER, weights_only=True)
    except Exception as exc:
        raise CorruptArtifactError(
            f"{ckpt}: corrupt reranker checkpoint ({exc}); delete it to resume from the checkpoint before it"
        ) from exc
    if state.get("plan") != plan:
        raise GraspError(
            f"{ckpt} was written by a run with another configuration or other training queries; "
            f"use a fresh out_dir (or delete {ckpt.parent.parent}) to start over"
        )
    scorer.load_trainable_state(load_weights(ckpt / WEIGHTS), str(ckpt / WEIGHTS))
    try:
        optimizer.load_state_dict(extra["optimizer"])
        scheduler.load_state_dict(extra["scheduler"])
    except (KeyError, ValueError) as exc:
        raise CorruptArtifactError(f"{ckpt / OPTIMIZER}: optimizer state does not fit this model ({exc})") from exc
    torch.set_rng_state(extra["rng"]["torch"])
    if "cuda" in extra["rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(extra["rng"]["cuda"])
    return state

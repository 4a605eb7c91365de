"""Training the plan-selection policy as the paper trains its planner: SFT, then RL rounds (sample → RFT → GRPO).

TRL's trainers generate token sequences; this policy scores a finite candidate set, so its training is a few
lines of torch instead (the objectives are the paper's):

- **SFT**: cross-entropy on the teacher's choice for every training query with a teacher plan, mixed
  (``PolicyTrainingConfig.soft_weight``) with a listwise soft target ``softmax(reward / soft_temperature)`` over the
  candidates the teacher executed (plus abstain, reward 0). The rewards are fused-hit gains (the prior reward
  table): training data only, never inference data.
- **Sampling**: ``samples_per_query`` candidates per training query at temperature ``T`` from π, scored with the
  fused-gain reward table; plans the teacher already executed are not run again (:class:`Outcomes`).
- **RFT**: the SFT targets plus each query's best positive-reward sample (one-hot), from the round's start.
- **GRPO**: group-relative advantages ``r − mean(r)`` (no std scaling) over each query's sampled group, plus
  ``beta · KL(π ‖ π_start)`` (exact: the candidate set is finite); the validation fused Hit@1 picks the step.

Checkpoints (SFT epochs, GRPO steps) are chosen on validation fused Hit@1. Both fits run on one torch thread:
on two, the head's gradients summed in another order from run to run, so identical inputs gave different
policies; on one, a rerun gives the same bytes, and the head is small enough that it costs nothing.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from grasp_core.plan.model import ABSTAIN
from grasp_core.planner.config import GRPOTrainingConfig, PolicyTrainingConfig
from grasp_core.planner.policy.model import Featurized, PlanPolicy
from grasp_core.planner.reward import RewardTable, plan_reward
from grasp_core.planner.scoring import PlannerEnv
from grasp_core.ranking import Ranking, fusion

LogFn = Callable[[int, dict], None]


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run the block on one intra-op thread (bit-reproducible training), then restore the caller's count."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class Outcomes:
    """Executed plans per query — (graph ranking, candidate count) — running each (query, plan) at most once."""

    CHUNK = 1024  # plans executed per batch (a progress bar counts them)

    def __init__(self, env: PlannerEnv, known: dict[tuple[int, str], tuple[Ranking, int]] | None = None):
        self.env, self.known = env, dict(known or {})

    def get(self, pairs: Sequence[tuple[int, str]]) -> list[tuple[Ranking, int]]:
        todo = list(dict.fromkeys(p for p in pairs if p[1] != ABSTAIN and p not in self.known))
        chunks = range(0, len(todo), self.CHUNK)
        for start in tqdm(chunks, desc="execute plans", unit="chunk", disable=None if len(chunks) > 1 else True):
            part = todo[start : start + self.CHUNK]
            results = self.env.executor.execute_batch(
                [p for _, p in part], [self.env.queries[q] for q, _ in part], [self.env.tables[q] for q, _ in part]
            )
            self.known.update((key, (r, t.candidates)) for key, (r, t) in zip(part, results))
        return [(Ranking.empty(), 0) if p == ABSTAIN else self.known[(q, p)] for q, p in pairs]

    def rewards(self, pairs: Sequence[tuple[int, str]], table: RewardTable) -> np.ndarray:
        env = self.env
        return np.array(
            [
                0.0 if p == ABSTAIN else plan_reward(env.text[q], g, n, env.gold[q], table, env.reward_cfg)
                for (q, p), (g, n) in zip(pairs, self.get(pairs))
            ]
        )

    def fused(self, pairs: Sequence[tuple[int, str]]) -> list[Ranking]:
        graph = [g for g, _ in self.get(pairs)]
        return fusion([self.env.text[q] for q, _ in pairs], graph, self.env.reward_cfg)

    def fused_hit1(self, pairs: Sequence[tuple[int, str]]) -> float:
        """Fused Hit@1 (%) of the given (query, plan) pairs."""
        fused = self.fused(pairs)
        return 100.0 * float(np.mean([f.rank_of(self.env.gold[q]) == 1 for (q, _), f in zip(pairs, fused)]))


def greedy(policy: PlanPolicy, x: Featurized) -> list[str]:
    with torch.no_grad():
        best = policy.head(x).argmax(-1).tolist()
    return [p[j] for p, j in zip(x.plans, best)]


def validation_hit1(policy: PlanPolicy, x: Featurized, qids: Sequence[int], outcomes: Outcomes) -> float:
    return outcomes.fused_hit1(list(zip(qids, greedy(policy, x))))


def sft_targets(
    x: Featurized,
    qids: Sequence[int],
    teacher: dict[int, str],
    outcomes: Outcomes,
    cfg: PolicyTrainingConfig,
) -> tuple[torch.Tensor, list[int]]:
    """[B, C] target distributions and the rows that have one (a teacher plan or executed candidates)."""
    targets = torch.zeros(x.mask.shape)
    keep = []
    prior = RewardTable.prior()
    for i, (q, plans) in enumerate(zip(qids, x.plans)):
        hard = torch.zeros(x.mask.shape[1])
        if teacher.get(q) in plans:
            hard[plans.index(teacher[q])] = 1.0
        known = [j for j, p in enumerate(plans) if p == ABSTAIN or (q, p) in outcomes.known]
        soft = torch.zeros_like(hard)
        if cfg.soft_weight > 0 and any(plans[j] != ABSTAIN for j in known):
            r = torch.tensor(outcomes.rewards([(q, plans[j]) for j in known], prior), dtype=torch.float32)
            soft[known] = torch.softmax(r / cfg.soft_temperature, 0)
        if hard.sum() == 0 and soft.sum() == 0:
            continue
        w = cfg.soft_weight if hard.sum() > 0 and soft.sum() > 0 else (0.0 if soft.sum() == 0 else 1.0)
        targets[i] = (1 - w) * hard + w * soft
        keep.append(i)
    return targets, keep


def _log_probs(policy: PlanPolicy, x: Featurized, temperature: float = 1.0) -> torch.Tensor:
    return torch.log_softmax(policy.head(x) / temperature, -1)


@one_torch_thread()
def fit(
    policy: PlanPolicy,
    x: Featurized,
    targets: torch.Tensor,
    cfg: PolicyTrainingConfig,
    epochs: int,
    learning_rate: float,
    validate: Callable[[], float] | None = None,
    log_fn: LogFn | None = None,
) -> dict:
    """Cross-entropy to ``targets``; with ``validate``, the best validated epoch (0 = the start) is kept."""
    head = policy.head.train()
    opt = torch.optim.Adam(head.parameters(), lr=learning_rate, weight_decay=cfg.weight_decay)
    gen = torch.Generator().manual_seed(cfg.seed)
    n, history, selection = len(targets), [], []
    best = (validate(), 0, copy.deepcopy(head.state_dict())) if validate else None
    if best:
        selection.append({"epoch": 0, "val_fused_hit1": best[0]})
    step = 0
    for epoch in range(1, epochs + 1):
        total = 0.0
        for rows in torch.randperm(n, generator=gen).split(cfg.batch_size):
            logp = _log_probs(policy, x.select(rows)).masked_fill(~x.mask[rows], 0.0)
            loss = -(targets[rows] * logp).sum(-1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(rows)
            step += 1
        history.append({"epoch": epoch, "loss": total / n})
        if log_fn:
            log_fn(epoch, {"loss": total / n})
        if validate and (epoch % cfg.validate_every == 0 or epoch == epochs):
            head.eval()
            hit1 = validate()
            head.train()
            selection.append({"epoch": epoch, "val_fused_hit1": hit1})
            if log_fn:
                log_fn(epoch, {"val_fused_hit1": hit1})
            if best is not None and hit1 > best[0]:
                best = (hit1, epoch, copy.deepcopy(head.state_dict()))
    if best:
        head.load_state_dict(best[2])
    head.eval()
    return {
        "history": history,
        "selection": selection,
        "best_epoch": best[1] if best else epochs,
        "best_val_fused_hit1": best[0] if best else None,
        "steps": step,
    }


def sample_candidates(
    policy: PlanPolicy, x: Featurized, n: int, temperature: float, generator: torch.Generator
) -> torch.Tensor:
    """[B, n] candidate indices drawn from π at ``temperature``."""
    with torch.no_grad():
        probs = torch.softmax(policy.head(x) / temperature, -1)
    return torch.multinomial(probs, n, replacement=True, generator=generator)


def sample_and_score(
    policy: PlanPolicy,
    x: Featurized,
    qids: Sequence[int],
    outcomes: Outcomes,
    table: RewardTable,
    n: int,
    temperature: float,
    seed: int,
) -> pd.DataFrame:
    """One row per sampled plan (the LM planner's ``rft_samples`` columns): qid, sample, plan, reward, …"""
    idx = sample_candidates(policy, x, n, temperature, torch.Generator().manual_seed(seed))
    pairs = [(q, x.plans[i][j]) for i, q in enumerate(qids) for j in idx[i].tolist()]
    rewards = outcomes.rewards(pairs, table)
    executed = outcomes.get(pairs)
    fused = outcomes.fused(pairs)
    return pd.DataFrame(
        {
            "qid": [q for q, _ in pairs],
            "sample": [s for _ in qids for s in range(n)],
            "plan": [p for _, p in pairs],
            "reward": rewards,
            "valid": True,
            "n_anchors": [0 if p == ABSTAIN else p.count('"var":"a') for _, p in pairs],
            "n_candidates": [c for _, c in executed],
            "fused_gold_rank": [f.rank_of(outcomes.env.gold[q]) for (q, _), f in zip(pairs, fused)],
        }
    )


@one_torch_thread()
def train_grpo(
    policy: PlanPolicy,
    x: Featurized,
    qids: Sequence[int],
    outcomes: Outcomes,
    table: RewardTable,
    cfg: GRPOTrainingConfig,
    validate: Callable[[], float],
    log_fn: LogFn | None = None,
) -> dict:
    """GRPO on the policy in place (KL to its state at the start); the best validated step is kept."""
    head = policy.head
    if not len(qids):
        return {"history": [], "selection": [], "best_step": 0, "best_val_fused_hit1": validate()}
    ref = copy.deepcopy(head).eval()
    opt = torch.optim.Adam(head.parameters(), lr=cfg.learning_rate)
    gen = torch.Generator().manual_seed(cfg.seed)
    g = cfg.num_generations
    best = (validate(), 0, copy.deepcopy(head.state_dict()))
    selection, history = [{"step": 0, "val_fused_hit1": best[0]}], []
    order = torch.randperm(len(qids), generator=gen)
    pos = 0
    for step in range(1, cfg.max_steps + 1):
        if pos + cfg.prompts_per_step > len(order):
            order, pos = torch.randperm(len(qids), generator=gen), 0
        rows = order[pos : pos + cfg.prompts_per_step]
        pos += cfg.prompts_per_step
        xb = x.select(rows)
        head.train()
        for _ in range(cfg.resample_flat + 1):  # a batch whose groups are all flat carries no signal: resample
            idx = sample_candidates(policy, xb, g, cfg.temperature, gen)
            pairs = [(qids[int(r)], xb.plans[i][j]) for i, r in enumerate(rows) for j in idx[i].tolist()]
            rewards = torch.tensor(outcomes.rewards(pairs, table), dtype=torch.float32).view(len(rows), g)
            if (rewards.max(1).values > rewards.min(1).values).any():
                break
        advantages = rewards - rewards.mean(1, keepdim=True)
        logp = _log_probs(policy, xb, cfg.temperature)
        with torch.no_grad():
            ref_logp = torch.log_softmax(ref(xb) / cfg.temperature, -1)
        pg = -(advantages * logp.gather(1, idx)).mean()
        diff = (logp - ref_logp).masked_fill(~xb.mask, 0.0)  # padding is -inf in both
        kl = (logp.exp() * diff).sum(-1).mean()
        loss = pg + cfg.beta * kl
        opt.zero_grad()
        loss.backward()
        opt.step()
        metrics = {"loss": loss.item(), "kl": kl.item(), "reward": float(rewards.mean())}
        history.append({"step": step, **metrics})
        if log_fn:
            log_fn(step, metrics)
        if step % cfg.save_every == 0 or step == cfg.max_steps:
            head.eval()
            hit1 = validate()
            selection.append({"step": step, "val_fused_hit1": hit1})
            if log_fn:
                log_fn(step, {"val_fused_hit1": hit1})
            if hit1 > best[0]:
                best = (hit1, step, copy.deepcopy(head.state_dict()))
    head.load_state_dict(best[2])
    head.eval()
    return {"history": history, "selection": selection, "best_step": best[1], "best_val_fused_hit1": best[0]}

"""Pipeline steps of the plan-selection policy (the ``cpu`` planner): SFT and the RL rounds' sampling and training.

The assets keep their meaning: ``sft_adapter`` holds the SFT policy, ``rft_samples[round]`` the sampled plans
with their rewards, ``planner[round]`` the RFT + GRPO policy with its validation gate. The teacher's executed
candidates (``teacher_plans/executed.parquet``) seed :class:`Outcomes`, so sampling re-executes only plans the
teacher never ran; the listwise SFT targets read them on training queries only.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from grasp_core.components import Components
from grasp_core.embed.encoder import Encoder
from grasp_core.errors import GraspError
from grasp_core.io import atomic_dir, read_json, write_json
from grasp_core.pipeline.asked_type import ASKED_MAX_TOKENS, fit_asked_type_model
from grasp_core.pipeline.planner_inputs import VAL_FILE, load_reward_table, load_teacher_plans, planner_env, round_start
from grasp_core.pipeline.plots import line_plot
from grasp_core.pipeline.rft_samples import write_rft_samples
from grasp_core.planner.policy.chooser import Executed, PlanChooser, Shortlist, shortlists
from grasp_core.planner.policy.chooser_train import choose_k, fit_chooser, fused_hit1_labels, hit1, picks
from grasp_core.planner.policy.model import PlanPolicy, load_policy, new_policy, path_keys
from grasp_core.planner.policy.train import (
    Outcomes,
    fit,
    sample_and_score,
    sft_targets,
    train_grpo,
    validation_hit1,
)
from grasp_core.planner.rounds import Gate
from grasp_core.planner.samples import best_positive_samples, informative_queries, rl_queries
from grasp_core.ranking import Ranking
from grasp_core.rerank.asked_type import AskedType

ROUND_EXECUTED = "executed.parquet"  # in a round's checkpoint: the plans it and the rounds before it executed


class PolicyData:
    """Training and validation queries of a dataset, featurized for one policy, with their executed plans."""

    def __init__(self, components: Components, policy: PlanPolicy | None = None, start: Path | None = None):
        self.components, self.env = components, planner_env(components)
        teacher = load_teacher_plans(components)
        train = set(components.split("train")["qid"].astype(int))
        taught = teacher[teacher["qid"].isin(train)]
        self.teacher = {int(q): p for q, p in zip(taught["qid"], taught["plan"]) if p}
        self.train_qids = [int(q) for q in taught["qid"]]
        val = components.split("val")["qid"].astype(int).head(components.profile.grpo.val_queries).tolist()
        # every other validation query selects (checkpoints, the chooser's k); the rest only checks the gate
        self.val_qids, self.heldout_qids = val[0::2], val[1::2]
        self.teacher_executed = read_executed(components)
        self.outcomes = Outcomes(self.env, {**self.teacher_executed, **read_round_executed(start)})
        self.policy = policy or self._new_policy()
        self.x_train = self._featurize(self.train_qids)
        self.x_val = self._featurize(self.val_qids)

    def _new_policy(self) -> PlanPolicy:
        components, env = self.components, self.env
        torch.manual_seed(components.profile.policy_train.seed)
        probe = new_policy(
            components.skb.schema, components.encoder, components.profile.teacher, [], components.profile.policy
        )
        keys = {
            k
            for q in self.train_qids
            for c in probe.featurizer.candidates(env.queries[q], env.tables[q])
            if c is not None
            for k in path_keys(c)
        }
        return new_policy(
            components.skb.schema,
            components.encoder,
            components.profile.teacher,
            sorted(keys),
            components.profile.policy,
        )

    def _featurize(self, qids: list[int]):
        env = self.env
        return self.policy.featurizer([env.queries[q] for q in qids], [env.tables[q] for q in qids])

    def validate(self) -> float:
        """Greedy fused Hit@1 on the selecting validation queries (checkpoint selection)."""
        return validation_hit1(self.policy, self.x_val, self.val_qids, self.outcomes)

    def heldout(self) -> float:
        """Greedy fused Hit@1 on the held-out validation queries (the gate's second reading)."""
        return validation_hit1(self.policy, self._featurize(self.heldout_qids), self.heldout_qids, self.outcomes)

    def shortlists(
        self, qids: list[int], asked: AskedType, k: int, graph_weights: tuple[float, ...] | None = None
    ) -> tuple[list[Shortlist], list[np.ndarray]]:
        """The policy's shortlists of ``qids`` executed (each plan once, :class:`Outcomes`) and their labels, each
        candidate offered at ``graph_weights`` (default: the profile's ``chooser.graph_weights``)."""
        env, weights = self.env, self.components.profile.reward
        x = self._featurize(qids)
        texts = [env.queries[q] for q in qids]
        with torch.no_grad():
            logits = self.policy.head(x).numpy()
        probs = asked.proba(np.asarray(self.components.encoder.encode(texts, ASKED_MAX_TOKENS)), texts)

        def run(pairs):
            return [Executed(r, n) for r, n in self.outcomes.get([(qids[i], p) for i, p in pairs])]

        graph_weights = graph_weights or self.components.profile.chooser.graph_weights
        lists = shortlists(logits, x, probs, [env.text[q] for q in qids], run, k, weights, graph_weights)
        labels = [fused_hit1_labels(s, env.gold[q]) for q, s in zip(qids, lists)]
        return lists, labels

    def sft_targets(self) -> tuple[torch.Tensor, list[int]]:
        """The imitation targets and the rows that have one, among the first ``policy_train.sft_queries`` taught
        queries (the SFT order; None: all)."""
        cfg = self.components.profile.policy_train
        targets, keep = sft_targets(self.x_train, self.train_qids, self.teacher, self.outcomes, cfg)
        return targets, keep if cfg.sft_queries is None else [i for i in keep if i < cfg.sft_queries]

    def rows(self, qids) -> list[int]:
        pos = {q: i for i, q in enumerate(self.train_qids)}
        return [pos[q] for q in qids if q in pos]


def read_executed(components: Components) -> dict[tuple[int, str], tuple[Ranking, int]]:
    """The teacher's executed candidates: (qid, plan text) -> (graph ranking, candidate count)."""
    return _executed(components.art.require("teacher_plans") / "executed.parquet")


def read_round_executed(start: Path | None) -> dict[tuple[int, str], tuple[Ranking, int]]:
    """The plans the rounds up to the checkpoint ``start`` executed beyond the teacher's (``ROUND_EXECUTED``; none
    for the SFT planner): a round re-executes only what no earlier step of the build ran."""
    return _executed(start / ROUND_EXECUTED) if start is not None else {}


def _executed(path: Path) -> dict[tuple[int, str], tuple[Ranking, int]]:
    """The executed plans a parquet file holds ({} when there is none)."""
    if not path.exists():
        return {}
    df = pd.read_parquet(path)
    return {
        (int(q), p): (Ranking(np.asarray(i, np.int64), np.asarray(s, np.float32)), int(n))
        for q, p, i, s, n in zip(df["qid"], df["plan"], df["node_ids"], df["scores"], df["n_candidates"])
    }


def executed_frame(qids, taught) -> pd.DataFrame:
    return _frame((q, e.plan, e.ranking, e.n_candidates) for q, t in zip(qids, taught) for e in t.executed)


def _frame(rows) -> pd.DataFrame:
    return pd.DataFrame(
        [(q, p, r.node_ids.tolist(), r.scores.tolist(), n) for q, p, r, n in rows],
        columns=["qid", "plan", "node_ids", "scores", "n_candidates"],
    )


def _save(
    policy: PlanPolicy, components: Components, path, val_hit1: float, heldout: float, extra: dict | None = None
) -> None:
    with atomic_dir(path) as tmp:
        policy.save(tmp, components.profile.teacher, extra)
        write_json(tmp / VAL_FILE, {"val_fused_hit1": val_hit1, "heldout_fused_hit1": heldout})


def train_chooser(data: PolicyData) -> tuple[PlanChooser, dict]:
    """The plan chooser of ``data.policy``: fit on every training query's executed shortlist, ``k`` chosen on the
    selecting validation queries, read on the held-out ones."""
    components, cfg = data.components, data.components.profile.chooser
    t0 = time.perf_counter()
    with Encoder.remembering():
        asked, asked_metrics = fit_asked_type_model(components)
        kmax = max(cfg.shortlist)
        train_q = [int(q) for q in components.split("train")["qid"] if data.env.gold.get(int(q))]
        lists, labels = data.shortlists(train_q, asked, kmax)
        booster = fit_chooser(lists, labels, cfg)
        val_lists, val_labels = data.shortlists(data.val_qids, asked, kmax)
        k, by_k = choose_k(booster, val_lists, val_labels, cfg.shortlist)
        held_lists, held_labels = data.shortlists(data.heldout_qids, asked, kmax)
    heldout = hit1(held_lists, held_labels, picks(booster, held_lists, k))
    oracle = 100.0 * float(np.mean([lab.max(initial=0) > 0 for lab in val_labels]))
    return PlanChooser(booster, k, cfg.graph_weights, asked, ASKED_MAX_TOKENS), {
        "chooser_k": k,
        "chooser_graph_weights": list(cfg.graph_weights),
        "chooser_val_by_k": {str(key): round(v, 2) for key, v in by_k.items()},
        "chooser_val_fused_hit1": by_k[k],
        "chooser_heldout_fused_hit1": heldout,
        "chooser_val_oracle": round(oracle, 2),
        "chooser_train_queries": len(train_q),
        "chooser_train_positive_share": round(float(np.mean([lab.max(initial=0) for lab in labels])), 4),
        "chooser_seconds": round(time.perf_counter() - t0, 1),
        **asked_metrics,
    }


def out_of_fold_planners(
    components: Components, policy: PlanPolicy, checkpoint: Path, qids: list[int], folds: int
) -> list[tuple[list[int], PlanPolicy]]:
    """``qids`` (training questions) in ``folds`` folds (every ``folds``-th question), each with the served
    ``policy`` whose chooser is refit, as :func:`train_chooser` fits it, on the other folds' training questions
    only: its picks for the fold are as good as its picks for a question it never saw (the in-sample chooser's are
    better, and a reranker trained on them learns to trust the graph list more than it should)."""
    chooser = policy.chooser
    if chooser is None or chooser.asked is None:
        raise GraspError("out-of-fold planners need a plan chooser with its asked-type model (the RL rounds train one)")
    data = PolicyData(components, policy, checkpoint)
    train = [int(q) for q in components.split("train")["qid"] if data.env.gold.get(int(q))]
    lists, labels = data.shortlists(train, chooser.asked, max(components.profile.chooser.shortlist))
    fold_of = {q: i % folds for i, q in enumerate(qids)}
    out = []
    for f in range(folds):
        rest = [i for i, q in enumerate(train) if fold_of.get(q) != f]
        booster = fit_chooser([lists[i] for i in rest], [labels[i] for i in rest], components.profile.chooser)
        planner = PlanPolicy(policy.head, policy.featurizer, dataclasses.replace(chooser, booster=booster))
        out.append(([q for q in qids if fold_of[q] == f], planner))
    return out


class PolicyKind:
    """The ``policy`` planner kind (the ``cpu`` planner): a plan-selection policy over candidate plans."""

    learns_from_executed = True  # every taught training query, and all of the teacher's executed candidates

    def load(self, components: Components, checkpoint: Path) -> PlanPolicy:
        return load_policy(checkpoint, components.skb.schema, components.encoder)

    def build_base(self, components: Components) -> dict:
        """The policy's base is the frozen offline encoder: the artifact records which one."""
        with atomic_dir(components.art.path("planner_base")) as tmp:
            write_json(tmp / "base.json", {"kind": "policy", "encoder": components.encoder.identity})
        return {"kind": "policy", "encoder": components.encoder.identity}

    def sft(self, components: Components, log_fn=None) -> dict:
        t0 = time.perf_counter()
        data = PolicyData(components)
        targets, keep = data.sft_targets()
        if not keep:
            raise GraspError("no training query has a teacher plan or an executed candidate; check teacher_plans")
        cfg = components.profile.policy_train
        x = data.x_train.select(keep)
        result = fit(data.policy, x, targets[keep], cfg, cfg.epochs, cfg.learning_rate, data.validate, log_fn)
        heldout = data.heldout()
        _save(
            data.policy,
            components,
            components.art.path("sft_adapter"),
            result["best_val_fused_hit1"],
            heldout,
            {"stage": "sft"},
        )
        losses = result["history"]
        sel = result["selection"]
        return {
            "examples": len(keep),
            "candidates_per_query": round(float(x.mask.sum(1).float().mean()), 1),
            "head": components.profile.policy.head,
            "best_epoch": result["best_epoch"],
            "final_loss": losses[-1]["loss"],
            "val_fused_hit1": result["best_val_fused_hit1"],
            "heldout_fused_hit1": heldout,
            "val_queries": len(data.val_qids),
            "heldout_queries": len(data.heldout_qids),
            "seconds": round(time.perf_counter() - t0, 1),
            "loss_curve_png": line_plot(
                {"train loss": ([h["epoch"] for h in losses], [h["loss"] for h in losses])},
                "policy SFT",
                "epoch",
                "loss",
            ),
            "val_curve_png": line_plot(
                {"val fused Hit@1": ([s["epoch"] for s in sel], [s["val_fused_hit1"] for s in sel])},
                "policy SFT",
                "epoch",
                "Hit@1 (%)",
            ),
            "path": str(components.art.path("sft_adapter")),
        }

    def samples(self, components: Components, round_key: str) -> dict:
        start = round_start(components, round_key)
        t0 = time.perf_counter()
        data = PolicyData(components, self.load(components, start), start)
        qids = [q for q in rl_queries(components.split("train"), components.profile.rl) if q in set(data.train_qids)]
        rl = components.profile.rl
        samples = sample_and_score(
            data.policy,
            data.x_train.select(data.rows(qids)),
            qids,
            data.outcomes,
            load_reward_table(components),
            rl.samples_per_query,
            rl.temperature,
            rl.seed + int(round_key),
        )
        summary = write_rft_samples(components, round_key, samples, start)
        return {
            **summary,
            "abstain_share": round(float((samples["n_candidates"] == 0).mean()), 4),
            "executed_plans": len(data.outcomes.known),
            "seconds": round(time.perf_counter() - t0, 1),
        }

    def round(self, components: Components, round_key: str, log_fn=None) -> dict:
        """RFT (SFT targets + each query's best positive sample) from the round's start, then GRPO, then the plan
        chooser trained on the fused reward of every training query's executed shortlist (exhaustive execution: at
        this size every shortlisted plan runs; GRPO samples); gated on the selecting and held-out validation."""
        start = round_start(components, round_key)
        start_val = read_json(start / VAL_FILE)
        previous, previous_heldout = start_val["val_fused_hit1"], start_val.get("heldout_fused_hit1")
        samples = pd.read_parquet(components.art.require("rft_samples", round_key) / "samples.parquet")
        data = PolicyData(components, self.load(components, start), start)
        cfg, rl = components.profile.policy_train, components.profile.rl
        t0 = time.perf_counter()
        targets, keep = data.sft_targets()
        best = best_positive_samples(samples)
        best_rows, best_targets = [], []
        for r in best.itertuples():
            row = next(iter(data.rows([int(r.qid)])), None)
            if row is not None and r.plan in data.x_train.plans[row]:
                one_hot = torch.zeros(targets.shape[1])
                one_hot[data.x_train.plans[row].index(r.plan)] = 1.0
                best_rows.append(row)
                best_targets.append(one_hot)
        rows = keep + best_rows
        rft_targets = torch.cat([targets[keep], torch.stack(best_targets)]) if best_targets else targets[keep]
        rft_log = (lambda s, m: log_fn(s, {f"rft/{k}": v for k, v in m.items()})) if log_fn else None
        epochs = int(rl.rft_epochs or cfg.epochs)
        rft = fit(
            data.policy,
            data.x_train.select(rows),
            rft_targets,
            cfg,
            epochs,
            rl.rft_learning_rate or cfg.learning_rate,
            data.validate,
            rft_log,
        )
        rft_seconds = time.perf_counter() - t0

        t1 = time.perf_counter()
        grpo_q = informative_queries(samples) or rl_queries(components.split("train"), rl)
        grpo_rows = data.rows(grpo_q)
        grpo_log = (lambda s, m: log_fn(s, {f"grpo/{k}": v for k, v in m.items()})) if log_fn else None
        grpo = train_grpo(
            data.policy,
            data.x_train.select(grpo_rows),
            [data.train_qids[i] for i in grpo_rows],
            data.outcomes,
            load_reward_table(components),
            components.profile.grpo,
            data.validate,
            grpo_log,
        )
        grpo_seconds = time.perf_counter() - t1
        chooser_info: dict
        val, chooser_info = grpo["best_val_fused_hit1"], {}
        if components.profile.chooser.enabled:
            data.policy.chooser, chooser_info = train_chooser(data)
            val, heldout = chooser_info["chooser_val_fused_hit1"], chooser_info["chooser_heldout_fused_hit1"]
        else:
            data.policy.chooser = None
            heldout = data.heldout()
        gate = Gate(val, previous, heldout, previous_heldout)
        with atomic_dir(components.art.path("planner", round_key)) as tmp:
            data.policy.save(tmp, components.profile.teacher, {"stage": f"round {round_key}"})
            write_json(tmp / VAL_FILE, {"val_fused_hit1": val, "heldout_fused_hit1": heldout})
            gate.write(tmp)
            new = (
                (q, p, g, n) for (q, p), (g, n) in data.outcomes.known.items() if (q, p) not in data.teacher_executed
            )
            _frame(new).to_parquet(tmp / ROUND_EXECUTED)
        hist, sel = grpo["history"], grpo["selection"]
        return {
            "round": round_key,
            "rft_examples": len(rows),
            "rft_positive_samples": len(best_rows),
            "rft_val_fused_hit1": rft["best_val_fused_hit1"],
            "grpo_queries": len(grpo_rows),
            "best_step": grpo["best_step"],
            "grpo_val_fused_hit1": grpo["best_val_fused_hit1"],
            "val_fused_hit1": val,
            "previous_val_fused_hit1": previous,
            "heldout_fused_hit1": heldout,
            "previous_heldout_fused_hit1": previous_heldout,
            **chooser_info,
            "rft_seconds": round(rft_seconds, 1),
            "grpo_seconds": round(grpo_seconds, 1),
            "reward_png": line_plot(
                {"mean sampled reward": ([h["step"] for h in hist], [h["reward"] for h in hist])},
                f"GRPO round {round_key}",
                "step",
                "reward",
            ),
            "selection_png": line_plot(
                {"val fused Hit@1": ([s["step"] for s in sel], [s["val_fused_hit1"] for s in sel])},
                f"GRPO round {round_key}",
                "step",
                "Hit@1 (%)",
            ),
            "path": str(components.art.path("planner", round_key)),
        }

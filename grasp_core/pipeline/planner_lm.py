"""The ``lm`` planner kind's training steps (the paper's): a base model, SFT on teacher plans, RL rounds of sampled
plans, RFT and GRPO (TRL). The ``planner`` artifacts hold LM checkpoints (:mod:`grasp_core.planner.lm.checkpoint`)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path

import pandas as pd

from grasp_core import manifest
from grasp_core.components import Components
from grasp_core.errors import GraspError
from grasp_core.io import atomic_dir, write_json
from grasp_core.llm.chat import render_prompt
from grasp_core.pipeline.planner_inputs import (
    VAL_FILE,
    evaluate_planner,
    load_reward_table,
    load_teacher_plans,
    planner_env,
    previous_val_hit1,
    round_start,
    val_qids,
)
from grasp_core.pipeline.plots import line_plot
from grasp_core.pipeline.rft_samples import write_rft_samples
from grasp_core.planner.interface import LMPlanner
from grasp_core.planner.lm.base import base_model_path, build_planner_base
from grasp_core.planner.lm.prompt import build_planner_messages, canonical_plan_json
from grasp_core.planner.lm.rl import rft_examples, sample_and_score, train_grpo
from grasp_core.planner.lm.sft import select_sft_examples, train_sft
from grasp_core.planner.rounds import Gate
from grasp_core.planner.samples import best_positive_samples, informative_queries, rl_queries


def prompt_builder(components: Components, tokenizer):
    """qid -> the rendered planner prompt (system prompt with the schema, entity table, query)."""
    env_q = dict(zip(components.skb.queries["qid"].astype(int), components.skb.queries["query"]))
    tables = components.entity_tables
    compact = components.profile.inference.compact_prompt
    enable_thinking = components.profile.planner_model.enable_thinking

    def prompt_of(qid: int) -> str:
        messages = build_planner_messages(components.skb.schema, tables[qid], env_q[qid], compact)
        return render_prompt(tokenizer, messages, enable_thinking)

    return prompt_of


def tokenizer_examples(components: Components, limit: int = 3000) -> tuple[list[str], list[str]]:
    """(prompts, plans) of training queries with a teacher plan, for the offline planner's tokenizer: no
    validation or test query text reaches a trained artifact."""
    teacher = load_teacher_plans(components)
    tables = components.entity_tables
    train = components.split("train")
    queries = dict(zip(train["qid"].astype(int), train["query"]))
    compact = components.profile.inference.compact_prompt
    with_relevance = components.profile.inference.grammar.max_relevance_chars > 0
    sample = teacher[teacher["plan"].notna() & teacher["qid"].astype(int).isin(queries)].head(limit)
    prompts, plans = [], []
    for r in sample.itertuples():
        messages = build_planner_messages(components.skb.schema, tables[int(r.qid)], queries[int(r.qid)], compact)
        prompts.append("\n".join(m["content"] for m in messages))
        plans.append(canonical_plan_json(json.loads(r.plan), tables[int(r.qid)], with_relevance))
    return prompts, plans


def sft_examples(components: Components, tokenizer) -> list[dict]:
    teacher = load_teacher_plans(components)
    chosen = select_sft_examples(teacher, components.split("train")["qid"].to_numpy(), components.profile.sft)
    prompt_of = prompt_builder(components, tokenizer)
    tables = components.entity_tables
    with_relevance = components.profile.inference.grammar.max_relevance_chars > 0
    return [
        {
            "prompt": prompt_of(int(r.qid)),
            "completion": canonical_plan_json(json.loads(r.plan), tables[int(r.qid)], with_relevance),
        }
        for r in chosen.itertuples()
    ]


class LMKind:
    """The ``lm`` planner kind: a language model writes the plan."""

    learns_from_executed = False  # SFT reads the teacher's chosen plans only

    def load(self, components: Components, checkpoint: Path) -> LMPlanner:
        planner = components.planner(checkpoint)
        assert isinstance(planner, LMPlanner), "the profile's planner kind is lm"
        return planner

    def build_base(self, components: Components) -> dict:
        prompts, plans = tokenizer_examples(components)
        return build_planner_base(
            components.skb, prompts, plans, components.profile.planner_model, components.art.path("planner_base")
        )

    def sft(self, components: Components, log_fn=None) -> dict:
        from transformers import AutoTokenizer

        base = base_model_path(components.art.require("planner_base"))
        tokenizer = AutoTokenizer.from_pretrained(base)
        examples = sft_examples(components, tokenizer)
        if not examples:
            raise GraspError(
                "no usable teacher plan for SFT (valid, gold answer first, ≤ 20 answers); check teacher_plans"
            )
        start = time.perf_counter()
        out = components.art.path("sft_adapter")
        result = train_sft(base, examples, components.profile.sft, out, log_fn=log_fn, device=components.profile.device)
        seconds = time.perf_counter() - start
        val = evaluate_planner(
            components, self.load(components, out), val_qids(components, components.profile.grpo.val_queries)
        )
        write_json(out / VAL_FILE, {"val_fused_hit1": val["fused"]["hit@1"], "queries": len(val["candidates"])})
        manifest.write(out)  # sealed again with the validation result it now holds
        losses = [(h["step"], h["loss"]) for h in result["history"] if "loss" in h]
        plot = line_plot(
            {"train loss": ([s for s, _ in losses], [v for _, v in losses])}, "planner SFT", "step", "loss"
        )
        return {
            "examples": len(examples),
            "train_seconds": round(seconds, 1),
            "final_loss": losses[-1][1] if losses else None,
            "val_fused_hit1": val["fused"]["hit@1"],
            "val_valid_plan_rate": val["valid_plan_rate"],
            "loss_curve_png": plot,
            "path": str(out),
        }

    def samples(self, components: Components, round_key: str) -> dict:
        start_ckpt = round_start(components, round_key)
        env = planner_env(components, load_reward_table(components))
        qids = rl_queries(components.split("train"), components.profile.rl)
        llm = self.load(components, start_ckpt).llm
        t0 = time.perf_counter()
        samples = sample_and_score(llm, env, qids, components.profile.rl, components.profile.inference)
        summary = write_rft_samples(components, round_key, samples, start_ckpt)
        return {
            **summary,
            "valid_rate": round(float(samples["valid"].mean()), 4),
            "seconds": round(time.perf_counter() - t0, 1),
        }

    def round(self, components: Components, round_key: str, log_fn=None) -> dict:
        """RFT on SFT data + best positive samples (from the base, or on cpu from the round's start), then GRPO,
        keep the best validation checkpoint, gate."""
        from transformers import AutoTokenizer

        from grasp_core.llm.backends import TransformersLLM

        samples = pd.read_parquet(components.art.require("rft_samples", round_key) / "samples.parquet")
        base = base_model_path(components.art.require("planner_base"))
        tokenizer = AutoTokenizer.from_pretrained(base)
        prompt_of = prompt_builder(components, tokenizer)
        best = best_positive_samples(samples)
        examples = rft_examples(sft_examples(components, tokenizer), best, prompt_of)
        work = components.art.path("planner_work", round_key)
        t0 = time.perf_counter()
        rft_log = (lambda s, m: log_fn(s, {f"rft/{k}": v for k, v in m.items()})) if log_fn else None
        rl = components.profile.rl
        rft_init = base if rl.rft_from_base else round_start(components, round_key)
        rft_cfg = dataclasses.replace(
            components.profile.sft,
            epochs=rl.rft_epochs or components.profile.sft.epochs,
            learning_rate=rl.rft_learning_rate or components.profile.sft.learning_rate,
        )
        train_sft(rft_init, examples, rft_cfg, work / "rft", log_fn=rft_log, device=components.profile.device)
        rft_seconds = time.perf_counter() - t0

        env = planner_env(components, load_reward_table(components))
        val = val_qids(components, components.profile.grpo.val_queries)

        def evaluate_val(model, tok) -> float:
            llm = TransformersLLM.from_model(model, tok, device=components.profile.device)
            planner = LMPlanner(llm, components.skb.schema, components.profile.inference)
            return evaluate_planner(components, planner, val)["fused"]["hit@1"]

        grpo_log = (lambda s, m: log_fn(s, {f"grpo/{k}": v for k, v in m.items()})) if log_fn else None
        train_q = informative_queries(samples) or rl_queries(components.split("train"), components.profile.rl)
        t1 = time.perf_counter()
        grpo = train_grpo(
            work / "rft",
            env,
            train_q,
            prompt_of,
            evaluate_val,
            components.profile.grpo,
            components.art.path("planner_work", f"{round_key}-grpo"),
            log_fn=grpo_log,
            device=components.profile.device,
            grammar=components.profile.inference.grammar,
        )
        grpo_seconds = time.perf_counter() - t1

        previous = previous_val_hit1(components, round_key)
        kept = components.art.path("planner_work", f"{round_key}-grpo")
        with atomic_dir(components.art.path("planner", round_key)) as tmp:
            shutil.copytree(kept, tmp, dirs_exist_ok=True)
            Gate(grpo["best_val_fused_hit1"], previous).write(tmp)
        sel = grpo["selection"]
        plot = line_plot(
            {"val fused Hit@1": ([s["step"] for s in sel], [s["val_fused_hit1"] for s in sel])},
            f"GRPO round {round_key}",
            "step",
            "Hit@1 (%)",
        )
        return {
            "round": round_key,
            "rft_examples": len(examples),
            "rft_positive_samples": len(best),
            "grpo_queries": len(train_q),
            "best_step": grpo["best_step"],
            "val_fused_hit1": grpo["best_val_fused_hit1"],
            "previous_val_fused_hit1": previous,
            "rft_seconds": round(rft_seconds, 1),
            "grpo_seconds": round(grpo_seconds, 1),
            "selection_png": plot,
            "path": str(components.art.path("planner", round_key)),
        }

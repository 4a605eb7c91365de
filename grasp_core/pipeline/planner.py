"""Pipeline steps of the planner: teacher plans, the base model, SFT, the reward table, and RL rounds."""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from grasp_core.components import EXECUTOR, FUSED_TEXT, PLANNER_LLM, Components
from grasp_core.errors import GraspError
from grasp_core.io import atomic_dir, read_json, write_json
from grasp_core.llm.chat import render_prompt
from grasp_core.pipeline.plots import line_plot
from grasp_core.pipeline.rft_samples import write_rft_samples
from grasp_core.pipeline.step import step
from grasp_core.planner.base import base_model_path, build_planner_base
from grasp_core.planner.candidates import json_text
from grasp_core.planner.prompt import build_planner_messages, canonical_plan_json
from grasp_core.planner.reward import RewardTable
from grasp_core.planner.rl import (
    best_positive_samples,
    informative_queries,
    rft_examples,
    rl_queries,
    sample_and_score,
    train_grpo,
)
from grasp_core.planner.rounds import Gate, previous_round
from grasp_core.planner.scoring import PlannerEnv, evaluate_planner
from grasp_core.planner.sft import select_sft_examples, shuffled_train_order, train_sft
from grasp_core.planner.teacher import ProgrammaticTeacher, TeacherPlan

VAL_FILE = "val.json"  # validation fused Hit@1 of a kept planner (the next round's gate reference)


# ------------------------------------------------------------------------------------------ helpers
def planner_env(ws: Components, reward_table: RewardTable | None = None) -> PlannerEnv:
    q = ws.skb.queries
    return PlannerEnv(
        schema=ws.skb.schema,
        executor=ws.executor,
        queries=dict(zip(q["qid"].astype(int), q["query"])),
        tables=ws.entity_tables,
        text=ws.text_rankings,
        gold={int(k): list(map(int, v)) for k, v in zip(q["qid"], q["answer_ids"])},
        num_nodes=ws.skb.num_nodes,
        reward_table=reward_table if reward_table is not None else RewardTable.prior(),
        reward_cfg=ws.profile.reward,
    )


def load_reward_table(ws: Components) -> RewardTable:
    return RewardTable.from_json(read_json(ws.art.require("reward_table") / "reward_table.json"))


def prompt_builder(ws: Components, tokenizer):
    """qid -> the rendered planner prompt (system prompt with the schema, entity table, query)."""
    env_q = dict(zip(ws.skb.queries["qid"].astype(int), ws.skb.queries["query"]))
    tables = ws.entity_tables
    compact = ws.profile.inference.compact_prompt
    enable_thinking = ws.profile.planner_model.enable_thinking

    def prompt_of(qid: int) -> str:
        messages = build_planner_messages(ws.skb.schema, tables[qid], env_q[qid], compact)
        return render_prompt(tokenizer, messages, enable_thinking)

    return prompt_of


def round_start(ws: Components, round_key: str) -> Path:
    """The planner a round starts from: the SFT planner in round 1, the previous round's kept planner after.

    The previous round must have passed its gate (validation fused Hit@1 did not fall)."""
    prev = previous_round(round_key)
    if prev is None:
        return ws.art.require("sft_adapter")
    path = ws.art.require("planner", prev)
    gate = Gate.read(path)
    if not gate.passed:
        raise GraspError(
            f"round {prev} of {ws.dataset!r} lowered validation fused Hit@1 ({gate.previous:.1f} -> {gate.val_fused_hit1:.1f}); "
            f"round {round_key} does not start from it. Inspect the run in MLflow, change the RL settings and rematerialize round {prev}."
        )
    return path


# ------------------------------------------------------------------------------------------ steps
def make_teacher(ws: Components):
    """The LLM teacher when ``teacher_endpoint.base_url`` is set, else the programmatic teacher."""
    endpoint = ws.profile.teacher_endpoint
    if endpoint.base_url:
        from grasp_core.llm.backends import OpenAICompatibleLLM
        from grasp_core.planner.llm_teacher import LLMTeacher

        llm = OpenAICompatibleLLM.from_config(endpoint, "teacher_endpoint")
        return LLMTeacher(ws.skb.schema, ws.dataset, llm, ws.executor, ws.profile.inference)
    return ProgrammaticTeacher(ws.skb.schema, ws.skb.nodes["type"].tolist(), ws.executor, ws.profile.teacher)


@step("teacher_plans", reads=(*EXECUTOR, "inference", "planner", "policy_train", "sft", "teacher", "teacher_endpoint"))
def teacher_plans_step(ws: Components) -> dict:
    """Programmatic teacher plans: training queries in the SFT order until enough usable plans, plus every test
    query, whose plans are the evaluation's oracle-guided upper bound (never trained on). The human-written
    ``test-human`` queries are never taught: no step before the evaluation touches them.

    The ``policy`` planner learns from every taught training query and from all of its executed candidates: then
    ``policy_train.train_queries`` training queries are taught (all when None), every candidate executed, and the
    executed plans' rankings kept in ``executed.parquet``."""
    from grasp_core.pipeline.policy import executed_frame

    policy = ws.profile.planner == "policy"
    profile = ws.profile
    teacher = make_teacher(ws)
    if policy and not isinstance(teacher, ProgrammaticTeacher):
        raise GraspError(
            "planner=policy learns from the programmatic teacher's executed candidates: unset teacher_endpoint.base_url"
            " ($GRASP_TEACHER_URL) or use planner=lm"
        )
    queries = ws.skb.queries.set_index("qid")
    tables = ws.entity_tables
    train_order = [int(q) for q in shuffled_train_order(ws.split("train")["qid"].to_numpy(), profile.sft.seed)]
    eval_qids = [int(q) for q in ws.split("test")["qid"]]
    rows, usable = [], 0
    # usable SFT plans wanted; more training queries are taught until reached (the policy: all of them)
    budget = (profile.policy_train.train_queries or len(train_order)) if policy else profile.sft.n_examples
    bar = tqdm(total=budget + len(eval_qids), desc="teacher plans", unit="query")
    taught: list[tuple[int, TeacherPlan]] = []

    def teach(qids: list[int], train: bool = False) -> list[dict]:
        part = queries.loc[qids]
        golds = [list(map(int, a)) for a in part["answer_ids"]]
        args = (part["query"].tolist(), [tables[q] for q in qids], golds)
        # the policy learns from every executed candidate of a training query
        plans = teacher.teach(*args, execute_all=True) if policy and train else teacher.teach(*args)
        if policy and train:
            taught.extend(zip(qids, plans))
        bar.update(len(qids))
        return [
            {
                "qid": qid,
                "split": split,
                "plan": json_text(out.plan) if out.plan else None,
                "gold_rank": out.gold_rank,
                "n_candidates": out.n_candidates,
                "n_answers": len(gold),
                "n_tried": out.n_tried,
            }
            for qid, split, gold, out in zip(qids, part["split"], golds, plans)
        ]

    start = time.perf_counter()
    todo = list(train_order)
    while todo and usable < budget:
        # at most as many queries as usable plans are still wanted: never more taught than one at a time would
        chunk, todo = todo[: min(32, budget - usable)], todo[min(32, budget - usable) :]
        for r in teach(chunk, train=True):
            rows.append(r)
            usable += int(
                policy or (r["plan"] is not None and r["gold_rank"] == 1 and r["n_answers"] <= profile.sft.max_answers)
            )
    for i in range(0, len(eval_qids), 32):
        rows += teach(eval_qids[i : i + 32])
    bar.close()
    df = pd.DataFrame(rows)
    with atomic_dir(ws.art.path("teacher_plans")) as tmp:
        df.to_parquet(tmp / "plans.parquet")
        if policy:
            executed_frame([q for q, _ in taught], [t for _, t in taught]).to_parquet(tmp / "executed.parquet")
    stats = {}
    for split, part in df.groupby("split"):
        stats[str(split)] = {
            "queries": len(part),
            "valid_share": round(float(part["plan"].notna().mean()), 4),
            "gold_first_share": round(float((part["gold_rank"] == 1).mean()), 4),
        }
    counts = {} if isinstance(teacher, ProgrammaticTeacher) else {"invalid_plans": teacher.invalid}
    if counts:
        counts["retried_queries"] = teacher.retried
    return {
        "teacher": "programmatic" if isinstance(teacher, ProgrammaticTeacher) else "llm",
        **counts,
        "usable_for_sft": usable,
        "per_split": stats,
        "seconds": round(time.perf_counter() - start, 1),
        "path": str(ws.art.path("teacher_plans")),
    }


def load_teacher_plans(ws: Components) -> pd.DataFrame:
    return pd.read_parquet(ws.art.require("teacher_plans") / "plans.parquet")


def tokenizer_examples(ws: Components, limit: int = 3000) -> tuple[list[str], list[str]]:
    """(prompts, plans) of training queries with a teacher plan, for the offline planner's tokenizer: no
    validation or test query text reaches a trained artifact."""
    teacher = load_teacher_plans(ws)
    tables = ws.entity_tables
    train = ws.split("train")
    queries = dict(zip(train["qid"].astype(int), train["query"]))
    compact = ws.profile.inference.compact_prompt
    with_relevance = ws.profile.inference.grammar.max_relevance_chars > 0
    sample = teacher[teacher["plan"].notna() & teacher["qid"].astype(int).isin(queries)].head(limit)
    prompts, plans = [], []
    for r in sample.itertuples():
        messages = build_planner_messages(ws.skb.schema, tables[int(r.qid)], queries[int(r.qid)], compact)
        prompts.append("\n".join(m["content"] for m in messages))
        plans.append(canonical_plan_json(json.loads(r.plan), tables[int(r.qid)], with_relevance))
    return prompts, plans


@step("planner_base", reads=("encoder", "inference", "planner", "planner_model"))
def planner_base_step(ws: Components) -> dict:
    if ws.profile.planner == "policy":
        from grasp_core.pipeline.policy import policy_base_step

        return policy_base_step(ws)
    prompts, plans = tokenizer_examples(ws)
    return build_planner_base(ws.skb, prompts, plans, ws.profile.planner_model, ws.art.path("planner_base"))


def sft_examples(ws: Components, tokenizer) -> list[dict]:
    teacher = load_teacher_plans(ws)
    chosen = select_sft_examples(teacher, ws.split("train")["qid"].to_numpy(), ws.profile.sft)
    prompt_of = prompt_builder(ws, tokenizer)
    tables = ws.entity_tables
    with_relevance = ws.profile.inference.grammar.max_relevance_chars > 0
    return [
        {
            "prompt": prompt_of(int(r.qid)),
            "completion": canonical_plan_json(json.loads(r.plan), tables[int(r.qid)], with_relevance),
        }
        for r in chosen.itertuples()
    ]


def _val_qids(ws: Components, cap: int | None = None) -> list[int]:
    return ws.split("val")["qid"].astype(int).head(cap).tolist()


@step(
    "sft_adapter",
    reads=(
        *EXECUTOR,
        *PLANNER_LLM,
        *FUSED_TEXT,
        "grpo",
        "inference",
        "planner",
        "planner_model",
        "policy",
        "policy_train",
        "reward",
        "sft",
        "teacher",
    ),
)
def sft_step(ws: Components, log_fn=None) -> dict:
    if ws.profile.planner == "policy":
        from grasp_core.pipeline.policy import policy_sft_step

        return policy_sft_step(ws, log_fn)
    from transformers import AutoTokenizer

    base = base_model_path(ws.art.require("planner_base"))
    tokenizer = AutoTokenizer.from_pretrained(base)
    examples = sft_examples(ws, tokenizer)
    if not examples:
        raise GraspError("no usable teacher plan for SFT (valid, gold answer first, ≤ 20 answers); check teacher_plans")
    start = time.perf_counter()
    result = train_sft(
        base, examples, ws.profile.sft, ws.art.path("sft_adapter"), log_fn=log_fn, device=ws.profile.device
    )
    seconds = time.perf_counter() - start
    val = evaluate_planner(
        ws.planner_llm(ws.art.path("sft_adapter")),
        planner_env(ws),
        _val_qids(ws, ws.profile.grpo.val_queries),
        ws.profile.inference,
    )
    write_json(
        ws.art.path("sft_adapter") / VAL_FILE, {"val_fused_hit1": val["fused"]["hit@1"], "queries": len(val["plans"])}
    )
    losses = [(h["step"], h["loss"]) for h in result["history"] if "loss" in h]
    plot = line_plot({"train loss": ([s for s, _ in losses], [v for _, v in losses])}, "planner SFT", "step", "loss")
    return {
        "examples": len(examples),
        "train_seconds": round(seconds, 1),
        "final_loss": losses[-1][1] if losses else None,
        "val_fused_hit1": val["fused"]["hit@1"],
        "val_valid_plan_rate": val["valid_plan_rate"],
        "loss_curve_png": plot,
        "path": str(ws.art.path("sft_adapter")),
    }


@step("reward_table", reads=(*EXECUTOR, *PLANNER_LLM, *FUSED_TEXT, "inference", "reward"))
def reward_table_step(ws: Components) -> dict:
    """Observations on validation queries: the text list alone and the SFT planner's fused list.

    The downstream outcome is fused Hit@1 (no reranker exists before the first training cycle ends)."""
    env = planner_env(ws)
    qids = _val_qids(ws)
    result = evaluate_planner(ws.planner_llm(ws.art.require("sft_adapter")), env, qids, ws.profile.inference)
    observations = []
    for q, fused, cand in zip(qids, result["fused_rankings"], result["plans"]["candidates"]):
        gold = env.gold[q]
        text_rank = env.text[q].rank_of(gold)
        observations.append((text_rank, 0, text_rank == 1))
        fused_rank = fused.rank_of(gold)
        observations.append((fused_rank, int(cand), fused_rank == 1))
    table = RewardTable.build(observations, ws.profile.reward.shrink_n)
    with atomic_dir(ws.art.path("reward_table")) as tmp:
        write_json(tmp / "reward_table.json", table.to_json())
    return {
        "observations": len(observations),
        "downstream": "fused hit@1",
        "table_md": table.to_markdown(),
        "path": str(ws.art.path("reward_table")),
    }


@step(
    "rft_samples",
    reads=(
        *EXECUTOR,
        *PLANNER_LLM,
        *FUSED_TEXT,
        "grpo",
        "inference",
        "planner",
        "policy",
        "policy_train",
        "reward",
        "rl",
        "teacher",
    ),
)
def rft_samples_step(ws: Components, round_key: str) -> dict:
    if ws.profile.planner == "policy":
        from grasp_core.pipeline.policy import policy_samples_step

        return policy_samples_step(ws, round_key)
    start_ckpt = round_start(ws, round_key)
    env = planner_env(ws, load_reward_table(ws))
    qids = rl_queries(ws.split("train"), ws.profile.rl)
    llm = ws.planner_llm(start_ckpt)
    t0 = time.perf_counter()
    samples = sample_and_score(llm, env, qids, ws.profile.rl, ws.profile.inference)
    summary = write_rft_samples(ws, round_key, samples, start_ckpt)
    return {
        **summary,
        "valid_rate": round(float(samples["valid"].mean()), 4),
        "seconds": round(time.perf_counter() - t0, 1),
    }


@step(
    "planner",
    reads=(
        *EXECUTOR,
        *PLANNER_LLM,
        *FUSED_TEXT,
        "grpo",
        "inference",
        "planner",
        "planner_model",
        "policy",
        "policy_train",
        "reward",
        "rl",
        "sft",
        "teacher",
    ),
)
def planner_round_step(ws: Components, round_key: str, log_fn=None) -> dict:
    """RFT on SFT data + best positive samples (from the base, or on cpu from the round's start), then GRPO,
    keep the best validation checkpoint, gate."""
    if ws.profile.planner == "policy":
        from grasp_core.pipeline.policy import policy_round_step

        return policy_round_step(ws, round_key, log_fn)
    from transformers import AutoTokenizer

    from grasp_core.llm.backends import TransformersLLM

    samples = pd.read_parquet(ws.art.require("rft_samples", round_key) / "samples.parquet")
    base = base_model_path(ws.art.require("planner_base"))
    tokenizer = AutoTokenizer.from_pretrained(base)
    prompt_of = prompt_builder(ws, tokenizer)
    best = best_positive_samples(samples)
    examples = rft_examples(sft_examples(ws, tokenizer), best, prompt_of)
    work = ws.art.path("planner_work", round_key)
    t0 = time.perf_counter()
    rft_log = (lambda s, m: log_fn(s, {f"rft/{k}": v for k, v in m.items()})) if log_fn else None
    rl = ws.profile.rl
    rft_init = base if rl.rft_from_base else round_start(ws, round_key)
    rft_cfg = dataclasses.replace(
        ws.profile.sft,
        epochs=rl.rft_epochs or ws.profile.sft.epochs,
        learning_rate=rl.rft_learning_rate or ws.profile.sft.learning_rate,
    )
    train_sft(rft_init, examples, rft_cfg, work / "rft", log_fn=rft_log, device=ws.profile.device)
    rft_seconds = time.perf_counter() - t0

    env = planner_env(ws, load_reward_table(ws))
    val_qids = _val_qids(ws, ws.profile.grpo.val_queries)

    def evaluate_val(model, tok) -> float:
        llm = TransformersLLM.from_model(model, tok, device=ws.profile.device)
        return evaluate_planner(llm, env, val_qids, ws.profile.inference)["fused"]["hit@1"]

    grpo_log = (lambda s, m: log_fn(s, {f"grpo/{k}": v for k, v in m.items()})) if log_fn else None
    train_q = informative_queries(samples) or rl_queries(ws.split("train"), ws.profile.rl)
    t1 = time.perf_counter()
    grpo = train_grpo(
        work / "rft",
        env,
        train_q,
        prompt_of,
        evaluate_val,
        ws.profile.grpo,
        ws.art.path("planner_work", f"{round_key}-grpo"),
        log_fn=grpo_log,
        device=ws.profile.device,
        grammar=ws.profile.inference.grammar,
    )
    grpo_seconds = time.perf_counter() - t1

    previous = _previous_val_hit1(ws, round_key)
    kept = ws.art.path("planner_work", f"{round_key}-grpo")
    with atomic_dir(ws.art.path("planner", round_key)) as tmp:
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
        "path": str(ws.art.path("planner", round_key)),
    }


def _previous_val_hit1(ws: Components, round_key: str) -> float:
    """Validation fused Hit@1 of the planner this round started from (the gate's reference)."""
    prev = previous_round(round_key)
    if prev is None:
        return read_json(ws.art.require("sft_adapter") / VAL_FILE)["val_fused_hit1"]
    return Gate.read(ws.art.require("planner", prev)).val_fused_hit1

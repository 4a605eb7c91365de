"""Planner training speed at the `cpu` profile's settings: SFT tokens/s and GRPO seconds per step, 1 and 2 torch threads.

    python benchmarks/planner_training.py [--queries 120] [--sft-steps 6] [--grpo-steps 2]

Builds a tiny synth-prime world (real MiniLM, faiss, LadybugDB, gazetteer, BM25, programmatic teacher), the `cpu`
planner base (TinyModelConfig defaults) and times ``train_sft`` / ``train_grpo`` with the cpu profile's SFTTrainingConfig and
GRPOTrainingConfig (steps capped). Writes benchmarks/results/planner_training.json with the run's record (commit, machine,
the load average at the start and the end: this machine is shared, numbers move with the load) and prints a
markdown table.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from harness import RESULTS, Run

from grasp_core.embed.config import EncoderConfig
from grasp_core.embed.encoder import load_encoder
from grasp_core.embed.node_embeddings import build_node_embeddings, load_node_embeddings
from grasp_core.embed.vector_index import NodeIndex
from grasp_core.entities.gazetteer import GazetteerExtractor
from grasp_core.graph.config import GraphStoreConfig
from grasp_core.graph.open import open_graph_store
from grasp_core.llm.chat import render_prompt
from grasp_core.plan.execute import PlanExecutor
from grasp_core.planner.lm.base import base_model_path, build_planner_base
from grasp_core.planner.lm.prompt import build_planner_messages, canonical_plan_json
from grasp_core.planner.lm.rl import train_grpo
from grasp_core.planner.lm.sft import train_sft
from grasp_core.planner.reward import RewardTable
from grasp_core.planner.scoring import PlannerEnv
from grasp_core.planner.teachers.programmatic import ProgrammaticTeacher
from grasp_core.profiles import get_profile
from grasp_core.questions.querygen import synthesize_queries, with_queries
from grasp_core.sources.synth import build_synth_skb
from grasp_core.text.bm25 import BM25Retriever

OUT = RESULTS / "planner_training.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=120, help="synthesized questions of the tiny world")
    ap.add_argument("--sft-steps", type=int, default=6)
    ap.add_argument("--grpo-steps", type=int, default=2)
    args = ap.parse_args()
    run = Run(profile="cpu")
    profile = get_profile("cpu")
    tmp = Path(tempfile.mkdtemp())
    skb = build_synth_skb("prime", "tiny")
    skb = with_queries(skb, synthesize_queries(skb, args.queries, seed=0))
    encoder = load_encoder(EncoderConfig())
    index = NodeIndex.build(skb, load_node_embeddings(build_node_embeddings(skb, encoder, tmp / "emb")))
    store = open_graph_store(GraphStoreConfig(), tmp / "graph")
    store.load(skb)
    executor = PlanExecutor(skb, index, encoder, store)
    q = skb.queries
    qids, texts = q["qid"].astype(int).tolist(), q["query"].tolist()
    tables = dict(zip(qids, GazetteerExtractor(skb, index, encoder).extract(texts)))
    gold = {int(k): [int(x) for x in v] for k, v in zip(q["qid"], q["answer_ids"])}
    teacher = ProgrammaticTeacher(skb.schema, skb.nodes["type"].tolist(), executor, profile.teacher)
    taught = {i: teacher.teach_one(texts[i], tables[i], gold[i]) for i in qids}
    good = [i for i in qids if taught[i].plan is not None]
    compact = profile.inference.compact_prompt
    messages = {i: build_planner_messages(skb.schema, tables[i], texts[i], compact) for i in good}
    plans = {i: canonical_plan_json(taught[i].plan, tables[i]) for i in good}
    build_planner_base(
        skb,
        ["\n".join(m["content"] for m in messages[i]) for i in good],
        list(plans.values()),
        profile.planner_model,
        tmp / "base",
    )
    base = base_model_path(tmp / "base")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base)
    prompt_of = {i: render_prompt(tok, messages[i]) for i in good}
    examples = [{"prompt": prompt_of[i], "completion": plans[i]} for i in good]
    env = PlannerEnv(
        skb.schema,
        executor,
        dict(zip(qids, texts)),
        tables,
        dict(zip(qids, BM25Retriever.build(skb).rank(texts))),
        gold,
        skb.num_nodes,
        RewardTable.prior(),
    )
    sft_cfg = profile.sft
    n_sft = sft_cfg.effective_batch * args.sft_steps
    sft_examples = (examples * (n_sft // len(examples) + 1))[:n_sft]
    tokens = sum(len(tok(e["prompt"] + e["completion"])["input_ids"]) + 1 for e in sft_examples)
    rows = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        t0 = time.perf_counter()
        train_sft(base, sft_examples, dataclasses.replace(sft_cfg, epochs=1.0), tmp / f"sft{threads}")
        sft_s = time.perf_counter() - t0
        grpo_cfg = dataclasses.replace(profile.grpo, max_steps=args.grpo_steps, save_every=10**6)
        t0 = time.perf_counter()
        train_grpo(
            tmp / f"sft{threads}", env, good, prompt_of.__getitem__, lambda m, t: 0.0, grpo_cfg, tmp / f"grpo{threads}"
        )
        grpo_s = (time.perf_counter() - t0) / args.grpo_steps
        rows.append(
            {
                "threads": threads,
                "sft_steps": args.sft_steps,
                "sft_tokens_per_s": round(tokens / sft_s),
                "sft_s_per_step": round(sft_s / args.sft_steps, 2),
                "grpo_s_per_step": round(grpo_s, 1),
                "prompt_tokens_mean": round(tokens / n_sft),
            }
        )
    store.close()
    run.write(OUT, {"rows": rows}, quiet=True)
    print("| threads | SFT tokens/s | SFT s/step | GRPO s/step |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['threads']} | {r['sft_tokens_per_s']} | {r['sft_s_per_step']} | {r['grpo_s_per_step']} |")
    print(f"load avg (1 min): {run.record['load_average_1m']}")


if __name__ == "__main__":
    main()

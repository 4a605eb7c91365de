"""The `lm` planner (the tiny from-scratch Qwen3 under the plan grammar) through SFT -> RL round 1 -> RL round 2.

Builds a synthetic dataset in ``--work`` (or reuses what an earlier run of this script left there: every step
writes its artifact atomically and is skipped when complete), prepares it as the pipeline does (node embeddings,
indexes, graph store, entity tables, text branch), then runs the pipeline's own planner steps with the cpu profile
switched to ``planner="lm"`` and an RL budget that fits a 2-core machine (below). Every stage is scored on **all**
test queries: fused Hit@1 (text branch + the planner's graph ranking), McNemar p of each RL round against SFT, the
valid-plan rate and the stage's seconds. Checkpoints and rounds are selected on validation only.

    python benchmarks/lm_planner.py --dataset synth-prime --work /tmp/lm-bench

Writes ``benchmarks/results/lm_planner_<dataset>.json`` (shaped like the pipeline's results files: ``settings``
with ``sft``, ``rl1``, ``rl2``; ``mcnemar`` with ``rl1 vs sft``, ``rl2 vs sft``; the run's ``record`` holds the
commit, machine, load, date and every command-line setting, defaults included).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np
from harness import RESULTS, Run

from grasp_core.artifacts import Artifacts
from grasp_core.components import Components
from grasp_core.datasets import DatasetConfig
from grasp_core.eval.significance import mcnemar
from grasp_core.io import is_complete
from grasp_core.metrics import evaluate, per_query_hits
from grasp_core.pipeline import data, graph, text
from grasp_core.pipeline import planner as steps
from grasp_core.pipeline.planner_inputs import evaluate_planner, planner_env
from grasp_core.planner.config import GRPOTrainingConfig
from grasp_core.planner.rounds import ROUNDS, Gate, previous_round
from grasp_core.profiles import get_profile


def bench_profile(
    scale: str, n_queries: int, rl_queries: int, grpo_steps: int, rft_epochs: float = 2.0, val_queries: int = 100
):
    """The cpu profile with the LM planner; what differs from the pipeline's settings is said here."""
    cpu = get_profile("cpu")
    return cpu.replace(
        name="cpu+lm",
        planner="lm",
        dataset=DatasetConfig(scale=scale, n_queries=n_queries),
        # SFT budget for 2 cores (cpu profile: 500 plans x 10 epochs; paper: 500 x 3 with LoRA on a pretrained base)
        sft=dataclasses.replace(cpu.sft, n_examples=300, epochs=6.0),
        # RL budget for 2 cores (paper: every training query, RFT from the base, 200 GRPO steps of 16 x 8)
        rl=dataclasses.replace(cpu.rl, max_queries=rl_queries, rft_from_base=False, rft_epochs=rft_epochs),
        grpo=GRPOTrainingConfig(
            use_lora=False,  # the tiny from-scratch model trains all its weights, as its SFT does
            num_generations=8,
            prompts_per_step=8,
            learning_rate=3e-4,
            beta=0.01,
            max_steps=grpo_steps,
            save_every=max(1, grpo_steps // 3),
            val_queries=val_queries,
        ),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="synth-prime")
    ap.add_argument("--work", type=Path, required=True, help="artifact root this script writes to")
    ap.add_argument("--scale", default="tiny")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--rl-queries", type=int, default=120, help="training queries sampled per RL round")
    ap.add_argument("--grpo-steps", type=int, default=24)
    ap.add_argument("--rft-epochs", type=float, default=2.0, help="RFT epochs per round, from the round's start")
    ap.add_argument("--val-queries", type=int, default=100, help="validation queries per GRPO checkpoint")
    args = ap.parse_args()
    profile = bench_profile(
        args.scale, args.queries, args.rl_queries, args.grpo_steps, args.rft_epochs, args.val_queries
    )
    run = Run(profile=profile.name, **vars(args))
    art = Artifacts.for_dataset(args.dataset, args.work)
    seconds: dict[str, float] = {}

    def timed(name: str, fn, *a) -> None:
        t0 = time.perf_counter()
        fn(*a)
        seconds[name] = round(seconds.get(name, 0.0) + time.perf_counter() - t0, 1)
        print(f"[lm_planner] {name}: {seconds[name]:.0f}s", flush=True)

    if not is_complete(art.path("skb")):
        timed("skb", data.build_skb_artifact, art, args.dataset, profile.dataset)
    if not is_complete(art.path("queries")):
        timed("queries", data.build_queries_artifact, art, args.dataset, profile.dataset)
    components = Components(art, profile)  # not harness.components: the profile is the changed one above, not a name
    prepare = [
        ("node_embeddings", graph.node_embeddings_step),
        ("vector_indexes", graph.vector_indexes_step),
        ("graph_store", graph.graph_store_step),
        ("entity_tables", graph.entity_tables_step),
        ("text_index", text.text_index_step),
        ("mfar_model", text.mfar_model_step),
        ("text_rankings", text.text_rankings_step),
        ("teacher_plans", steps.teacher_plans_step),
        ("planner_base", steps.planner_base_step),
        ("sft_adapter", steps.sft_step),
        ("reward_table", steps.reward_table_step),
    ]
    for name, step in prepare:
        if not is_complete(art.path(name)):
            timed(name, step, components)
    rounds = {}
    for r in ROUNDS:
        if rounds and not rounds[f"rl{previous_round(r)}"]["passed"]:
            break  # a round never starts from a planner whose gate failed (as in the pipeline)
        if not is_complete(art.path("rft_samples", r)):
            timed(f"rl{r}", steps.rft_samples_step, components, r)
        if not is_complete(art.path("planner", r)):
            timed(f"rl{r}", steps.planner_round_step, components, r)
        gate = Gate.read(art.path("planner", r))
        rounds[f"rl{r}"] = {"val_fused_hit1": gate.val_fused_hit1, "previous": gate.previous, "passed": gate.passed}

    env = planner_env(components)
    test = components.split("test")["qid"].astype(int).tolist()
    answers = [env.gold[q] for q in test]
    settings, hits, valid = {}, {}, {}
    text_rankings = [env.text[q] for q in test]
    settings["text"] = evaluate(text_rankings, answers, env.num_nodes)
    hits["text"] = per_query_hits(text_rankings, answers, env.num_nodes)
    for key, path in [("sft", art.path("sft_adapter"))] + [
        (f"rl{r}", art.path("planner", r)) for r in ROUNDS if f"rl{r}" in rounds
    ]:
        t0 = time.perf_counter()
        result = evaluate_planner(components, components.planner(path), test)
        settings[key] = result["fused"]
        hits[key] = per_query_hits(result["answers"].fusion.rankings, answers, env.num_nodes)
        valid[key] = round(100 * result["valid_plan_rate"], 1)
        print(f"[lm_planner] test {key}: fused hit@1 {settings[key]['hit@1']:.1f} ({time.perf_counter() - t0:.0f}s)")
    pairs = [(a, b) for a, b in [("sft", "text"), ("rl1", "sft"), ("rl2", "sft"), ("rl2", "rl1")] if a in hits]
    doc = {
        "dataset": args.dataset,
        "split": "test",
        "n_queries": len(test),
        "profile": profile.name,
        "settings": settings,
        "mcnemar": {f"{a} vs {b}": float(mcnemar(hits[a], hits[b])[1]) for a, b in pairs},
        "hit1_wins_losses": {
            f"{a} vs {b}": [int(np.sum(hits[a] & ~hits[b])), int(np.sum(hits[b] & ~hits[a]))] for a, b in pairs
        },
        "valid_plan_rate": valid,
        "rounds": rounds,
        "seconds": seconds,
        "settings_changed": {
            "rl": dataclasses.asdict(profile.rl),
            "grpo": dataclasses.asdict(profile.grpo),
            "dataset": {"scale": profile.dataset.scale, "n_queries": profile.dataset.n_queries},
        },
    }
    components.close()
    run.write(RESULTS / f"lm_planner_{args.dataset}.json", doc, quiet=True)
    print(json.dumps({k: doc[k] for k in ("settings", "mcnemar", "valid_plan_rate", "seconds")}, indent=1))


if __name__ == "__main__":
    main()

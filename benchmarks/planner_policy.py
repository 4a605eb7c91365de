"""The plan-selection policy's progression on a dataset's prepared artifacts: text, teacher, SFT, RL rounds, on test.

Reads the prepared artifacts of a dataset (skb, queries, graph store, indexes, entity tables, text rankings) from
``--source`` without writing there: they are linked into ``--work``, where the planner steps write their own
artifacts (teacher plans with executed candidates, SFT policies per head, reward table, RL rounds). Every figure
is on **all** test queries; every selection (SFT epoch, GRPO step, head) is made on validation.

    python benchmarks/planner_policy.py --dataset hpo --source dagster_home/artifacts --work /tmp/policy-art \
        --heads linear mlp features

Writes ``benchmarks/results/planner_policy_<dataset>.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import time
from pathlib import Path

import numpy as np

from grasp_core.artifacts import Artifacts
from grasp_core.components import Components
from grasp_core.eval.significance import mcnemar
from grasp_core.io import is_complete
from grasp_core.pipeline import planner as steps
from grasp_core.pipeline.evaluation import TestRun
from grasp_core.plan.model import ABSTAIN
from grasp_core.planner.rounds import ROUNDS
from grasp_core.profiles import EvalSettings, get_profile

PREPARED = (
    "skb",
    "queries",
    "graph_store",
    "node_embeddings",
    "vector_indexes",
    "entity_tables",
    "text_rankings",
    "text_index",
    "mfar_model",
)
RESULTS = Path(__file__).parent / "results"


def link_prepared(source: Path, work: Path, dataset: str) -> None:
    (work / dataset).mkdir(parents=True, exist_ok=True)
    for name in PREPARED:
        src, dst = source / dataset / name, work / dataset / name
        if is_complete(src) and not dst.exists():
            dst.symlink_to(src.resolve())


def progression(ws: Components, planners: list[tuple[str, Path]]) -> list[dict]:
    """Test fused/graph Hit@1 and valid-plan rate of text, teacher and each planner, McNemar p vs text and vs SFT."""
    run = TestRun(ws, "test")
    teacher = steps.load_teacher_plans(ws).set_index("qid")
    plans = {"teacher (oracle-guided)": [teacher.loc[q, "plan"] or "{}" for q in run.qids]}
    for name, path in planners:
        plans[name] = run.planner_plans(name, path)
    graph = {name: run.graph(p)[0] for name, p in plans.items()}
    fused = {"text only": run.text, **{name: run.fused(g) for name, g in graph.items()}}
    hits = {name: run.hits(f) for name, f in fused.items()}
    rows = []
    for name in fused:
        row = {
            "planner": name,
            "queries": len(run.qids),
            "fused hit@1": run.metrics(fused[name])["hit@1"],
            "graph hit@1": run.metrics(graph[name])["hit@1"] if name in graph else None,
            "abstain %": round(100 * float(np.mean([p == ABSTAIN for p in plans[name]])), 1) if name in plans else None,
            "p vs text": None if name == "text only" else float(mcnemar(hits[name], hits["text only"])[1]),
            "p vs SFT": None if name in ("SFT", "text only") else float(mcnemar(hits[name], hits["SFT"])[1]),
        }
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="hpo")
    ap.add_argument("--source", type=Path, required=True, help="artifact root holding the prepared artifacts")
    ap.add_argument("--work", type=Path, required=True, help="artifact root this script writes to")
    ap.add_argument("--heads", nargs="+", default=["linear", "mlp"], help="policy heads compared (SFT, on val)")
    args = ap.parse_args()
    link_prepared(args.source, args.work, args.dataset)
    base = get_profile("cpu").replace(eval=EvalSettings(max_test_queries=None))
    out: dict = {"dataset": args.dataset, "heads": {}, "seconds": {}}

    def ws_for(profile) -> Components:
        return Components(Artifacts.for_dataset(args.dataset, args.work), profile)

    ws = ws_for(base)
    t0 = time.perf_counter()
    if not is_complete(ws.art.path("teacher_plans")):
        out["teacher"] = steps.teacher_plans_step(ws)
    out["seconds"]["teacher"] = round(time.perf_counter() - t0, 1)

    # SFT per head, selected on validation fused Hit@1
    best_head, best_val = None, -1.0
    for head in args.heads:
        profile = base.replace(policy=dataclasses.replace(base.policy, head=head))
        hws = ws_for(profile)
        t0 = time.perf_counter()
        result = steps.sft_step(hws)
        kept = args.work / args.dataset / f"sft_{head}"
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(hws.art.path("sft_adapter"), kept)
        out["heads"][head] = {
            "val_fused_hit1": result["val_fused_hit1"],
            "best_epoch": result["best_epoch"],
            "seconds": round(time.perf_counter() - t0, 1),
        }
        if result["val_fused_hit1"] > best_val:
            best_head, best_val = head, result["val_fused_hit1"]
        hws.close()
    out["chosen_head"] = best_head
    shutil.rmtree(ws.art.path("sft_adapter"))
    shutil.copytree(args.work / args.dataset / f"sft_{best_head}", ws.art.path("sft_adapter"))

    t0 = time.perf_counter()
    out["reward_table"] = steps.reward_table_step(ws)["table_md"]
    for r in ROUNDS:
        out[f"samples_{r}"] = {k: v for k, v in steps.rft_samples_step(ws, r).items() if k != "path"}
        res = steps.planner_round_step(ws, r)
        out[f"round_{r}"] = {k: v for k, v in res.items() if not k.endswith("_png") and k != "path"}
    out["seconds"]["rl"] = round(time.perf_counter() - t0, 1)

    planners = [("SFT", ws.art.path("sft_adapter"))] + [
        (f"SFT + RL round {r}", ws.art.path("planner", r)) for r in ROUNDS
    ]
    out["test"] = progression(ws, planners)
    ws.close()
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"planner_policy_{args.dataset}.json"
    path.write_text(json.dumps(out, indent=1))
    for row in out["test"]:
        print(row)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

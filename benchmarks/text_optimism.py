"""How much better the text ranking looks on the training queries than on unseen ones, and what that does to the
planner's reward: read from a finished pipeline's artifacts (nothing is recomputed but the fusion).

Per split: Hit@1 of the main text ranking (``text_rankings/<text_retriever>.parquet``), and over the queries the
teacher executed plans for (train and val), the share where some executed plan earns a positive reward (its
fusion with the text ranking beats the text ranking alone, read through the stored reward table), the share where
text alone is already right (no plan can gain) and the share of all executed plans whose reward is negative. On
test: how many questions the served planner abstained on (``eval_metrics/plans_test.parquet``).

    python benchmarks/text_optimism.py ARTIFACTS_DIR [--retriever mfar] [--out benchmarks/results/NAME.json]

``ARTIFACTS_DIR`` is ``$DAGSTER_HOME/artifacts/<dataset>``. Prints the figures; with ``--out``, writes them there
too, with the run's ``record``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from harness import Run

from grasp_core.manifest import MANIFEST_FILE
from grasp_core.planner.config import RewardConfig
from grasp_core.planner.reward import RewardTable, plan_reward
from grasp_core.ranking import Ranking
from grasp_core.text.rankings_io import read_rankings


def measure(art: Path, retriever: str = "mfar") -> dict:
    queries = pd.read_parquet(art / "queries" / "queries.parquet")
    gold = {int(q): list(map(int, a)) for q, a in zip(queries["qid"], queries["answer_ids"])}
    split = dict(zip(queries["qid"].astype(int), queries["split"]))
    text = read_rankings(art / "text_rankings" / f"{retriever}.parquet")
    out: dict = {"artifacts": str(art), "retriever": retriever, "splits": {}}
    for name in ("train", "val", "test", "test-human"):
        qids = [q for q, s in split.items() if s == name and q in text]
        if qids:
            hits = [text[q].rank_of(gold[q]) == 1 for q in qids]
            out["splits"][name] = {"queries": len(qids), "text_hit@1": round(100 * float(np.mean(hits)), 1)}
    table = RewardTable.from_json(json.loads((art / "reward_table" / "reward_table.json").read_text()))
    executed = pd.read_parquet(art / "teacher_plans" / "executed.parquet")
    best: dict[int, float] = {}
    rewards: dict[str, list[float]] = {}
    for qid, ids, scores, n in zip(executed["qid"], executed["node_ids"], executed["scores"], executed["n_candidates"]):
        q = int(qid)
        graph = Ranking(np.asarray(ids, np.int64), np.asarray(scores, np.float32))
        r = plan_reward(text[q], graph, int(n), gold[q], table, RewardConfig())
        best[q] = max(best.get(q, -1.0), r)
        rewards.setdefault(split[q], []).append(r)
    for name, values in rewards.items():
        qids = [q for q in best if split[q] == name]
        out["splits"][name].update(
            {
                "teacher_queries": len(qids),
                "some_plan_gains_share": round(100 * float(np.mean([best[q] > 0 for q in qids])), 1),
                "text_already_right_share": round(
                    100 * float(np.mean([text[q].rank_of(gold[q]) == 1 for q in qids])), 1
                ),
                "plans": len(values),
                "plans_losing_share": round(100 * float(np.mean(np.asarray(values) < 0)), 1),
                "plans_gaining_share": round(100 * float(np.mean(np.asarray(values) > 0)), 1),
            }
        )
    plans = art / "eval_metrics" / "plans_test.parquet"
    # a run still under way keeps the previous evaluation: not this run's abstentions
    fresh = plans.exists() and (
        (art / "eval_metrics" / MANIFEST_FILE).stat().st_mtime > (art / "text_rankings" / MANIFEST_FILE).stat().st_mtime
    )
    if fresh:
        served = pd.read_parquet(plans)
        out["splits"]["test"]["served_abstains"] = int((served["error"] == "abstain").sum())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("artifacts", type=Path)
    parser.add_argument("--retriever", default="mfar")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    run = Run()
    result = measure(args.artifacts, args.retriever)
    if args.out:
        run.write(args.out, result)
    else:
        print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

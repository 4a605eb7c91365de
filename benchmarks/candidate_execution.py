"""Executing every candidate plan of a question, as the teacher, the RL rounds and the plan chooser do: the anchors'
bindings searched once per executor (``PlanExecutor._link``) against a search per plan (the code before it).

Run: ``python benchmarks/candidate_execution.py hpo --root dagster_home/artifacts [--split test] [--questions 200]
[--passes 3]``; writes ``benchmarks/results/candidate_execution_<dataset>.json`` and prints it.

The questions' candidates are the served planner's (``Featurizer.candidates``, abstain left out), executed 32
questions per ``execute_batch`` call as the teacher does. Each pass starts from a fresh executor state (no text
vectors, no bindings kept), and the two settings alternate pass by pass on the same executor, so both see the same
machine. Every ranking and binding of the two settings is compared: ``identical`` must be true.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from harness import RESULTS, Run, load_components

from grasp_core.planner.candidates import json_text

CHUNK = 32  # questions per execute_batch call (the teacher's chunk)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--root", required=True, help="a finished pipeline's artifact root")
    parser.add_argument("--split", default="test")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--passes", type=int, default=3, help="timed passes of each setting (alternating)")
    parser.add_argument("--profile", default="cpu")
    args = parser.parse_args()
    run = Run(profile=args.profile, dataset=args.dataset, split=args.split)
    components = load_components(args.dataset, args.root, args.profile)
    executor = components.executor
    featurizer = components.planner(components.final_planner()[1]).featurizer  # type: ignore[attr-defined]
    part = components.split(args.split).head(args.questions)
    qids = part["qid"].astype(int).tolist()
    tables = [components.entity_tables[q] for q in qids]
    work = []
    for start in range(0, len(qids), CHUNK):
        plans, queries, tabs = [], [], []
        for query, table in zip(part["query"].tolist()[start : start + CHUNK], tables[start : start + CHUNK]):
            for c in featurizer.candidates(query, table):
                if c is not None:
                    plans.append(json_text(c))
                    queries.append(query)
                    tabs.append(table)
        work.append((plans, queries, tabs))
    n_plans = sum(len(p) for p, _, _ in work)

    def search_every_time(anchor, vector):  # the code before: one index search per anchor of every plan
        return list(executor._search_bindings(anchor, vector))

    def one_pass(memo: bool):
        executor._memo.clear()
        executor._links.clear()
        if memo:
            executor.__dict__.pop("_link", None)
        else:
            executor._link = search_every_time
        t0 = time.perf_counter()
        out = [executor.execute_batch(p, q, t) for p, q, t in work]
        return time.perf_counter() - t0, [r for batch in out for r in batch]

    one_pass(True)  # warm-up: imports, the index's first searches
    seconds: dict[str, list[float]] = {"search_per_plan": [], "bindings_kept": []}
    identical = True
    for _ in range(args.passes):
        s_before, before = one_pass(False)
        s_after, after = one_pass(True)
        seconds["search_per_plan"].append(round(s_before, 2))
        seconds["bindings_kept"].append(round(s_after, 2))
        identical &= all(
            np.array_equal(a[0].node_ids, b[0].node_ids)
            and np.array_equal(a[0].scores, b[0].scores)
            and a[1].bindings == b[1].bindings
            for a, b in zip(before, after, strict=True)
        )
    med = {k: float(np.median(v)) for k, v in seconds.items()}
    run.write(
        RESULTS / f"candidate_execution_{args.dataset}.json",
        {
            "questions": len(qids),
            "plans": n_plans,
            "plans_per_question": round(n_plans / max(1, len(qids)), 1),
            "seconds": seconds,
            "median_seconds": med,
            "ms_per_plan": {k: round(1e3 * v / max(1, n_plans), 3) for k, v in med.items()},
            "ratio_kept_over_per_plan": round(med["bindings_kept"] / med["search_per_plan"], 3),
            "identical": identical,
        },
    )


if __name__ == "__main__":
    main()

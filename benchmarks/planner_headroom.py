"""Where the ``cpu`` planner stands among its own candidates: every candidate it chooses from, executed and fused.

Run: ``python benchmarks/planner_headroom.py hpo --root dagster_home/artifacts [--splits val test]
[--planner planner:2] [--tag after]``; writes ``benchmarks/results/planner_headroom_<dataset>[_<tag>].json`` (with
the run's record: commit, machine, load average, date) and prints a table. Without ``--planner`` it reads the
served planner (the last round whose gate passed).

For each question of a split, every candidate of the planner (``Featurizer.candidates`` plus ABSTAIN) is executed
by the dataset's executor and fused with the stored text ranking (RRF, the profile's weights), as the answer path
does, at each graph weight its chooser picks among (``ChooserConfig.graph_weights``; an option is a candidate at a
weight). Reported (fused Hit@1, %): text alone; the policy's greedy choice (at the fixed weights); the planner's
choice (its chooser over its shortlist when it has one, else greedy); the oracle within the policy's top 1/3/5/10
(+ ABSTAIN) over options; the oracle over all candidates at the fixed weights (some candidate puts a gold answer
first); and over all options. The planner's losses to the oracle over options are broken down by the first rule
that applies: its plan wins at another weight -> ``wrong graph weight``; it abstained -> ``abstained``; a winning
candidate has its target type -> ``wrong
relation path`` when none of those has its path, else ``wrong anchor row`` when a same-path winner uses another
entity-table row, else ``other match mode``; else ``planned when abstaining wins`` when ABSTAIN wins; else ``wrong
target type``. The planner reads the question as the policy does (its first 64 tokens; hpo questions are shorter).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from harness import RESULTS, Run, load_components

from grasp_core.components import Components
from grasp_core.pipeline.planner_inputs import planner_env
from grasp_core.plan.model import ABSTAIN
from grasp_core.planner.policy.chooser import Executed, feature_names, shortlists
from grasp_core.planner.policy.chooser_train import fused_hit1_labels, picks
from grasp_core.planner.policy.model import path_keys
from grasp_core.planner.policy.train import Outcomes

ALL = 10_000  # a shortlist longer than any candidate list: every candidate


def _shape(plan: str) -> tuple[str | None, tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(target type, path keys, anchor rows, match modes) of a plan text; ABSTAIN: (None, (), (), ())."""
    if plan == ABSTAIN:
        return None, (), (), ()
    p = json.loads(plan)
    return (
        p["target"]["type"],
        tuple(path_keys(p)),
        tuple(a["ref"] for a in p["anchors"]),
        tuple(a["match_mode"] for a in p["anchors"]),
    )


def loss_cause(chosen: str, winners: list[str]) -> str:
    """Why a losing choice lost to the winning candidates (the rule in the module docstring)."""
    if chosen == ABSTAIN:
        return "abstained"
    c = _shape(chosen)
    same_type = [_shape(w) for w in winners if w != ABSTAIN and _shape(w)[0] == c[0]]
    if same_type:
        same_path = [w for w in same_type if w[1] == c[1]]
        if not same_path:
            return "wrong relation path"
        return "wrong anchor row" if any(w[2] != c[2] for w in same_path) else "other match mode"
    return "planned when abstaining wins" if ABSTAIN in winners else "wrong target type"


def measure(components: Components, planner_name: str, split: str) -> dict:
    policy = components.planner(components.art.require(*planner_name.split(":")))
    env = planner_env(components)
    qids = components.split(split)["qid"].astype(int).tolist()
    qids = [q for q in qids if env.gold.get(q)]
    outcomes = Outcomes(env)
    x = policy.featurizer([env.queries[q] for q in qids], [env.tables[q] for q in qids])
    with torch.no_grad():
        logits = policy.head(x).numpy()
    chooser = policy.chooser
    asked = chooser.asked_proba(policy.featurizer.encoder, [env.queries[q] for q in qids]) if chooser else None

    def run(pairs):
        return [Executed(r, n) for r, n in outcomes.get([(qids[i], p) for i, p in pairs])]

    t0 = time.perf_counter()
    weights = chooser.graph_weights if chooser else (1.0,)
    lists = shortlists(logits, x, asked, [env.text[q] for q in qids], run, ALL, components.profile.reward, weights)
    labels = [fused_hit1_labels(s, env.gold[q]) for q, s in zip(qids, lists)]
    seconds = time.perf_counter() - t0
    rank_col, abstain_col = feature_names().index("policy_rank"), feature_names().index("plan_abstain")
    fixed_w = components.profile.reward.w_graph

    def at_fixed(s) -> np.ndarray:
        return np.array([e.graph_weight == fixed_w or not len(e.ranking) for e in s.executed], bool)

    def first_fixed(s) -> int | None:
        if not len(s.rows):
            return None
        ranks = np.where(at_fixed(s), s.features[:, rank_col], np.inf)
        return int(np.argmin(ranks))

    greedy = [first_fixed(s) for s in lists]
    chosen = picks(chooser.booster, lists, chooser.k) if chooser else greedy  # type: ignore[arg-type]

    def rate(hits) -> float:
        return round(100.0 * float(np.mean(hits)), 2)

    def hit(i, c) -> bool:
        return c is not None and labels[i][c] > 0

    def oracle_within(k: int) -> float:
        return rate(
            [
                bool(np.any(lab[(s.features[:, rank_col] < k) | (s.features[:, abstain_col] > 0)] > 0))
                if len(s.rows)
                else False
                for s, lab in zip(lists, labels)
            ]
        )

    causes: Counter = Counter()
    for i, (s, lab, c) in enumerate(zip(lists, labels, chosen)):
        if hit(i, c) or not lab.any() or c is None:
            continue
        plans = x.plans[i]
        winners = [plans[s.rows[j]] for j in np.flatnonzero(lab > 0)]
        chosen_plan = plans[s.rows[c]]
        causes["wrong graph weight" if chosen_plan in winners else loss_cause(chosen_plan, winners)] += 1
    text_hit = [env.text[q].rank_of(env.gold[q]) == 1 for q in qids]
    return {
        "queries": len(qids),
        "candidates_per_query": round(float(np.mean([len(s.rows) for s in lists])), 1),
        "winning_candidates_per_query": round(float(np.mean([lab.sum() for lab in labels])), 1),
        "fused_hit1": {
            "text_alone": rate(text_hit),
            "policy_greedy": rate([hit(i, c) for i, c in enumerate(greedy)]),
            "served_choice": rate([hit(i, c) for i, c in enumerate(chosen)]),
            **{f"oracle_top_{k}": oracle_within(k) for k in (1, 3, 5, 10)},
            "oracle_fixed_weights": rate([bool(lab[at_fixed(s)].any()) for s, lab in zip(lists, labels)]),
            "oracle_options": rate([bool(lab.any()) for lab in labels]),
        },
        "chooser_k": chooser.k if chooser else None,
        "graph_weights": list(weights),
        "losses_to_oracle": {cause.replace(" ", "_"): n for cause, n in causes.most_common()},
        "execute_seconds": round(seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--root", type=Path, required=True, help="a finished pipeline's artifact root")
    parser.add_argument("--splits", nargs="+", default=["val", "test"])
    parser.add_argument("--planner", default=None, help="sft_adapter or planner:<round> (default: the served one)")
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--tag", default=None, help="suffix of the results file (before/after)")
    args = parser.parse_args()
    run = Run(profile=args.profile)
    components = load_components(args.dataset, args.root, args.profile)
    if components.profile.planner != "policy":
        raise SystemExit(
            f"the {args.profile} profile's planner is {components.profile.planner!r}; this measures the policy"
        )
    name = args.planner
    if name is None:
        label, path = components.final_planner()
        name = "sft_adapter" if label == "sft" else f"planner:{path.name}"
    out = {
        "dataset": args.dataset,
        "planner": name,
        "splits": {s: measure(components, name, s) for s in args.splits},
    }
    suffix = f"_{args.tag}" if args.tag else ""
    run.write(RESULTS / f"planner_headroom_{args.dataset}{suffix}.json", out, quiet=True)
    for split, m in out["splits"].items():
        print(f"{args.dataset} {split} ({m['queries']} questions, {m['candidates_per_query']} candidates each)")
        for key, value in m["fused_hit1"].items():
            print(f"  {key:<28} {value:6.2f}")
        print(f"  losses to the oracle: {m['losses_to_oracle']}")


if __name__ == "__main__":
    main()

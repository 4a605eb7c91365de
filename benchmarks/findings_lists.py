"""Several findings -> which one? On a built dataset: Hit@1 and Hit@5 of findings lists, for the text branch alone
and the served system.

    python benchmarks/findings_lists.py hpo --root dagster_home/artifacts --label after --against before

Questions are drawn from the SKB with this script's own random stream (seed ``findings-lists-<dataset>``, not the
training generators'), as a capability probe beside the evaluation splits, not a split of its own. The findings are
the targets' neighbours over ``--relation`` (hpo: a disease's ``phenotype present`` phenotypes), each named by one
of its aliases (a lay word, when it has one) half of the time, else by its name, lower-cased:

- ``three``: three findings of a target with four or more, in a list ("short stature, webbed neck and pulmonary
  stenosis - which disease?"). Gold: every target with all three (at most 20).
- ``one_off``: the same three and a fourth finding the target does not have (one a patient has and the KB does not
  annotate), in the same place of the list at random. Gold: the same.

Training questions of the same register are drawn from the same KB (:mod:`grasp_core.questions.intent_queries`),
so a question here may coincide with one; nothing was selected on this probe. The questions come from plain rules on
the SKB's tables, so any checkout's code can be measured on the same questions: ``--label before`` with the older
code on ``PYTHONPATH`` and its artifacts under ``--root``. Per question hits are kept, and ``--against LABEL`` adds
McNemar's p against that label's served hits. Writes ``benchmarks/results/findings_lists_<dataset>_<label>.json``.
"""

from __future__ import annotations

import argparse
import os
import random
from collections import defaultdict

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from harness import RESULTS, Run, probe_forms, served_mcnemar  # noqa: E402

from grasp_core.retriever import GraspRetriever  # noqa: E402
from grasp_core.skb.format import SKB  # noqa: E402

FRAMES = ("{f} - which {t}?", "which {t} has {f}", "{f}: what {t} could it be?", "{f}")
MAX_GOLD = 20


def findings_of(skb: SKB, relation: str, target_type: str) -> dict[int, set[int]]:
    """Target node -> its neighbours over ``relation`` (either direction)."""
    types = skb.nodes["type"].astype(str).to_numpy()
    e = skb.edges[skb.edges["rel"].astype(str) == relation]
    out: dict[int, set[int]] = defaultdict(set)
    for s, d in zip(e["src"].to_numpy(), e["dst"].to_numpy()):
        target, finding = (s, d) if types[s] == target_type else (d, s)
        if types[target] == target_type and types[finding] != target_type:
            out[int(target)].add(int(finding))
    return out


def said(skb: SKB, node: int, r: random.Random) -> str:
    aliases = [a for a in skb.aliases_of(node) if len(a.split()) <= 6]
    text = r.choice(aliases) if aliases and r.random() < 0.5 else str(skb.nodes["name"].iat[node])
    return text.lower()


def questions(skb: SKB, relation: str, target_type: str, n: int, seed: str) -> dict[str, list[tuple[str, set[int]]]]:
    r = random.Random(seed)
    has = findings_of(skb, relation, target_type)
    having: dict[int, set[int]] = defaultdict(set)  # finding -> targets with it
    for t, fs in has.items():
        for f in fs:
            having[f].add(t)
    common = sorted(having)
    word = target_type.split("/")[0]
    three, one_off = [], []
    for t in r.sample(sorted(t for t, fs in has.items() if len(fs) >= 4), min(n, len(has))):
        picked = r.sample(sorted(has[t]), 3)
        gold = set.intersection(*(having[f] for f in picked))
        if len(gold) > MAX_GOLD:
            continue
        other = r.choice([f for f in common if f not in has[t]])
        frame = r.choice(FRAMES)
        names = [said(skb, f, r) for f in picked]
        three.append((frame.format(f=", ".join(names[:2]) + " and " + names[2], t=word), gold))
        names.insert(r.randrange(4), said(skb, other, r))
        one_off.append((frame.format(f=", ".join(names[:3]) + " and " + names[3], t=word), gold))
        if len(three) == n:
            break
    return {"three": three, "one_off": one_off}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset")
    ap.add_argument("--root", required=True, help="the artifacts root of a finished build")
    ap.add_argument("--label", required=True, help="names the results file (before, after, …)")
    ap.add_argument("--against", help="a label measured before: McNemar p of the served hits against it")
    ap.add_argument("--relation", default="phenotype present", help="the relation from a target to its findings")
    ap.add_argument("--target", default="disease", help="the node type asked for")
    ap.add_argument("--n", type=int, default=200, help="questions per form")
    args = ap.parse_args()
    run = Run(profile="cpu", pythonpath=os.environ.get("PYTHONPATH", ""))
    served = GraspRetriever.from_artifacts(args.dataset, args.root)
    forms = questions(served.components.skb, args.relation, args.target, args.n, f"findings-lists-{args.dataset}")
    out = probe_forms(served, forms)
    if args.against:
        before = RESULTS / f"findings_lists_{args.dataset}_{args.against}.json"
        out["mcnemar_p_served_vs_" + args.against] = served_mcnemar(out["hits"], before)
    run.write(RESULTS / f"findings_lists_{args.dataset}_{args.label}.json", out, quiet=True)


if __name__ == "__main__":
    main()

"""Names as people type them, on a built dataset: Hit@1 of bare look-ups by a name's head, by the name with one typo,
and by the whole name, for the text branch alone and the served system.

    python benchmarks/name_lookups.py hpo --root dagster_home/artifacts --label after --against before

Questions are drawn from the SKB with this script's own random stream (seed ``name-lookups``, not the training
generators'), as a capability probe beside the evaluation splits, not a split of its own:

- ``head``: what comes before a name's first ``syndrome``/``disease``/``disorder`` (one or two words, four letters
  or more), lower-cased: "marfan", "ehlers danlos". Gold: every node whose name has that head.
- ``head_asked``: the same heads inside a question ("what is marfan", "angelman info", "tell me about noonan").
- ``typo``: a whole name of up to six words, lower-cased, with one slip in a word of five letters or more (a letter
  dropped, doubled or two swapped). Gold: the nodes of that name.
- ``name``: the same names as typed correctly (the control: a bare name answered by its node).

The questions are derived with plain string rules (no gazetteer code), so any checkout's code can be measured on the
same questions: ``--label before`` with the older code on ``PYTHONPATH`` and its artifacts under ``--root``. Per
question hits are kept, and ``--against LABEL`` adds McNemar's p against that label's served hits. Writes
``benchmarks/results/name_lookups_<dataset>_<label>.json``.
"""

from __future__ import annotations

import argparse
import os
import random
import re

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from harness import RESULTS, Run, probe_forms, served_mcnemar  # noqa: E402

from grasp_core.retriever import GraspRetriever  # noqa: E402
from grasp_core.textnorm import tokens  # noqa: E402

HEAD_WORDS = ("syndrome", "disease", "disorder")
ASKED = ("what is {}", "{} info", "tell me about {}", "{}?")


def head_of(name: str) -> str | None:
    """The words before a name's first head word (not its first word), or None."""
    words = name.split()
    for j, w in enumerate(words[1:], 1):
        if re.sub(r"\W", "", w.lower()) in HEAD_WORDS:
            return " ".join(words[:j]).strip(",;:-").lower()
    return None


def slip(word: str, r: random.Random) -> str:
    """One slip in a word of five letters or more. The training generator's rule, kept here on purpose: the probe's
    questions must not move when the generator (training data) changes."""
    i = r.randrange(1, len(word) - 1)
    kind = r.choice(("drop", "double", "swap"))
    if kind == "drop":
        return word[:i] + word[i + 1 :]
    if kind == "double":
        return word[:i] + word[i] + word[i:]
    return word[: i - 1] + word[i] + word[i - 1] + word[i + 1 :]


def questions(names: list[str], n: int, seed: str) -> dict[str, list[tuple[str, set[int]]]]:
    r = random.Random(seed)
    key = [" ".join(tokens(x)) for x in names]
    by_key: dict[str, set[int]] = {}
    for i, k in enumerate(key):
        by_key.setdefault(k, set()).add(i)
    heads: dict[str, set[int]] = {}
    for i, name in enumerate(names):
        head = head_of(name)
        if head and len(head) >= 4 and len(head.split()) <= 2:
            heads.setdefault(head, set()).add(i)
    heads = {h: g for h, g in heads.items() if " ".join(tokens(h)) not in by_key}  # a name itself is no head
    head_qs = [(h, heads[h]) for h in r.sample(sorted(heads), min(n, len(heads)))]
    asked_qs = [(r.choice(ASKED).format(h), gold) for h, gold in head_qs]
    pool = [
        i for i, x in enumerate(names) if len(x.split()) <= 6 and any(len(w) >= 5 and w.isalpha() for w in x.split())
    ]
    typo_qs, name_qs = [], []
    for i in r.sample(pool, min(n, len(pool))):
        words = names[i].lower().split()
        j = r.choice([j for j, w in enumerate(words) if len(w) >= 5 and w.isalpha()])
        gold = by_key[key[i]]
        name_qs.append((" ".join(words), gold))
        words[j] = slip(words[j], r)
        typo_qs.append((" ".join(words), gold))
    return {"head": head_qs, "head_asked": asked_qs, "typo": typo_qs, "name": name_qs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset")
    ap.add_argument("--root", required=True, help="the artifacts root of a finished build")
    ap.add_argument("--label", required=True, help="names the results file (before, after, …)")
    ap.add_argument("--against", help="a label measured before: McNemar p of the served hits against it")
    ap.add_argument("--n", type=int, default=200, help="questions per form")
    args = ap.parse_args()
    run = Run(profile="cpu", pythonpath=os.environ.get("PYTHONPATH", ""))
    served = GraspRetriever.from_artifacts(args.dataset, args.root)
    names = served.components.skb.nodes["name"].astype(str).tolist()
    forms = questions(names, args.n, f"name-lookups-{args.dataset}")
    out = probe_forms(served, forms)
    if args.against:
        before = RESULTS / f"name_lookups_{args.dataset}_{args.against}.json"
        out["mcnemar_p_served_vs_" + args.against] = served_mcnemar(out["hits"], before)
    run.write(RESULTS / f"name_lookups_{args.dataset}_{args.label}.json", out, quiet=True)


if __name__ == "__main__":
    main()

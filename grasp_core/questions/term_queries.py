"""Term look-up training queries: "what is the term for <a description>?", answered by the node described.

The STaRK protocol (:mod:`grasp_core.questions.querygen`) always asks for the neighbours of a named node; people
also ask for the name of a thing they can only describe ("What's the medical word for eyes that are set too far
apart?"). These queries teach that shape, for the ``train`` and ``val`` splits only (``test`` stays the STaRK
protocol's). A description is one of the node's aliases (the ``aliases`` column: a synonym, a lay term) or, when
the node has a ``definition`` text field, its first sentence; the gold is the node itself and every other node of
its type that has the description as its name or an alias. An SKB without aliases or definitions gets none.
Everything is drawn from ``random.Random(f"{seed}-terms")``: same SKB and seed, same queries.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict

import pandas as pd

from grasp_core.questions.querygen import training_frame
from grasp_core.skb.format import SKB
from grasp_core.textnorm import normalize

DEFINITION = "definition"
MIN_WORDS, MAX_WORDS = 2, 14  # descriptions shorter or longer than this are not asked about
PATTERNS = {
    "clinician": ("{d}: what is the {t} term?", "Preferred {t} term for {d}?", "Which {t} term describes {d}?"),
    "family": (
        "What is the medical word for {d}?",
        "Is there a name for {d}?",
        "What do doctors call {d}?",
        "What is it called when there is {d}?",
    ),
    "researcher": ("Which {t} corresponds to {d}?", "Name the {t} defined as {d}.", "What is the term for {d}?"),
    "terse": ("term for {d}", "{d} medical term", "{d} name"),
}


def _lower_first(text: str) -> str:
    """``Webbed toes`` -> ``webbed toes``; an abbreviation or symbol (``MFS``, ``pH``) stays as written."""
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


def _first_sentence(text: str) -> str:
    return re.split(r"(?<=[a-z0-9)])\.\s", text.strip(), maxsplit=1)[0].rstrip(".").strip()


def _descriptions(skb: SKB) -> list[tuple[int, str]]:
    """(node, description) pairs: every alias that is not the name, and first sentences of definitions."""
    out = [(i, a) for i, a in skb.alias_pairs() if normalize(a) != normalize(str(skb.nodes["name"].iat[i]))]
    if DEFINITION in skb.nodes:
        out += [(i, _first_sentence(d)) for i, d in enumerate(skb.nodes[DEFINITION]) if isinstance(d, str) and d]
    return [(i, _lower_first(d)) for i, d in out if MIN_WORDS <= len(d.split()) <= MAX_WORDS]


def term_queries(skb: SKB, n: int, seed: int, first_qid: int, val_share: float = 0.25) -> pd.DataFrame:
    """``n`` term look-up queries (qids from ``first_qid``; ``val_share`` of them ``val``, the rest ``train``)."""
    pairs = _descriptions(skb)
    columns = ["qid", "split", "query", "answer_ids", "template"]
    if not pairs or n <= 0:
        return pd.DataFrame({c: [] for c in columns})
    types = skb.nodes["type"].astype(str).to_numpy()
    named: dict[tuple[str, str], set[int]] = defaultdict(set)  # (type, normalized name or alias) -> nodes
    for i, name in enumerate(skb.nodes["name"].astype(str)):
        named[types[i], normalize(name)].add(i)
    for i, a in skb.alias_pairs():
        named[types[i], normalize(a)].add(i)
    r = random.Random(f"{seed}-terms")
    chosen = r.sample(pairs, min(n, len(pairs)))
    rows, seen = [], set()
    for node, description in chosen:
        register = r.choice(sorted(PATTERNS))
        text = r.choice(PATTERNS[register]).format(d=description, t=types[node].replace("/", " or "))
        text = text[:1].upper() + text[1:]
        if text in seen:
            continue
        seen.add(text)
        gold = sorted(named.get((types[node], normalize(description)), set()) | {node})
        rows.append((text, gold, f"term>{types[node]}"))
    return training_frame(rows, first_qid, val_share)

"""Training questions in the registers people type into a search box, generated from the knowledge base itself.

The STaRK protocol (:mod:`grasp_core.questions.querygen`) always asks for the neighbours of named nodes, in full
sentences. People also ask:

- **look-ups**: a bare name, asking for that node ("angelman", "BRCA2 gene", "gaucher disase", "what is MFS"):
  the node's name or one of its aliases (abbreviations and eponyms are aliases), sometimes lower-cased, sometimes
  with one typo, sometimes with its type word or a question around it. Gold: the node, and every other node of its
  type named so;
- **several findings -> which one**: two to four neighbours of one node, written as a list ("happy demeanor,
  seizures and a small head - which disease?"), each by an alias (a lay word, when it has one) or its name. The
  relation is the most frequent one between two types, the findings of the more numerous one (hpo: phenotypes,
  ``phenotype present`` to diseases and ``associated with`` to genes). In ``STRAY_SHARE`` of the lists of two or
  three findings one more is named that the node lacks (one a patient has and the KB does not annotate), so the
  strict intersection is empty or wrong and only a partial match answers. Gold: every node of the target type that
  has the most of the listed findings (all of them, when one has all; at most ``MAX_GOLD``).

These go to ``train`` and ``val`` only, never ``test``: they teach the planner and the reranker the intents, and
the evaluation keeps the STaRK protocol's questions and the hand-written sets. Nothing here reads or paraphrases a
hand-written question; a generated text equal to a held-out question (after normalization) is dropped by the
caller (:func:`grasp_core.datasets.build_queries`). Everything is drawn from ``random.Random(f"{seed}-intents")``.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from typing import NamedTuple

import pandas as pd

from grasp_core.questions.querygen import training_frame
from grasp_core.skb.format import SKB
from grasp_core.textnorm import normalize

MAX_NAME_WORDS = 6  # longer names are not typed as a bare look-up
MAX_GOLD = 20
STRAY_SHARE = 0.4  # findings lists that also name one finding the node lacks
LOOKUP_FORMS = ("{x}", "{x}", "{x}?", "{x} {t}", "what is {x}", "{x} info", "tell me about {x}")
FINDINGS_FORMS = (
    "{f} - which {t}?",
    "{t} with {f}",
    "{f}: what {t} could it be?",
    "which {t} has {f}",
    "{p}",
    "{f} {t}",
)


def _typo(word: str, r: random.Random) -> str:
    """One slip of the keyboard in a word of five letters or more: a letter dropped, doubled or swapped."""
    i = r.randrange(1, len(word) - 1)
    kind = r.choice(("drop", "double", "swap"))
    if kind == "drop":
        return word[:i] + word[i + 1 :]
    if kind == "double":
        return word[:i] + word[i] + word[i:]
    return word[: i - 1] + word[i] + word[i - 1] + word[i + 1 :]


def _typed(text: str, r: random.Random) -> str:
    """``text`` as typed: lower-cased half of the time, with one typo a third of the time."""
    if r.random() < 0.5 and not text.isupper():
        text = text.lower()
    words = text.split()
    long = [i for i, w in enumerate(words) if len(w) >= 5 and w.isalpha()]
    if long and r.random() < 0.33:
        i = r.choice(long)
        words[i] = _typo(words[i], r)
    return " ".join(words)


def _spoken(skb: SKB, node: int, r: random.Random) -> str:
    """A node as a person names it: an alias (a lay word) when it has one and the coin says so, else its name."""
    aliases = [a for a in skb.aliases_of(node) if len(a.split()) <= MAX_NAME_WORDS]
    name = str(skb.nodes["name"].iat[node])
    text = r.choice(aliases) if aliases and r.random() < 0.6 else name
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


def _join(items: list[str]) -> str:
    return ", ".join(items[:-1]) + " and " + items[-1]


def lookup_queries(
    skb: SKB, n: int, r: random.Random, forms: tuple[str, ...] = LOOKUP_FORMS
) -> list[tuple[str, list[int], str]]:
    """``n`` bare-name look-ups: (text, gold, template); ``forms`` wrap the name ``{x}`` (its type word: ``{t}``)."""
    types = skb.nodes["type"].astype(str).to_numpy()
    named: dict[tuple[str, str], set[int]] = defaultdict(set)
    for i, name in enumerate(skb.nodes["name"].astype(str)):
        named[types[i], normalize(name)].add(i)
    for i, a in skb.alias_pairs():
        named[types[i], normalize(a)].add(i)
    names = skb.nodes["name"].astype(str).tolist()
    pool = [i for i, name in enumerate(names) if 0 < len(name.split()) <= MAX_NAME_WORDS]
    out = []
    for node in r.sample(pool, min(n, len(pool))):
        said = _spoken(skb, node, r)
        gold = named.get((types[node], normalize(said)), set()) | {node}
        if len(gold) > MAX_GOLD:
            continue
        text = r.choice(forms).format(x=_typed(said, r), t=types[node].split("/")[0])
        out.append((text, sorted(gold), f"intent:lookup>{types[node]}"))
    return out


def _finding_relations(skb: SKB) -> list[tuple[str, str, str]]:
    """(relation, finding type, target type): per pair of distinct types, the relation with the most edges, the
    findings being the more numerous type (hpo: phenotypes -> diseases and genes)."""
    types = skb.nodes["type"].astype(str).to_numpy()
    e = skb.edges
    counts = Counter(zip(e["rel"].astype(str), types[e["src"].to_numpy()], types[e["dst"].to_numpy()]))
    best: dict[frozenset, tuple[int, str, str, str]] = {}
    for (rel, a, b), c in counts.items():
        key = frozenset((a, b))
        if a != b and (key not in best or c > best[key][0]):
            best[key] = (c, rel, a, b)
    size = Counter(types.tolist())
    pairs = [(rel, x, y) for _, rel, a, b in best.values() for x, y in ((a, b), (b, a))]
    return sorted((rel, x, y) for rel, x, y in pairs if size[x] > size[y])


class FindingsList(NamedTuple):
    findings: list[int]  # as listed
    gold: list[int]
    relation: str
    target: str  # node type


def findings_lists(skb: SKB, n: int, r: random.Random, stray: float = STRAY_SHARE) -> list[FindingsList]:
    """``n`` findings lists as node ids. ``stray`` of the lists of two or three
    findings of a node also name, at a random place, one finding of the same relation the node lacks; gold is every
    target with the most of the listed findings."""
    relations = _finding_relations(skb)
    if not relations:
        return []
    types = skb.nodes["type"].astype(str).to_numpy()
    src, dst, rels = skb.edges["src"].to_numpy(), skb.edges["dst"].to_numpy(), skb.edges["rel"].astype(str).to_numpy()
    by_relation = []
    for rel, finding, target in relations:
        found: dict[int, set[int]] = defaultdict(set)  # target node -> its findings
        for s, d in zip(src[rels == rel], dst[rels == rel]):
            for t, f in ((s, d), (d, s)):
                if types[t] == target and types[f] == finding:
                    found[int(t)].add(int(f))
        has: dict[int, set[int]] = defaultdict(set)  # finding -> targets that have it
        for t, fs in found.items():
            for f in fs:
                has[f].add(t)
        rich = sorted(t for t, fs in found.items() if len(fs) >= 3)
        if rich:
            by_relation.append((rel, target, found, has, sorted(has), rich))
    out = []
    for _ in range(n):
        if not by_relation:
            break
        rel, target, found, has, findings, rich = r.choice(by_relation)
        node = r.choice(rich)
        listed = r.sample(sorted(found[node]), r.randint(2, min(4, len(found[node]))))
        if len(listed) < 4 and len(findings) > len(found[node]) and r.random() < stray:
            extra = r.choice(findings)
            while extra in found[node]:
                extra = r.choice(findings)
            listed.insert(r.randrange(len(listed) + 1), extra)
        matched = Counter(t for f in listed for t in has[f])
        most = max(matched.values())
        gold = sorted(t for t, c in matched.items() if c == most)
        if len(gold) <= MAX_GOLD:
            out.append(FindingsList(listed, gold, rel, target))
    return out


def findings_queries(
    skb: SKB, n: int, r: random.Random, forms: tuple[str, ...] = FINDINGS_FORMS
) -> list[tuple[str, list[int], str]]:
    """``n`` "several findings -> which one?" questions (:func:`findings_lists`): (text, gold, template); ``forms``
    wrap the listed findings ``{f}`` (or ``{p}``, joined by "+"; the target type word: ``{t}``)."""
    out = []
    for listed, gold, _, target in findings_lists(skb, n, r):
        said = [_spoken(skb, f, r) for f in listed]
        text = r.choice(forms).format(
            f=_join(said) if r.random() < 0.7 else ", ".join(said), p=" + ".join(said), t=target.split("/")[0]
        )
        out.append((text, gold, f"intent:findings>{target}"))
    return out


def intent_queries(skb: SKB, n: int, seed: int, first_qid: int, val_share: float = 0.25) -> pd.DataFrame:
    """``n`` questions, half look-ups and half findings lists (qids from ``first_qid``; ``val_share`` of them
    ``val``, the rest ``train``), de-duplicated by text."""
    r = random.Random(f"{seed}-intents")
    rows = lookup_queries(skb, n - n // 2, r) + findings_queries(skb, n // 2, r)
    r.shuffle(rows)
    unique: dict[str, tuple[str, list[int], str]] = {}
    for row in rows:
        unique.setdefault(normalize(row[0]), row)
    rows = list(unique.values())
    return training_frame(rows, first_qid, val_share)

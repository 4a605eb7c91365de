"""Synthetic SKBs with the exact STaRK schemas (``docs/design.md``): ``synth-amazon``, ``synth-mag``, ``synth-prime``.

``build_synth_skb(kind, scale, seed)`` returns an :class:`SKB` (no queries; :mod:`grasp_core.questions.querygen`
adds them).

How a graph is made, in order:

1. **Nodes.** Each node type gets its count (``scale`` × the real STaRK count, at least ``MIN_NODES_PER_TYPE``),
   a *topic* (an organ system, a shopping domain, a research area; Zipf-distributed so some topics are big)
   and a *popularity* weight (Pareto, tail index ``PARETO_ALPHA``).
2. **Edges.** Per relation, endpoints are drawn in proportion to popularity (mixed half-and-half with uniform
   so that every node can be reached), the second endpoint from the first one's topic with probability
   ``coherence`` (capped so a topic's pairs are never more than ~30% used), duplicates and self-loops removed,
   and drawn again until the relation has its edge count (the last rounds draw uniformly, so dense relations
   whose hub pairs are saturated still reach it). Degrees are therefore heavy-tailed
   (a few hubs, a long tail), as in real graphs. ``one_per_src`` relations (a product's brand, its colour)
   give each source node at most one edge.
3. **Text.** Names and text fields come from the topic's word lists and small grammars
   (``synth_text.py``), with synonyms (:mod:`grasp_core.questions.synonyms`), so related nodes share words and a
   name and its description often use different words for the same thing. Some fields are read off the graph (a
   product's ``brand`` field is its ``has_brand`` neighbour's name, an author's ``paper_count`` is its ``writes``
   degree).

Scale. ``full`` matches STaRK's counts: Prime 129,375 nodes / 8,100,498 edges, Amazon 1,035,542 / 9,443,802,
MAG 1,872,968 / 39,802,116. STaRK stores each undirected edge in both directions; here every synthetic
edge is distinct and stored once, so a ``full`` graph has STaRK's *row* count (what a graph store loads), i.e.
twice STaRK's distinct-edge density. Per-relation counts follow PrimeKG's ``kg.csv``; the Amazon and MAG
splits across relations (and Amazon's brand/category/colour counts) are approximations, documented at
their specs. A fraction ``f`` scales every count by ``f``; a relation never fills more than ``MAX_DENSITY``
of its possible pairs (this bites only at toy sizes). ``full`` Prime is benchmarked in
``benchmarks/build_synth_prime.py``; ``full`` Amazon/MAG build the same way but need several GiB and minutes.

Determinism: one ``numpy`` generator and one ``random.Random``, both seeded from ``seed``; same inputs, same SKB.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from grasp_core.questions.synonyms import swap_synonym
from grasp_core.skb.format import ALIAS_TEXT_FIELDS, ALIASES, SKB, aliases_from_fields, empty_queries, validate
from grasp_core.sources import synth_text as W
from grasp_core.sources.synth_specs import DatasetSpec, RelationSpec, resolve_scale, spec_of

MIN_NODES_PER_TYPE = 6
MAX_DENSITY = 0.1
PARETO_ALPHA = 1.3
MAX_TOPUP_ROUNDS = 12


def build_synth_skb(kind: str, scale: str | float = "tiny", seed: int = 0) -> SKB:
    """Build ``synth-<kind>`` (``kind`` in amazon, mag, prime) at ``scale``; deterministic given ``seed``."""
    spec = spec_of(kind)
    frac = resolve_scale(kind, scale)
    rng = np.random.default_rng(seed)
    pyrng = random.Random(seed)

    counts = {t: max(MIN_NODES_PER_TYPE, round(n * frac)) for t, n in spec.full_nodes.items()}
    types = np.repeat(np.array(list(counts), dtype=object), list(counts.values()))
    offsets = dict(zip(counts, np.cumsum([0, *counts.values()])[:-1].tolist()))
    n_topics = len(spec.topics)
    topic_p = 1.0 / np.arange(1, n_topics + 1) ** 0.8
    topics = rng.choice(n_topics, size=len(types), p=topic_p / topic_p.sum())
    popularity = (1.0 - rng.random(len(types))) ** (-1.0 / PARETO_ALPHA)
    pools = {t: _Pool(np.arange(o, o + counts[t]), topics, popularity, n_topics) for t, o in offsets.items()}

    edge_parts = []
    for r in spec.relations:
        src, dst = _sample_relation(rng, r, pools[r.src], pools[r.dst], frac, len(types))
        edge_parts.append((src, dst, r.name))
    rel_names = list(dict.fromkeys(name for _, _, name in edge_parts))
    edges = pd.DataFrame(
        {
            "src": np.concatenate([s for s, _, _ in edge_parts]).astype(np.int64),
            "rel": np.array(rel_names, dtype=object)[
                np.concatenate([np.full(len(s), rel_names.index(n), np.int32) for s, _, n in edge_parts])
            ],
            "dst": np.concatenate([d for _, d, _ in edge_parts]).astype(np.int64),
        }
    )

    graph = _GraphView(edges, len(types), types)
    nodes = pd.DataFrame({"node_id": np.arange(len(types), dtype=np.int64), "type": types})
    nodes["key"] = _keys(counts)
    nodes["name"] = None
    schema = spec.schema
    for f in schema.text_fields:
        nodes[f] = None
    text_of = _TEXT[kind]
    for t in sorted(offsets, key=lambda t: len(spec.node_types[t])):  # name-only types first: others cite them
        ids = np.arange(offsets[t], offsets[t] + counts[t])
        names, fields = text_of(t, ids, topics[ids], pyrng, graph, spec)
        graph.names[ids] = _dedupe(names, t)
        nodes.loc[ids, "name"] = graph.names[ids]
        for f, values in fields.items():
            nodes.loc[ids, f] = values
    nodes = nodes[["node_id", "key", "type", "name", *schema.text_fields]].copy()
    nodes[ALIASES] = aliases_from_fields(nodes, ALIAS_TEXT_FIELDS)  # gene/protein aliases (synth-prime)
    skb = SKB(schema, nodes, edges, empty_queries())
    validate(skb)
    return skb


def _keys(counts: dict[str, int]) -> list[str]:
    return [f"{t}:{i}" for t, n in counts.items() for i in range(n)]


def _dedupe(names: Sequence[str], node_type: str) -> list[str]:
    """Make names unique within a type: the k-th repeat gets ``" k"`` appended (gene symbols a letter)."""
    s = pd.Series(list(names), dtype=object)
    k = s.groupby(s).cumcount().to_numpy()
    if node_type == "author":  # real author names repeat; keys tell them apart
        return s.tolist()
    gene = node_type == "gene/protein"
    return [
        n if j == 0 else (f"{n}{W.LETTERS[(j - 1) % 26]}{(j - 1) // 26 or ''}" if gene else f"{n} {j + 1}")
        for n, j in zip(s.tolist(), k)
    ]


# ------------------------------------------------------------------------------------------ sampling
class _Pool:
    """The nodes of one type, sorted by topic, with cumulative draw probabilities for O(log n) sampling."""

    def __init__(self, ids: np.ndarray, topics: np.ndarray, popularity: np.ndarray, n_topics: int):
        order = np.argsort(topics[ids], kind="stable")
        self.ids = ids[order]
        self.topics = topics[self.ids]
        w = popularity[self.ids]
        p = 0.5 * w / w.sum() + 0.5 / len(w)
        self.cum = np.cumsum(p)
        self.cum /= self.cum[-1]
        starts = np.searchsorted(self.topics, np.arange(n_topics), "left")
        ends = np.searchsorted(self.topics, np.arange(n_topics), "right")
        self.has_topic = ends > starts
        self.lo = np.where(starts > 0, self.cum[np.maximum(starts - 1, 0)], 0.0)
        self.hi = np.where(self.has_topic, self.cum[np.maximum(ends - 1, 0)], 0.0)
        self.topic_size = ends - starts

    def __len__(self) -> int:
        return len(self.ids)

    def _at(self, u: np.ndarray) -> np.ndarray:
        return np.minimum(np.searchsorted(self.cum, u, "right"), len(self.ids) - 1)

    def draw(self, rng: np.random.Generator, k: int) -> np.ndarray:
        """``k`` positions (into ``self.ids``) drawn by popularity."""
        return self._at(rng.random(k))

    def draw_in(self, rng: np.random.Generator, topics: np.ndarray) -> np.ndarray:
        """One position per entry of ``topics``, drawn by popularity inside that topic (anywhere if it is empty)."""
        ok = self.has_topic[topics]
        u = rng.random(len(topics))
        u = np.where(ok, self.lo[topics] + u * (self.hi[topics] - self.lo[topics]), u)
        return self._at(u)


def _sample_relation(rng, r: RelationSpec, src: _Pool, dst: _Pool, frac: float, n_nodes: int):
    same = r.src == r.dst
    pairs = len(src) * (len(src) - 1) // 2 if same else len(src) * len(dst)
    m = min(max(1, round(r.full_edges * frac)), int(MAX_DENSITY * pairs) or 1)
    if r.one_per_src:
        m = min(m, len(src))
        pos = rng.choice(len(src), size=m, replace=False)
        topics = src.topics[pos]
        coherent = rng.random(m) < r.coherence
        d = np.where(coherent, dst.draw_in(rng, topics), dst.draw(rng, m))
        return src.ids[pos], dst.ids[d]
    within = float(np.dot(src.topic_size, dst.topic_size))
    coherence = min(r.coherence, 0.3 * within / m)
    keys = np.empty(0, np.int64)
    for round_ in range(MAX_TOPUP_ROUNDS):
        k = int((m - len(keys)) * 1.3) + 16
        if round_ < MAX_TOPUP_ROUNDS // 2:
            s = src.draw(rng, k)
            d = np.where(rng.random(k) < coherence, dst.draw_in(rng, src.topics[s]), dst.draw(rng, k))
        else:  # hub pairs are saturated: finish the count with uniform pairs
            s, d = rng.integers(len(src), size=k), rng.integers(len(dst), size=k)
        a, b = src.ids[s], dst.ids[d]
        if same:
            a, b = np.minimum(a, b), np.maximum(a, b)
            keep = a != b
            a, b = a[keep], b[keep]
        keys = _sorted_unique(np.concatenate([keys, a * n_nodes + b]))
        if len(keys) >= m:
            break
    if len(keys) > m:
        keys = np.sort(rng.choice(keys, size=m, replace=False))
    a, b = keys // n_nodes, keys % n_nodes
    flip = rng.random(len(a)) < 0.5 if same else np.zeros(len(a), bool)  # same-type edges: no id order
    return np.where(flip, b, a), np.where(flip, a, b)


def _sorted_unique(x: np.ndarray) -> np.ndarray:
    """``np.unique`` for int64 keys via one in-place sort (numpy's hash-based unique is much slower here)."""
    x.sort()
    return x[np.concatenate(([True], x[1:] != x[:-1]))] if len(x) else x


class _GraphView:
    """What text generation reads off the graph: neighbours over one relation, per-relation degrees."""

    def __init__(self, edges: pd.DataFrame, n: int, types: np.ndarray):
        self.edges, self.n, self.types = edges, n, types
        self.names = np.empty(n, dtype=object)  # filled type by type during text generation

    def _rel(self, rel: str) -> tuple[np.ndarray, np.ndarray]:
        mask = (self.edges["rel"] == rel).to_numpy()
        return self.edges["src"].to_numpy()[mask], self.edges["dst"].to_numpy()[mask]

    def degree(self, rel: str) -> np.ndarray:
        s, d = self._rel(rel)
        return np.bincount(np.concatenate([s, d]), minlength=self.n)

    def first_neighbour(self, rel: str) -> np.ndarray:
        """For each node, one neighbour over ``rel`` (the source side's target), or -1."""
        s, d = self._rel(rel)
        out = np.full(self.n, -1, np.int64)
        out[s] = d
        return out


# ------------------------------------------------------------------------------------------------ text
def _syllable_name(r: random.Random, n_syll: tuple[int, int]) -> str:
    return "".join(r.choice(W.SYLLABLES) for _ in range(r.randint(*n_syll))).capitalize()


def _gene_symbol(r: random.Random) -> str:
    s = f"{r.choice(W.PRIME_GENE_PREFIXES)}{r.randint(1, 60)}"
    return s + (f"{r.choice(W.LETTERS[:8])}{r.randint(1, 9)}" if r.random() < 0.3 else "")


TextFn = Callable[..., tuple[list[str], dict[str, list[str | None]]]]


def _prime_text(t: str, ids, topics, r: random.Random, graph: _GraphView, spec: DatasetSpec):
    topic_names = spec.topics
    lex = [W.PRIME_TOPICS[topic_names[k]] for k in topics]
    names: list[str] = []
    f: dict[str, list] = {k: [] for k in spec.node_types[t]}
    src = W.PRIME_SOURCES[t]
    for organs, symptoms, molecules in lex:
        organ, organ2 = r.choice(organs), r.choice(organs)
        sym, sym2, sym3 = r.sample(symptoms, 3) if len(symptoms) >= 3 else (symptoms * 3)[:3]
        mol = r.choice(molecules)
        f["source"].append(r.choice(src))
        if t == "disease":
            cond = r.choice(W.PRIME_CONDITIONS)
            style = r.random()
            if style < 0.5:
                names.append(f"{r.choice(W.PRIME_MODIFIERS)} {organ} {cond}")
            elif style < 0.75:
                names.append(f"{r.choice(W.PRIME_EPONYMS)} {cond}")
            else:
                names.append(f"{organ} {cond} type {r.randint(1, 12)}")
            f["definition"].append(
                f"{W.article(swap_synonym(r, r.choice(W.PRIME_MODIFIERS))).capitalize()} {cond} affecting the "
                f"{swap_synonym(r, organ2)}, characterized by {sym} and {sym2}."
            )
            f["symptoms"].append(
                f"Patients typically present with {sym}, {sym3} and {swap_synonym(r, 'reduced')} {mol} levels."
            )
            f["causes"].append(
                f"Caused by {r.choice(('loss-of-function', 'missense', 'truncating', 'de novo'))} "
                f"variants in genes that control {mol} {r.choice(W.PRIME_PROCESSES)}."
            )
        elif t == "gene/protein":
            names.append(_gene_symbol(r))
            f["alias"].append(f"{_gene_symbol(r)}; {mol.upper().replace(' ', '')[:6]}{r.randint(1, 9)}")
            f["type_of_gene"].append("protein-coding" if r.random() < 0.9 else r.choice(("ncRNA", "pseudo", "snoRNA")))
            f["summary"].append(
                f"This gene encodes a {r.choice(W.PRIME_PROTEIN_CLASSES)} that "
                f"{r.choice(W.PRIME_GENE_ACTIONS)} {mol}. The encoded protein is highly expressed "
                f"in the {swap_synonym(r, organ)}. Variants in this gene have been linked to {sym}."
            )
            d1, d2 = r.sample(W.PRIME_DOMAINS, 2)
            f["interpro"].append(f"{d1} domain; {d2} superfamily")
        elif t == "drug":
            name = _syllable_name(r, (2, 3)) + r.choice(W.PRIME_DRUG_SUFFIXES)
            names.append(name)
            cls = r.choice(W.PRIME_DRUG_CLASSES)
            f["description"].append(
                f"{name} is a {cls} available as {r.choice(W.PRIME_DRUG_FORMS)}. It "
                f"{r.choice(W.PRIME_DRUG_ACTIONS)} {mol} signaling in the {swap_synonym(r, organ)}."
            )
            f["indication"].append(
                f"Indicated for the treatment of {sym} in patients with {swap_synonym(r, organ2)} "
                f"{r.choice(W.PRIME_CONDITIONS)}."
            )
            f["mechanism_of_action"].append(
                f"{name} {r.choice(W.PRIME_DRUG_ACTIONS)} the {mol} receptor, which reduces {sym2}."
            )
            f["category"].append(cls)
        elif t == "pathway":
            names.append(f"{r.choice(W.PRIME_PATHWAY_HEADS)} {mol}" + (f" in {organ}" if r.random() < 0.3 else ""))
            f["summation"].append(
                f"This pathway describes how {mol} {r.choice(W.PRIME_PROCESSES)} is coordinated "
                f"in the {swap_synonym(r, organ)}. Defects in its components contribute to {sym}."
            )
        elif t == "anatomy":
            names.append(
                organ
                if r.random() < 0.1
                else f"{r.choice(W.PRIME_ANATOMY_ADJ)} {r.choice(W.PRIME_ANATOMY_PARTS)} of {organ}"
            )
            f["definition"].append(
                f"{W.article(r.choice(W.PRIME_ANATOMY_PARTS)).capitalize()} that is part of the {swap_synonym(r, organ)} "
                f"and is rich in {mol}."
            )
        elif t == "effect/phenotype":
            names.append(
                sym if r.random() < 0.15 else f"{r.choice(W.PRIME_ABNORMAL)} {organ} {r.choice(W.PRIME_FEATURES)}"
            )
            f["definition"].append(
                f"A deviation from the normal {r.choice(W.PRIME_FEATURES)} of the "
                f"{swap_synonym(r, organ)}, often accompanied by {sym2}."
            )
        elif t == "biological_process":
            names.append(f"{r.choice(W.PRIME_REGULATION)} {mol} {r.choice(W.PRIME_PROCESSES)}".strip())
            f["definition"].append(
                f"Any process that modulates the frequency, rate or extent of {mol} "
                f"{r.choice(W.PRIME_PROCESSES)} in the {swap_synonym(r, organ)}."
            )
        elif t == "molecular_function":
            names.append(f"{mol} {r.choice(W.PRIME_MF_ACTIVITIES)}")
            f["definition"].append(
                f"Interacting selectively with {mol} to enable {r.choice(W.PRIME_PROCESSES)} "
                f"in {swap_synonym(r, organ)} cells."
            )
        elif t == "cellular_component":
            names.append(f"{mol} {r.choice(W.PRIME_COMPONENTS)}")
            f["definition"].append(
                f"{W.article(r.choice(W.PRIME_COMPONENTS)).capitalize()} that contains {mol} and supports "
                f"{r.choice(W.PRIME_PROCESSES)}."
            )
        else:  # exposure
            names.append(
                f"{r.choice(('', 'occupational ', 'prenatal ', 'chronic ', 'residential '))}"
                f"{r.choice(W.PRIME_EXPOSURES)} {r.choice(('exposure', 'inhalation', 'dust', 'fumes', 'ingestion', 'residue', 'vapor', 'contamination', 'poisoning'))}"
            )
            f["definition"].append(
                f"Environmental contact with {names[-1].split(' ', 1)[-1]} that has been linked "
                f"to {sym} and {swap_synonym(r, organ)} damage."
            )
    return names, f


def _amazon_text(t: str, ids, topics, r: random.Random, graph: _GraphView, spec: DatasetSpec):
    domains = spec.topics
    n = len(ids)
    if t == "category":
        combos = [f"{d} {noun}" for noun in W.AMAZON_CATEGORY_NOUNS for d in domains]
        return [
            f"{domains[k]} {r.choice(W.AMAZON_CATEGORY_NOUNS)}"
            if i >= len(combos)
            else combos[(i * 7919) % len(combos)]
            for i, k in enumerate(topics)
        ], {}
    if t == "color":
        combos = [f"{m} {c}".strip() for m in W.AMAZON_COLOR_MODIFIERS for c in W.AMAZON_COLORS]
        return [combos[(i * 7919) % len(combos)] for i in range(n)], {}
    if t == "brand":
        return [_syllable_name(r, (2, 3)) + r.choice(W.AMAZON_BRAND_SUFFIXES) for _ in range(n)], {}
    brand_of = graph.first_neighbour("has_brand")[ids]
    color_of = graph.first_neighbour("has_color")[ids]
    names: list[str] = []
    f: dict[str, list[str | None]] = {k: [] for k in spec.node_types[t]}
    all_nouns = [noun for nouns, _ in W.AMAZON_DOMAINS.values() for noun in nouns]
    for k, b, c in zip(topics, brand_of, color_of):
        nouns, uses = W.AMAZON_DOMAINS[domains[k]]
        noun, use, use2 = r.choice(nouns), r.choice(uses), r.choice(uses)
        adj, mat = r.choice(W.AMAZON_ADJECTIVES), r.choice(W.AMAZON_MATERIALS)
        brand = graph.names[b] if b >= 0 else None
        title = " ".join(x for x in (brand, adj.title(), mat.title(), noun.title()) if x)
        if r.random() < 0.5:
            title += f" for {use.title()}"
        if c >= 0 and r.random() < 0.6:
            title += f", {graph.names[c]}"
        names.append(title)
        f["brand"].append(brand)
        feats = r.sample(W.AMAZON_FEATURES, r.randint(2, 4))
        f["description"].append(
            f"This {swap_synonym(r, adj)} {swap_synonym(r, noun)} is made from {swap_synonym(r, mat)} and is ideal for "
            f"{use}. Designed for {use2}. Highlights: {feats[0].lower()}."
        )
        f["features"].append("; ".join(feats))
        reviews = []
        for _ in range(r.randint(1, 3)):
            reviews.append(
                f"{r.choice(W.AMAZON_REVIEW_SUMMARIES)}: I use this {swap_synonym(r, noun)} for {r.choice(uses)}. "
                f"{r.choice(W.AMAZON_OPINIONS)} Better than my old {r.choice(all_nouns)}."
            )
        f["reviews"].append(" | ".join(reviews))
    return names, f


def _mag_text(t: str, ids, topics, r: random.Random, graph: _GraphView, spec: DatasetSpec):
    areas = spec.topics
    names: list[str] = []
    f: dict[str, list[str | None]] = {k: [] for k in spec.node_types[t]}
    if t == "paper":
        for k in topics:
            terms, methods = W.MAG_AREAS[areas[k]]
            tt, t2 = r.sample(terms, 2)
            adj = r.choice(W.MAG_ADJECTIVES)
            fill = {
                "t": tt,
                "t2": t2,
                "m": r.choice(methods),
                "adj": adj,
                "adj_a": W.article(adj),
                "n": r.randint(2, 9),
            }
            title = r.choice(W.MAG_TITLE_PATTERNS).format(**fill)
            names.append(title[0].upper() + title[1:])
            sentences = r.sample(W.MAG_ABSTRACT_SENTENCES, r.randint(3, 5))
            f["abstract"].append(" ".join(s.format(**{**fill, "t": swap_synonym(r, tt)}) for s in sentences))
            f["publication_date"].append(f"{r.randint(1990, 2021)}-{r.randint(1, 12):02d}-01")
            f["venue"].append(r.choice(W.MAG_VENUES))
        return names, f
    if t == "author":
        names = [
            f"{r.choice(W.MAG_FIRST_NAMES)} "
            + (f"{r.choice(W.LETTERS)}. " if r.random() < 0.5 else "")
            + r.choice(W.MAG_LAST_NAMES)
            for _ in ids
        ]
        papers = graph.degree("author___writes___paper")[ids]
    elif t == "institution":
        for k in topics:
            inst = r.choice(W.MAG_INSTITUTION_PATTERNS).format(p=r.choice(W.MAG_PLACES))
            names.append(f"Department of {areas[k].title()}, {inst}" if r.random() < 0.3 else inst)
        papers = graph.degree("author___affiliated_with___institution")[ids] * 3
    else:
        for k in topics:
            terms, methods = W.MAG_AREAS[areas[k]]
            style = r.random()
            if style < 0.3:
                names.append(r.choice(terms + methods))
            elif style < 0.6:
                names.append(f"{r.choice(W.MAG_ADJECTIVES)} {r.choice(terms)}")
            else:
                names.append(f"{r.choice(terms + methods)} for {r.choice(terms)}")
        papers = graph.degree("paper___has_topic___field_of_study")[ids]
    f["paper_count"] = [str(int(p)) for p in papers]
    f["citation_count"] = [str(int(p * r.randint(1, 40))) for p in papers]
    return names, f


_TEXT: dict[str, TextFn] = {"prime": _prime_text, "amazon": _amazon_text, "mag": _mag_text}

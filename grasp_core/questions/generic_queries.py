"""Schema-generic query synthesis by the STaRK protocol: questions for any SKB, from its schema and its text.

hpo and ``synth-*`` keep their tuned templates (:mod:`grasp_core.questions.querygen`); every other SKB that ships no
queries gets these. The grounding, the property rules and the gold are querygen's (:func:`querygen.ground`):

1. **Metapaths.** Every path of 1..``max_hops`` typed hops the schema allows (a relation is walked either way,
   undirected, except a relation within one type whose name reads as a verb, ``cites``, ``imports``, which is
   walked one way, ``|down`` or ``|up`` (:func:`grasp_core.questions.wording.directed`); a hop straight back over the
   relation it came by is allowed once, "authors of a paper that X wrote", never twice in a row), and every intersection of a one-hop path with another path of ≤ 2 hops meeting at the
   same target type. A template is drawn by kind (``kind_weights``: 1, 2, 3 hops, intersection), then a
   relation of that kind uniformly, then a template using it, so that every relation gets questions however
   many paths the schema has around the others.
2. **Property.** querygen's phrase rules (no number, no stopword or generic word, never the gold's name), on
   the fields the data shows to be descriptive: a field whose values look like identifiers (one token with a
   digit, a separator or all capitals: ids, dates, codes) gives none; a field of short terms (lists separated by
   ``;`` or ``|``, or short values) gives whole terms; other fields give noun phrases (:func:`property_rules`).
3. **Wording.** :mod:`grasp_core.questions.wording`: a register (question, request, conversational, terse), the target
   type's noun, one relation clause per path (hops nested from the anchor outwards), the property clause of the
   property's field; anchors by name, alias (the ``aliases`` column, when the SKB has one) or a light paraphrase.
4. **Gold** = every candidate satisfying the relation and the property (querygen's rule). Queries are
   deduplicated by text and by grounding (template, anchors, property: one wording per grounding, so no question
   is a rewording of one in another split) and split train/val/test after a seeded shuffle (disjoint by query text); ``template``
   and ``register`` go to analysis columns only.

A small SKB may not hold ``n_queries`` distinct questions: the synthesizer stops after ``stale_attempts``
groundings in a row found nothing new and returns what it has, or fails with a one-line error below
``min_queries``.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from grasp_core.errors import GraspError
from grasp_core.questions.config import GenericConfig, QueryGenConfig
from grasp_core.questions.kb_graph import Graph
from grasp_core.questions.properties import NON_PROPERTY_FIELDS, TERM_FIELDS, PropertyRules
from grasp_core.questions.querygen import (
    Aliases,
    Grounding,
    SynthQuery,
    Template,
    anchor_text,
    ground,
    queries_frame,
    relation_name,
    reverse_hop,
)
from grasp_core.questions.wording import Wording, default_field_phrases, directed, load_wording, type_noun
from grasp_core.skb.format import SKB
from grasp_core.skb.schema import Schema

KINDS = ("1-hop", "2-hop", "3-hop", "intersection")
_TERM_SPLIT = re.compile(r"\s*[;|]\s*")
_IDENTIFIER_MARKS = re.compile(r"[0-9:/._#@-]")


def metapaths(schema: Schema, max_hops: int = 3) -> list[tuple[str, ...]]:
    """Every typed path ``(anchor type, rel, type, ..., target type)`` of 1..``max_hops`` hops."""
    hops: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for r in schema.relations:
        if directed(r):
            hops[r.src] += [(f"{r.name}|down", r.dst), (f"{r.name}|up", r.dst)]
            continue
        hops[r.src].append((r.name, r.dst))
        if r.src != r.dst:
            hops[r.dst].append((r.name, r.src))
    out: list[tuple[str, ...]] = []
    frontier: list[tuple[str, ...]] = [(t,) for t in schema.node_types]
    for _ in range(max_hops):
        grown = []
        for path in frontier:
            for rel, to in hops[path[-1]]:
                back = len(path) >= 3 and path[-2] == reverse_hop(rel) and path[-3] == to  # straight back
                twice = back and len(path) >= 5 and path[-4] == rel and path[-5] == path[-1]
                if not twice:
                    grown.append((*path, rel, to))
        out += grown
        frontier = grown
    return out


def templates_by_kind(schema: Schema, max_hops: int = 3) -> dict[str, list[Template]]:
    """The schema's templates per kind (:data:`KINDS`)."""
    paths = metapaths(schema, max_hops)
    out: dict[str, list[Template]] = {k: [] for k in KINDS}
    for p in paths:
        out[f"{len(p) // 2}-hop"].append(Template((p,)))
    by_target: dict[str, list[tuple[str, ...]]] = defaultdict(list)
    for p in paths:
        if len(p) <= 5:
            by_target[p[-1]].append(p)
    for target_paths in by_target.values():
        for i, a in enumerate(target_paths):
            if len(a) != 3:
                continue
            for b in target_paths[i:]:
                out["intersection"].append(Template((a, b)))
    return out


def relations_of(tpl: Template) -> list[tuple[str, str, str]]:
    """The typed relations a template walks: ``(rel, type, type)`` with the two types sorted."""
    out = []
    for p in tpl.paths:
        for i in range(0, len(p) - 2, 2):
            a, b = sorted((p[i], p[i + 2]))
            out.append((relation_name(p[i + 1]), a, b))
    return out


def property_rules(skb: SKB, sample: int = 2000) -> PropertyRules:
    """The fields a property may come from, read off the data (querygen's known field names included)."""
    skip, terms = set(NON_PROPERTY_FIELDS), set(TERM_FIELDS)
    for f in skb.schema.text_fields:
        values = [v for v in skb.nodes[f].head(sample * 4) if isinstance(v, str) and v.strip()][:sample]
        if not values:
            skip.add(f)
            continue
        identifiers = sum(" " not in v.strip() and bool(_IDENTIFIER_MARKS.search(v) or v.isupper()) for v in values)
        if identifiers > len(values) / 2:
            skip.add(f)
            continue
        segments = [s for v in values for s in _TERM_SPLIT.split(v) if s]
        if segments and np.mean([len(s.split()) for s in segments]) <= 4:
            terms.add(f)
    return PropertyRules(frozenset(skip), frozenset(terms))


def skb_aliases(skb: SKB) -> dict[int, list[tuple[str, str]]]:
    """Anchor names from the SKB's ``aliases`` column (list of strings per node), when it has one."""
    if "aliases" not in skb.nodes:
        return {}
    out = {}
    for i, names in enumerate(skb.nodes["aliases"]):
        if names is not None and len(names):
            out[i] = [(str(a), "alias") for a in names if isinstance(a, str) and a.strip()]
    return out


class _Drawer:
    """Draws a template: a kind by weight, a relation of that kind uniformly, a template using it uniformly."""

    def __init__(self, by_kind: dict[str, list[Template]], weights: Sequence[float]):
        self.kinds, self.weights, self.by_rel = [], [], []
        for kind, w in zip(KINDS, weights):
            if by_kind.get(kind) and w > 0:
                rels: dict[tuple[str, str, str], list[Template]] = defaultdict(list)
                for tpl in by_kind[kind]:
                    for rel in dict.fromkeys(relations_of(tpl)):
                        rels[rel].append(tpl)
                self.kinds.append(kind)
                self.weights.append(w)
                self.by_rel.append(sorted(rels.items()))
        if not self.kinds:
            raise GraspError("the schema has no relations: nothing to ask about (add edges and relations)")

    def draw(self, r: random.Random) -> tuple[str, Template]:
        i = r.choices(range(len(self.kinds)), weights=self.weights)[0]
        _, tpls = self.by_rel[i][r.randrange(len(self.by_rel[i]))]
        return self.kinds[i], tpls[r.randrange(len(tpls))]


def generic_queries(
    skb: SKB,
    n_queries: int,
    seed: int = 0,
    cfg: QueryGenConfig = QueryGenConfig(),
    gcfg: GenericConfig = GenericConfig(),
    wording: Wording | None = None,
    aliases: Aliases | None = None,
) -> list[tuple[SynthQuery, Worded]]:
    """Up to ``n_queries`` distinct queries with their groundings and wordings, in generation order."""
    rules = property_rules(skb)
    wording = wording or load_wording(None, skb.schema, rules.term_fields)
    aliases = skb_aliases(skb) if aliases is None else aliases
    drawer = _Drawer(templates_by_kind(skb.schema, gcfg.max_hops), gcfg.kind_weights)
    graph = Graph(skb)
    r = random.Random(seed)
    seen: set = set()  # question texts and groundings (template, anchors, property)
    out: list[tuple[SynthQuery, Worded]] = []
    stale = attempts = 0
    _, tpl = drawer.draw(r)
    tpl_tries = 0
    while len(out) < n_queries and stale < gcfg.stale_attempts and attempts < cfg.max_attempts_per_query * n_queries:
        attempts += 1
        stale += 1
        if tpl_tries >= cfg.tries_per_template:
            (_, tpl), tpl_tries = drawer.draw(r), 0
        tpl_tries += 1
        g = ground(graph, tpl, r, cfg, rules)
        if g is None:
            continue
        grounding = (tpl.id, tuple(g.anchors), g.property)
        if grounding in seen:  # the same question worded again: never twice, so never in two splits
            continue
        w = word(graph, tpl, g, wording, r, cfg, aliases)
        if w.text in seen:
            continue
        seen.update((grounding, w.text))
        out.append((SynthQuery(w.text, g.answers, tpl.id, g.anchors, g.property), w))
        stale = 0
        (_, tpl), tpl_tries = drawer.draw(r), 0
    if len(out) < min(gcfg.min_queries, n_queries):
        raise GraspError(
            f"found only {len(out)} distinct queries for {skb.schema.name!r} after {attempts} groundings: the SKB "
            f"is too small or too sparse (it needs edges between typed nodes and text fields to ask about)"
        )
    return out


def synthesize_generic(
    skb: SKB,
    n_queries: int,
    seed: int = 0,
    split_fractions: tuple[float, float, float] = (0.6, 0.2, 0.2),
    skb_dir: str | Path | None = None,
    cfg: QueryGenConfig = QueryGenConfig(),
    gcfg: GenericConfig = GenericConfig(),
    paraphrase_url: str | None = None,
    paraphrase_model: str = "",
) -> pd.DataFrame:
    """Generic queries over ``skb``: columns qid, split, query, answer_ids, template, register.

    ``skb_dir`` is where a ``wording.json`` may be (a user SKB's source directory); with ``paraphrase_url`` every
    question is offered to that OpenAI-compatible endpoint for rewording (:mod:`grasp_core.questions.paraphrase`)."""
    wording = load_wording(skb_dir, skb.schema, property_rules(skb).term_fields)
    made = generic_queries(skb, n_queries, seed, cfg, gcfg, wording)
    rows = [q for q, _ in made]
    if paraphrase_url:
        from dataclasses import replace

        from grasp_core.questions.paraphrase import paraphrase

        result = paraphrase([q.text for q in rows], [w.keep for _, w in made], paraphrase_url, paraphrase_model)
        rows = [replace(q, text=t) for q, t in zip(rows, result.texts)]
    return queries_frame(rows, seed, split_fractions, extra={"register": [w.register for _, w in made]})


@dataclass(frozen=True)
class Worded:
    register: str
    text: str
    keep: tuple[str, ...]  # how the question names each anchor, and its property phrase (a paraphrase keeps them)


def word(
    graph: Graph,
    tpl: Template,
    g: Grounding,
    wording: Wording,
    r: random.Random,
    cfg: QueryGenConfig,
    aliases: Aliases,
) -> Worded:
    """The question of a grounded template, in a register drawn at random."""
    register = r.choice(sorted(wording.registers))
    frames = wording.registers[register]
    singular, plural = r.choice(wording.types.get(tpl.target) or [type_noun(tpl.target)])
    names: list[str] = []
    rel = " and ".join(_path_clause(graph, p, a, wording, r, cfg, aliases, names) for p, a in zip(tpl.paths, g.anchors))
    keep = (*names, *([g.property.phrase] if g.property else []))
    if g.property is None:
        text = r.choice(frames["no_property"]).format(T=plural, t=singular, R=rel)
    else:
        f = g.property.field
        clauses = wording.fields.get(f) or default_field_phrases(f, False)
        clause = r.choice(clauses).format(p=g.property.phrase)
        text = r.choice(frames["property"]).format(T=plural, t=singular, R=rel, P=clause)
    if register == "terse":
        return Worded(register, text, keep)
    text = text[0].upper() + text[1:]
    if frames.get("contexts") and r.random() < cfg.distractor_prob:
        text = f"{r.choice(frames['contexts'])} {text}"
    return Worded(register, text, keep)


def _path_clause(
    graph: Graph,
    path: tuple[str, ...],
    anchor: int,
    wording: Wording,
    r: random.Random,
    cfg: QueryGenConfig,
    aliases: Aliases,
    names: list[str],
) -> str:
    """The relation clause of the target: hops nest from the anchor outwards ("written by an author affiliated
    with X"); how the anchor is named is appended to ``names``."""
    phrases = [r.choice(wording.hops[(path[i], path[i - 1], path[i + 1])]) for i in range(1, len(path), 2)]
    first_noun = wording.types.get(path[0]) or [type_noun(path[0])]
    typed = {} if any(n[0] in phrases[0] for n in first_noun) else wording.types  # not "with brand the brand X"
    x = anchor_text(graph, anchor, r, cfg, aliases, typed)
    names.append(x)
    for i, phrase in zip(range(1, len(path) - 2, 2), phrases):
        mid = r.choice(wording.types.get(path[i + 1]) or [type_noun(path[i + 1])])[0]
        x = f"{'an' if mid[:1] in 'aeiou' else 'a'} {mid} {phrase.format(x=x)}"
    return phrases[-1].format(x=x)


def template_kind(template: str) -> str:
    """``1-hop`` / ``2-hop`` / ``3-hop`` / ``intersection`` of a template id (``a>rel>b & c>rel>b``)."""
    return "intersection" if " & " in template else f"{template.count('>') // 2}-hop"


def synthesis_mix(queries: pd.DataFrame, top_templates: int = 15) -> dict[str, dict[str, int]]:
    """What ``grasp data stats`` prints of a synthesized query set: queries per relation (a query counts once
    for each relation its template walks), per template kind, per register (when recorded) and per template
    (the most frequent, the rest summed)."""
    templates = queries["template"].astype(str)
    rels: dict[str, int] = defaultdict(int)
    for tid in templates:
        for name in dict.fromkeys(relation_name(r) for p in tid.split(" & ") for r in p.split(">")[1::2]):
            rels[name] += 1
    out = {
        "relation": dict(sorted(rels.items())),
        "template kind": {k: int(v) for k, v in templates.map(template_kind).value_counts().sort_index().items()},
    }
    if "register" in queries:
        out["register"] = {str(k): int(v) for k, v in queries["register"].value_counts().sort_index().items()}
    counts = templates.value_counts()
    out["template"] = {str(k): int(v) for k, v in counts.head(top_templates).items()}
    if len(counts) > top_templates:
        out["template"][f"({len(counts) - top_templates} other templates)"] = int(counts.iloc[top_templates:].sum())
    return out

"""Query synthesis by the STaRK protocol, no LLM (``docs/design.md``), for ``hpo`` and the ``synth-*`` SKBs.

One query is made in four steps:

1. **Template and grounding.** A relational template is drawn from the dataset's list (:data:`TEMPLATES`):
   one metapath of 1–2 hops from an anchor type to the target type, or two such paths meeting at the
   target (intersection). A hop's relation may carry a direction: ``parent-child|down`` goes from a
   parent to its children (stored ``src`` → ``dst``), ``|up`` the other way; a plain relation is
   undirected. Every node type a dataset asks about is some template's target. A template is grounded
   *backwards*: a gold node of the target type is drawn, and each path is walked from it to an anchor
   (a random neighbour per hop), so intersections are never empty. The anchors are then walked
   *forwards* (type-checked hops, one ``scipy.sparse`` CSR matrix per relation and direction) to get the
   candidate set. Degenerate groundings are dropped: when every anchor has more than
   ``max_anchor_degree`` neighbours over its first hop (one selective anchor is enough for an intersection),
   or a walk reaches more than ``max_frontier`` nodes. Anchors are never answers. A drawn template is
   grounded again (``tries_per_template`` times) before another is drawn, so the target-type mix follows
   the template list rather than how easily each template grounds.
2. **Property.** A meaningful phrase of the gold node, scoped to the field it comes from: the rules are
   :mod:`grasp_core.questions.properties`.
3. **Wording.** hpo questions come from patterns per template and register (clinician, patient's family,
   researcher, terse search-box), :mod:`grasp_core.questions.hpo_questions`, with anchors named by name, exact
   synonym, abbreviation or lay synonym (the synonym kinds of ``hp.obo``, passed as ``aliases``). The
   ``synth-*`` SKBs name the target type (several nouns), the relation path (several participle phrases
   per hop, nested for two hops), the anchors (name, alias or light paraphrase) and the property inside
   one of several frames, sometimes after a distractor sentence (the tables: ``data/querygen_phrases.json``).
4. **Gold.** Every candidate that satisfies the relation *and* the property, where a node satisfies the
   property when the phrase's tokens occur, contiguously and within one clause, in the property's field of
   that node (tokens: lowercase alphanumeric runs). A query is kept when it has 1..``max_answers`` answers
   and the property narrows the candidates (unless the relation alone yields exactly one). When the
   relation alone yields 1..``max_answers`` candidates the query may also go without a property
   (``no_property_prob``); a target type without a property field (an hpo gene, an Amazon brand) always
   does.

Queries are deduplicated by text, shuffled and split train/val/test by ``split_fractions`` (disjoint by
query). The template id goes to the ``template`` column only, which no retriever, planner or prompt reads.
Everything is drawn from one ``random.Random(seed)``: same SKB, aliases and seed, same queries.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from grasp_core.errors import GraspError
from grasp_core.io import read_package_json
from grasp_core.questions import hpo_questions as HQ
from grasp_core.questions.config import QueryGenConfig
from grasp_core.questions.kb_graph import Graph
from grasp_core.questions.properties import ADJECTIVE_ENDINGS, NAME_PROPERTY_TYPES, Property, PropertyRules, tokens
from grasp_core.questions.synonyms import swap_synonym
from grasp_core.skb.format import SKB, validate


@dataclass(frozen=True)
class Template:
    """Paths ``(anchor type, rel, type, rel, ..., target type)``; several paths meet at the target.

    A relation is ``name`` (undirected) or ``name|down`` / ``name|up`` (along / against the stored direction).
    """

    paths: tuple[tuple[str, ...], ...]

    @property
    def id(self) -> str:
        return " & ".join(">".join(p) for p in self.paths)

    @property
    def target(self) -> str:
        return self.paths[0][-1]


@dataclass(frozen=True)
class SynthQuery:
    """One synthesized query with its grounding (for analysis and tests; only text and answers are published)."""

    text: str
    answer_ids: list[int]
    template: str
    anchors: list[int]
    property: Property | None  # the phrase the gold was filtered by; None: the relation alone


def _t(*paths: tuple[str, ...]) -> Template:
    return Template(tuple(paths))


def relation_name(rel: str) -> str:
    """The schema relation of a template hop (``parent-child|up`` -> ``parent-child``)."""
    return rel.split("|", 1)[0]


_FLIP = {"down": "up", "up": "down"}


def reverse_hop(rel: str) -> str:
    """The hop walked the other way (``rel|down`` <-> ``rel|up``; an undirected hop is its own reverse)."""
    name, _, way = rel.partition("|")
    return f"{name}|{_FLIP[way]}" if way else name


_PH, _DI, _GE = "phenotype", "disease", "gene"
_PRESENT, _ABSENT, _ASSOC = "phenotype present", "phenotype absent", "associated with"
_DOWN, _UP = "parent-child|down", "parent-child|up"

TEMPLATES: dict[str, tuple[Template, ...]] = {
    "hpo": (  # every hpo template has its question patterns in hpo_questions.PATTERNS
        # gene targets
        _t((_DI, _ASSOC, _GE)),
        _t((_PH, _ASSOC, _GE)),
        _t((_DI, _ASSOC, _GE), (_PH, _ASSOC, _GE)),
        _t((_PH, _ASSOC, _GE), (_PH, _ASSOC, _GE)),
        _t((_GE, _ASSOC, _DI, _ASSOC, _GE)),
        # disease targets
        _t((_PH, _PRESENT, _DI)),
        _t((_GE, _ASSOC, _DI)),
        _t((_PH, _ABSENT, _DI)),
        _t((_PH, _PRESENT, _DI), (_GE, _ASSOC, _DI)),
        _t((_PH, _PRESENT, _DI), (_PH, _PRESENT, _DI)),
        _t((_PH, _DOWN, _PH, _PRESENT, _DI)),
        _t((_DI, _ASSOC, _GE, _ASSOC, _DI)),
        # phenotype targets
        _t((_DI, _PRESENT, _PH)),
        _t((_GE, _ASSOC, _PH)),
        _t((_PH, _UP, _PH)),
        _t((_PH, _DOWN, _PH)),
        _t((_DI, _ABSENT, _PH)),
        _t((_DI, _PRESENT, _PH), (_GE, _ASSOC, _PH)),
    ),
    "amazon": (
        _t(("brand", "has_brand", "product")),
        _t(("color", "has_color", "product")),
        _t(("category", "has_category", "product")),
        _t(("product", "also_buy", "product")),
        _t(("product", "also_view", "product")),
        _t(("brand", "has_brand", "product"), ("category", "has_category", "product")),
        _t(("product", "also_buy", "product", "has_brand", "brand")),
    ),
    "mag": (
        _t(("author", "author___writes___paper", "paper")),
        _t(("paper", "paper___cites___paper", "paper")),
        _t(("field_of_study", "paper___has_topic___field_of_study", "paper")),
        _t(("institution", "author___affiliated_with___institution", "author", "author___writes___paper", "paper")),
        _t(("paper", "author___writes___paper", "author", "author___writes___paper", "paper")),
        _t(
            ("institution", "author___affiliated_with___institution", "author", "author___writes___paper", "paper"),
            ("field_of_study", "paper___has_topic___field_of_study", "paper"),
        ),
    ),
    "prime": (
        _t(("effect/phenotype", "phenotype present", "disease")),
        _t(("disease", "indication", "drug")),
        _t(("drug", "side effect", "effect/phenotype")),
        _t(("gene/protein", "ppi", "gene/protein")),
        _t(("disease", "associated with", "gene/protein")),
        _t(("anatomy", "expression present", "gene/protein", "target", "drug")),
        _t(("disease", "associated with", "gene/protein", "interacts with", "pathway")),
        _t(("drug", "target", "gene/protein", "interacts with", "biological_process")),
        _t(("drug", "target", "gene/protein", "interacts with", "molecular_function")),
        _t(("drug", "target", "gene/protein", "interacts with", "cellular_component")),
        _t(("pathway", "interacts with", "gene/protein", "associated with", "disease")),
        _t(("effect/phenotype", "associated with", "gene/protein", "associated with", "disease")),
        _t(("disease", "parent-child", "disease", "indication", "drug")),
        _t(("exposure", "linked to", "disease", "associated with", "gene/protein")),
        _t(("disease", "linked to", "exposure")),
        _t(("drug", "synergistic interaction", "drug", "indication", "disease")),
        _t(("gene/protein", "ppi", "gene/protein", "interacts with", "pathway")),
        _t(("biological_process", "interacts with", "gene/protein", "associated with", "disease")),
        _t(("anatomy", "expression present", "gene/protein", "associated with", "disease")),
        _t(("disease", "contraindication", "drug", "target", "gene/protein")),
        _t(("effect/phenotype", "side effect", "drug", "target", "gene/protein")),
        _t(("disease", "phenotype present", "effect/phenotype", "parent-child", "effect/phenotype")),
        _t(("drug", "enzyme", "gene/protein", "interacts with", "pathway")),
        _t(("drug", "transporter", "gene/protein", "expression present", "anatomy")),
        _t(("anatomy", "expression absent", "gene/protein", "interacts with", "molecular_function")),
        _t(
            ("biological_process", "interacts with", "gene/protein"),
            ("cellular_component", "interacts with", "gene/protein"),
        ),
        _t(("effect/phenotype", "phenotype present", "disease"), ("gene/protein", "associated with", "disease")),
        _t(("disease", "indication", "drug"), ("gene/protein", "target", "drug")),
        _t(("exposure", "interacts with", "gene/protein"), ("pathway", "interacts with", "gene/protein")),
    ),
}

# The synth-* wording tables, ``data/querygen_phrases.json`` (one key per constant, of the same name).
_PHRASES = read_package_json("grasp_core.questions", "querygen_phrases.json")
# What a node of the target type is called: (singular, plural) choices.
TYPE_NOUNS: dict[str, tuple[tuple[str, str], ...]] = _PHRASES["TYPE_NOUNS"]
# How the node at the end of a hop relates to the node ``{x}`` at its start: keys (rel, from, to) or (rel,); in
# the file one entry per key, ``relation`` with ``from`` and ``to`` or alone.
HOP_PHRASES: dict[tuple[str, ...], tuple[str, ...]] = {
    (h["relation"], h["from"], h["to"]) if "from" in h else (h["relation"],): h["phrases"]
    for h in _PHRASES["HOP_PHRASES"]
}
# The property clause around a phrase ``{p}``, by the field it comes from ("*": a noun phrase of a description).
PROPERTY_PHRASES: dict[str, tuple[str, ...]] = _PHRASES["PROPERTY_PHRASES"]
FRAMES: tuple[str, ...] = _PHRASES["FRAMES"]
FRAMES_NO_PROPERTY: tuple[str, ...] = _PHRASES["FRAMES_NO_PROPERTY"]
DISTRACTORS: dict[str, tuple[str, ...]] = _PHRASES["DISTRACTORS"]


def _dataset_of(skb: SKB) -> str:
    name = skb.schema.name.removeprefix("synth-")
    if name not in TEMPLATES:
        raise GraspError(f"no query templates for SKB {skb.schema.name!r} (known: {sorted(TEMPLATES)})")
    return name


def templates_for(skb: SKB) -> tuple[Template, ...]:
    """The dataset's templates whose every hop exists in this SKB's schema and graph."""
    rels = set(skb.edges["rel"].unique())
    out = []
    for tpl in TEMPLATES[_dataset_of(skb)]:
        ok = all(
            relation_name(p[i + 1]) in rels and skb.schema.connects(relation_name(p[i + 1]), p[i], p[i + 2])
            for p in tpl.paths
            for i in range(0, len(p) - 2, 2)
        )
        if ok:
            out.append(tpl)
    if not out:
        raise GraspError(f"none of the {skb.schema.name!r} templates fits this SKB's schema")
    return tuple(out)


Aliases = Mapping[int, Sequence[tuple[str, str]]]  # node id -> (text, kind) with kind exact|layperson|abbreviation


def grounded_queries(
    skb: SKB,
    n_queries: int,
    seed: int = 0,
    cfg: QueryGenConfig = QueryGenConfig(),
    aliases: Aliases | None = None,
) -> list[SynthQuery]:
    """``n_queries`` distinct queries with their groundings, in generation order.

    ``aliases`` names anchors for hpo (``hpo.hpo_aliases``); without it hpo anchors go by name only and the
    ``synth-*`` SKBs use their ``alias``/``synonyms`` fields. Raises :class:`GraspError` when the SKB has no
    templates for its schema or ``n_queries`` distinct queries cannot be found within
    ``cfg.max_attempts_per_query × n_queries`` groundings.
    """
    dataset = _dataset_of(skb)
    templates = templates_for(skb)
    graph = Graph(skb)
    r = random.Random(seed)
    seen: set[str] = set()
    out: list[SynthQuery] = []
    attempts = 0
    tpl, tpl_tries = r.choice(templates), 0
    while len(out) < n_queries:
        attempts += 1
        if attempts > cfg.max_attempts_per_query * max(n_queries, 1):
            raise GraspError(
                f"found only {len(out)} of {n_queries} queries for {skb.schema.name!r} after {attempts - 1} "
                "groundings: the SKB is too small or too sparse for that many (ask for fewer queries)"
            )
        if tpl_tries >= cfg.tries_per_template:
            tpl, tpl_tries = r.choice(templates), 0
        tpl_tries += 1
        made = _make_query(graph, tpl, dataset, r, cfg, aliases or {})
        if made is not None and made.text not in seen:
            seen.add(made.text)
            out.append(made)
            tpl, tpl_tries = r.choice(templates), 0
    return out


def synthesize_queries(
    skb: SKB,
    n_queries: int,
    seed: int = 0,
    split_fractions: tuple[float, float, float] = (0.6, 0.2, 0.2),
    cfg: QueryGenConfig = QueryGenConfig(),
    aliases: Aliases | None = None,
) -> pd.DataFrame:
    """``n_queries`` STaRK-protocol queries over ``skb``: columns qid, split, query, answer_ids, template
    (:func:`queries_frame`)."""
    rows = grounded_queries(skb, n_queries, seed, cfg, aliases)
    return queries_frame(rows, seed, split_fractions)


def queries_frame(
    rows: Sequence[SynthQuery],
    seed: int,
    split_fractions: tuple[float, float, float] = (0.6, 0.2, 0.2),
    extra: Mapping[str, Sequence[str]] | None = None,
) -> pd.DataFrame:
    """The queries table of ``rows``: qid, split, query, answer_ids, template (and ``extra`` analysis columns).

    Splits get ``round(n × fraction)`` queries (test takes the remainder), assigned after a seeded shuffle."""
    if len(split_fractions) != 3 or min(split_fractions) < 0 or abs(sum(split_fractions) - 1) > 1e-6:
        raise GraspError(f"split_fractions must be three non-negative numbers summing to 1, got {split_fractions}")
    order = list(range(len(rows)))
    random.Random(f"{seed}-splits").shuffle(order)
    n = len(rows)
    n_train = round(n * split_fractions[0])
    n_val = round(n * split_fractions[1])
    frame = pd.DataFrame(
        {
            "qid": np.arange(n, dtype=np.int64),
            "split": ["train"] * n_train + ["val"] * n_val + ["test"] * (n - n_train - n_val),
            "query": [rows[i].text for i in order],
            "answer_ids": [rows[i].answer_ids for i in order],
            "template": [rows[i].template for i in order],
        }
    )
    for name, values in (extra or {}).items():
        frame[name] = [values[i] for i in order]
    return frame


def training_frame(rows: Sequence[tuple[str, list[int], str]], first_qid: int, val_share: float) -> pd.DataFrame:
    """The queries table of extra training questions ``(text, gold, template)``: qids from ``first_qid``, the first
    ``round(n × val_share)`` in ``val``, the rest in ``train``."""
    n_val = round(len(rows) * val_share)
    return pd.DataFrame(
        {
            "qid": np.arange(first_qid, first_qid + len(rows), dtype=np.int64),
            "split": ["val"] * n_val + ["train"] * (len(rows) - n_val),
            "query": [t for t, _, _ in rows],
            "answer_ids": [g for _, g, _ in rows],
            "template": [t for _, _, t in rows],
        }
    )


def with_queries(skb: SKB, queries: pd.DataFrame) -> SKB:
    """A copy of ``skb`` whose queries are ``queries`` (validated)."""
    out = SKB(skb.schema, skb.nodes, skb.edges, queries.reset_index(drop=True))
    validate(out)
    return out


@dataclass(frozen=True)
class Grounding:
    """A template grounded on anchors, with the property the gold was filtered by and the gold itself."""

    anchors: list[int]
    property: Property | None
    answers: list[int]


def ground(
    graph: Graph, tpl: Template, r: random.Random, cfg: QueryGenConfig, rules: PropertyRules
) -> Grounding | None:
    """Steps 1, 2 and 4 of the protocol for one drawn template; None when this grounding is degenerate."""
    pool = graph.ids_by_type.get(tpl.target)
    if pool is None or len(pool) == 0:
        return None
    gold = int(pool[r.randrange(len(pool))])
    anchors = []
    for path in tpl.paths:
        anchor = _walk_back(graph, path, gold, r)
        if anchor is None or anchor in anchors:
            return None
        anchors.append(anchor)
    if min(graph.degree(p[1], a) for p, a in zip(tpl.paths, anchors)) > cfg.max_anchor_degree:
        return None
    candidates: np.ndarray | None = None
    for path, anchor in zip(tpl.paths, anchors):
        reached = _walk_forward(graph, path, anchor, cfg.max_frontier)
        if reached is None:
            return None
        candidates = reached if candidates is None else np.intersect1d(candidates, reached, assume_unique=True)
    if candidates is None:
        return None
    candidates = np.setdiff1d(candidates, np.asarray(anchors), assume_unique=True)
    if gold not in candidates:
        return None
    few = len(candidates) <= cfg.max_answers
    describable = graph.describable(tpl.target, rules.skip_fields)
    if few and (not describable or r.random() < cfg.no_property_prob):
        return Grounding(anchors, None, candidates.tolist())
    if not describable:
        return None
    picked = _pick_property(graph, gold, candidates, r, cfg, rules)
    if picked is None:
        return None
    return Grounding(anchors, *picked)


def _make_query(
    graph: Graph, tpl: Template, dataset: str, r: random.Random, cfg: QueryGenConfig, aliases: Aliases
) -> SynthQuery | None:
    """One grounded, worded query, or None when this grounding is degenerate."""
    g = ground(graph, tpl, r, cfg, PropertyRules(name_types=NAME_PROPERTY_TYPES.get(dataset, frozenset())))
    if g is None:
        return None
    if dataset == "hpo":
        text = _word_hpo(graph, tpl, g.anchors, g.property, r, cfg, aliases)
    else:
        text = _word(graph, tpl, g.anchors, g.property, dataset, r, cfg, aliases)
    return SynthQuery(text, g.answers, tpl.id, g.anchors, g.property)


def _walk_back(graph: Graph, path: tuple[str, ...], gold: int, r: random.Random) -> int | None:
    node = gold
    for i in range(len(path) - 2, 0, -2):  # hop (path[i-1]) -[path[i]]- (path[i+1])
        nbrs = graph.neighbours(reverse_hop(path[i]), np.array([node]), path[i - 1])
        if len(nbrs) == 0:
            return None
        node = int(nbrs[r.randrange(len(nbrs))])
    return node


def _walk_forward(graph: Graph, path: tuple[str, ...], anchor: int, max_frontier: int) -> np.ndarray | None:
    frontier = np.array([anchor])
    for i in range(1, len(path), 2):
        frontier = graph.neighbours(path[i], frontier, path[i + 1])
        if len(frontier) == 0 or len(frontier) > max_frontier:
            return None
    return np.sort(frontier)


def _pick_property(
    graph: Graph, gold: int, candidates: np.ndarray, r: random.Random, cfg: QueryGenConfig, rules: PropertyRules
) -> tuple[Property, list[int]] | None:
    options = graph.properties(gold, rules)
    r.shuffle(options)
    for prop in options[: cfg.property_tries]:
        answers = graph.satisfying(prop, candidates).tolist()
        if not 1 <= len(answers) <= cfg.max_answers:
            continue
        if len(answers) == len(candidates) > 1:  # the property must narrow the relation's candidates
            continue
        return prop, answers
    return None


# ---- wording: hpo ----------------------------------------------------------------------------------------

# Which anchor names each register reaches for first: (synonym kind, probability) in order, else the name.
_HPO_NAMING: dict[str, tuple[tuple[str, float], ...]] = {
    "clinician": (("abbreviation", 0.15), ("exact", 0.25), ("layperson", 0.1)),
    "family": (("layperson", 0.7), ("exact", 0.15)),
    "researcher": (("exact", 0.2),),
    "terse": (("abbreviation", 0.3), ("layperson", 0.3), ("exact", 0.15)),
}


def _casual(text: str) -> str:
    """Lower-case the first letter when nothing after it is upper case ("Seizure" -> "seizure"; "ADHD" and
    "Stevens-Johnson syndrome" stay)."""
    return text[:1].lower() + text[1:] if text[1:] == text[1:].lower() else text


def _hpo_anchor(graph: Graph, node: int, register: str, r: random.Random, aliases: Aliases) -> str:
    name = graph.text(node, "name")
    by_kind: dict[str, list[str]] = {}
    for text, kind in aliases.get(node, ()):
        by_kind.setdefault(kind, []).append(text)
    for kind, prob in _HPO_NAMING[register]:
        if by_kind.get(kind) and r.random() < prob:
            return _casual(r.choice(by_kind[kind])) if kind != "abbreviation" else r.choice(by_kind[kind])
    if graph.types[node] == "gene" or register == "researcher":
        return name
    stripped = re.sub(r"\s*\([^)]*\)", "", name).strip() or name
    return _casual(stripped) if register != "clinician" or r.random() < 0.6 else stripped


def _hpo_property(prop: Property | None, target: str, register: str, r: random.Random) -> tuple[str, str]:
    """``({T}, {P})``: the target's noun phrase and the property clause."""
    noun = r.choice(HQ.TARGET_NOUNS[target][register])
    if prop is None:
        return noun, ""
    phrase = _casual(prop.phrase)
    if prop.field == "name":
        return r.choice(HQ.NAME_PHRASE_NOUNS).format(p=phrase), ""
    if prop.field == "clinical_course" and tokens(phrase)[-1].endswith(ADJECTIVE_ENDINGS):
        phrase = f"a {phrase} course"  # "with a slowly progressive course", not "with slowly progressive"
    if register == "family" and phrase.lower() in HQ.LAY_TERMS:
        phrase = r.choice(HQ.LAY_TERMS[phrase.lower()])
    return noun, r.choice(HQ.PROPERTY_CLAUSES[prop.field][register]).format(p=phrase)


def _word_hpo(
    graph: Graph,
    tpl: Template,
    anchors: list[int],
    prop: Property | None,
    r: random.Random,
    cfg: QueryGenConfig,
    aliases: Aliases,
) -> str:
    register = r.choice(HQ.REGISTERS)
    names = [_hpo_anchor(graph, a, register, r, aliases) for a in anchors]
    noun, clause = _hpo_property(prop, tpl.target, register, r)
    pattern = r.choice(HQ.PATTERNS[tpl.id][register])
    text = pattern.format(a=names[0], b=names[-1], T=noun, P=clause)
    if register == "terse":
        return text
    text = text[0].upper() + text[1:]
    if HQ.CONTEXTS[register] and r.random() < cfg.distractor_prob:
        text = f"{r.choice(HQ.CONTEXTS[register])} {text}"
    return text


# ---- wording: synth-* ------------------------------------------------------------------------------------


def anchor_text(
    graph: Graph,
    node: int,
    r: random.Random,
    cfg: QueryGenConfig,
    aliases: Aliases,
    type_nouns: Mapping[str, Sequence[tuple[str, str]]] = TYPE_NOUNS,
) -> str:
    """How a question names an anchor: its name, an alias, a light paraphrase, sometimes after its type noun."""
    name = graph.text(node, "name")
    node_type = str(graph.types[node])
    fields = graph.fields_of(node)
    names = [t for t, _ in aliases.get(node, ())] or [
        a.strip() for f in ("alias", "synonyms") for a in re.split(r"[;|]", fields.get(f, "")) if a.strip()
    ]
    roll = r.random()
    if names and roll < cfg.alias_prob:
        text = r.choice(names)
    elif roll < cfg.alias_prob + cfg.paraphrase_prob:
        text = _paraphrase(name, node_type, r)
    else:
        text = name
    if r.random() < cfg.typed_anchor_prob and node_type in type_nouns:
        text = f"the {r.choice(type_nouns[node_type])[0]} {text}"
    return text


def _paraphrase(name: str, node_type: str, r: random.Random) -> str:
    """A light paraphrase a user might type: initials for authors, no parenthetical, lower case."""
    parts = name.split()
    if node_type == "author" and len(parts) >= 2:
        return f"{parts[0][0]}. {parts[-1]}"
    stripped = re.sub(r"\s*\([^)]*\)", "", name).strip() or name
    return stripped.lower() if r.random() < 0.7 else stripped


def _hop_phrase(rel: str, src: str, dst: str, r: random.Random) -> str:
    options = HOP_PHRASES.get((rel, src, dst)) or HOP_PHRASES.get((rel,)) or (f"with {rel.replace('_', ' ')} {{x}}",)
    return r.choice(options)


def _path_clause(
    graph: Graph, path: tuple[str, ...], anchor: int, r: random.Random, cfg: QueryGenConfig, aliases: Aliases
) -> str:
    """The relation clause of the target: hops nest from the anchor outwards."""
    x = anchor_text(graph, anchor, r, cfg, aliases)
    for i in range(1, len(path) - 2, 2):  # every hop but the last describes an intermediate node
        mid = r.choice(TYPE_NOUNS.get(path[i + 1], ((path[i + 1], path[i + 1]),)))[0]
        hop = _hop_phrase(relation_name(path[i]), path[i - 1], path[i + 1], r).format(x=x)
        x = f"{'an' if mid[0] in 'aeiou' else 'a'} {mid} {hop}"
    return _hop_phrase(relation_name(path[-2]), path[-3], path[-1], r).format(x=x)


def _word(
    graph: Graph,
    tpl: Template,
    anchors: list[int],
    prop: Property | None,
    dataset: str,
    r: random.Random,
    cfg: QueryGenConfig,
    aliases: Aliases,
) -> str:
    singular, plural = r.choice(TYPE_NOUNS.get(tpl.target, ((tpl.target, tpl.target),)))
    rel = " and ".join(_path_clause(graph, p, a, r, cfg, aliases) for p, a in zip(tpl.paths, anchors))
    if prop is None:
        text = r.choice(FRAMES_NO_PROPERTY).format(T=plural, t=singular, R=rel)
    else:
        clause = r.choice(PROPERTY_PHRASES.get(prop.field, PROPERTY_PHRASES["*"]))
        text = r.choice(FRAMES).format(T=plural, t=singular, R=rel, P=clause.format(p=swap_synonym(r, prop.phrase)))
    text = text[0].upper() + text[1:]
    if r.random() < cfg.distractor_prob:
        text = f"{r.choice(DISTRACTORS[dataset])} {text}"
    return text

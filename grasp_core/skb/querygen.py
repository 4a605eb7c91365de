"""Query synthesis by the STaRK protocol, no LLM (``docs/design.md``), for ``hpo`` and the ``synth-*`` SKBs.

One query is made in four steps:

1. **Template and grounding.** A relational template is drawn from the dataset's list (:data:`TEMPLATES`):
   one metapath of 1–2 hops from an anchor type to the target type, or two such paths meeting at the
   target (intersection). It is grounded *backwards*: a gold node of the target type is drawn, and each path
   is walked from it to an anchor (a random neighbour per hop), so intersections are never empty. The anchors
   are then walked *forwards* (undirected, type-checked hops, one ``scipy.sparse`` CSR matrix per relation)
   to get the candidate set. Degenerate groundings are dropped: when every anchor has more than
   ``max_anchor_degree`` neighbours over its first hop (one selective anchor is enough for an intersection),
   or a walk reaches more than ``max_frontier`` nodes.
   Anchors are never answers (a ``paper→author→paper`` walk would otherwise return the anchor paper).
2. **Property.** A short phrase (1–3 consecutive words around content words) is cut from one of the gold
   node's descriptive text fields (identifier-like fields such as ``source`` or counts are skipped:
   :data:`NON_PROPERTY_FIELDS`). Its *key terms* are its lowercase alphanumeric tokens minus stopwords.
3. **Wording.** The query names the target type (one of several nouns), the relation path (several
   participle phrases per hop; two-hop paths nest: "drugs targeting a gene expressed in retina"), the
   anchors (by name, by an alias/synonym from the node's ``alias``/``synonyms`` field, or a light paraphrase:
   lower case, parenthetical dropped, an author's first name as an initial) and the property (sometimes
   with a synonym swapped in), inside one of several frames with different word orders, sometimes after a
   distractor sentence ("I'm a clinician looking into a case.").
4. **Gold.** Every candidate that satisfies the relation *and* the property, where a node satisfies the
   property when **every key term occurs among the tokens of its document** (name plus all text fields,
   tokenized like the key terms). A query is kept when it has 1..``max_answers`` answers and the property
   actually narrows the candidates (unless the relation alone yields exactly one); otherwise another
   property, then another grounding, is tried. A target type with no descriptive text field (an Amazon
   brand, an hpo gene) gets no property: its gold is the whole candidate set (again 1..``max_answers``).

Queries are deduplicated by text, shuffled and split train/val/test by ``split_fractions`` (disjoint by
query). The template id goes to the ``template`` column only, which no retriever, planner or prompt reads.
Everything is drawn from one ``random.Random(seed)``: same SKB and seed, same queries.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd
import scipy.sparse as sp

from grasp_core.errors import GraspError
from grasp_core.skb.format import SKB, validate
from grasp_core.skb.synth_text import swap_synonym

NON_PROPERTY_FIELDS = frozenset(
    {
        "source",
        "alias",
        "synonyms",
        "database",
        "type_of_gene",
        "paper_count",
        "citation_count",
        "publication_date",
        "brand",
        "comment",
    }
)
STOPWORDS = frozenset(
    """a an the of in on at to for from by with and or is are be been was were it its this that
these those as into than then such which who whom whose their there may can also other not no all any some
each per via over under between within without both more most very often highly well i my we our they""".split()
)
_TOKEN = re.compile(r"[a-z0-9]+")
_CLAUSE = re.compile(r"[.;:,|!?\n()]+")


@dataclass(frozen=True)
class QueryGenConfig:
    max_answers: int = field(default=20, metadata={"help": "keep queries with 1..max_answers gold answers"})
    max_anchor_degree: int = field(
        default=1000, metadata={"help": "drop groundings whose every anchor has more neighbours on its first hop"}
    )
    max_frontier: int = field(default=5000, metadata={"help": "drop groundings whose walk reaches more nodes"})
    property_tries: int = field(default=4, metadata={"help": "properties tried per grounding"})
    max_attempts_per_query: int = field(default=60, metadata={"help": "groundings tried per requested query"})
    alias_prob: float = field(default=0.25, metadata={"help": "name an anchor by an alias/synonym when it has one"})
    paraphrase_prob: float = field(default=0.25, metadata={"help": "lightly paraphrase an anchor name"})
    typed_anchor_prob: float = field(default=0.4, metadata={"help": "say the anchor's type before its name"})
    distractor_prob: float = field(default=0.3, metadata={"help": "prefix a distractor context sentence"})


@dataclass(frozen=True)
class Template:
    """Paths ``(anchor type, rel, type, rel, ..., target type)``; several paths meet at the target."""

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
    property: str | None  # the phrase cut from the gold's text (before any synonym swap); None: no property


def _t(*paths: tuple[str, ...]) -> Template:
    return Template(tuple(paths))


TEMPLATES: dict[str, tuple[Template, ...]] = {
    "hpo": (
        _t(("phenotype", "phenotype present", "disease")),
        _t(("gene", "associated with", "disease")),
        _t(("phenotype", "parent-child", "phenotype")),
        _t(("disease", "phenotype present", "phenotype")),
        _t(("gene", "associated with", "phenotype")),
        _t(("phenotype", "phenotype absent", "disease")),
        _t(("gene", "associated with", "phenotype", "phenotype present", "disease")),
        _t(("phenotype", "parent-child", "phenotype", "phenotype present", "disease")),
        _t(("phenotype", "phenotype present", "disease"), ("gene", "associated with", "disease")),
        _t(("phenotype", "phenotype present", "disease"), ("phenotype", "phenotype present", "disease")),
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

# What a node of the target type is called: (singular, plural) choices.
TYPE_NOUNS: dict[str, tuple[tuple[str, str], ...]] = {
    "phenotype": (
        ("phenotype", "phenotypes"),
        ("clinical feature", "clinical features"),
        ("HPO term", "HPO terms"),
        ("abnormality", "abnormalities"),
    ),
    "disease": (("disease", "diseases"), ("disorder", "disorders"), ("condition", "conditions")),
    "gene": (("gene", "genes"),),
    "gene/protein": (("gene", "genes"), ("protein", "proteins"), ("gene or protein", "genes or proteins")),
    "drug": (("drug", "drugs"), ("medication", "medications"), ("compound", "compounds")),
    "pathway": (("pathway", "pathways"), ("signaling pathway", "signaling pathways")),
    "anatomy": (("tissue", "tissues"), ("anatomical structure", "anatomical structures"), ("body part", "body parts")),
    "effect/phenotype": (("phenotype", "phenotypes"), ("clinical effect", "clinical effects"), ("symptom", "symptoms")),
    "biological_process": (("biological process", "biological processes"), ("process", "processes")),
    "molecular_function": (("molecular function", "molecular functions"), ("molecular activity", "activities")),
    "cellular_component": (("cellular component", "cellular components"), ("cell compartment", "compartments")),
    "exposure": (("exposure", "exposures"), ("environmental exposure", "environmental exposures")),
    "product": (("product", "products"), ("item", "items")),
    "brand": (("brand", "brands"),),
    "category": (("category", "categories"),),
    "color": (("color", "colors"),),
    "paper": (("paper", "papers"), ("article", "articles"), ("publication", "publications")),
    "author": (("author", "authors"), ("researcher", "researchers")),
    "institution": (("institution", "institutions"),),
    "field_of_study": (("field of study", "fields of study"), ("research field", "research fields")),
}

# How the node at the end of a hop relates to the node ``{x}`` at its start: keys (rel, from, to) or (rel,).
HOP_PHRASES: dict[tuple[str, ...], tuple[str, ...]] = {
    ("phenotype present", "phenotype", "disease"): (
        "presenting with {x}",
        "characterized by {x}",
        "with {x} among their features",
        "that show {x}",
    ),
    ("phenotype present", "effect/phenotype", "disease"): (
        "presenting with {x}",
        "characterized by {x}",
        "with {x} among their features",
        "that show {x}",
    ),
    ("phenotype present", "disease", "phenotype"): (
        "seen in {x}",
        "reported in patients with {x}",
        "that are features of {x}",
        "occurring in {x}",
    ),
    ("phenotype present", "disease", "effect/phenotype"): (
        "seen in {x}",
        "reported in patients with {x}",
        "that are features of {x}",
        "occurring in {x}",
    ),
    ("phenotype absent",): (
        "where {x} is explicitly absent",
        "known to lack {x}",
        "that do not show {x}",
        "with {x} ruled out",
    ),
    ("parent-child",): (
        "directly above or below {x} in the hierarchy",
        "that are a parent or child term of {x}",
        "one level away from {x} in the ontology",
        "immediately related to {x} as parent or child",
    ),
    ("associated with",): (
        "associated with {x}",
        "linked to {x}",
        "with a known association to {x}",
        "implicated with {x}",
    ),
    ("ppi",): (
        "that physically interact with {x}",
        "binding partners of {x}",
        "in a protein interaction with {x}",
        "that bind {x}",
    ),
    ("target", "drug", "gene/protein"): (
        "targeted by {x}",
        "that are drug targets of {x}",
        "acted on by {x}",
        "that {x} binds to",
    ),
    ("target", "gene/protein", "drug"): (
        "targeting {x}",
        "that act on {x}",
        "with {x} as a target",
        "designed against {x}",
    ),
    ("enzyme", "drug", "gene/protein"): (
        "that metabolize {x}",
        "enzymes processing {x}",
        "acting as enzymes for {x}",
        "involved in breaking down {x}",
    ),
    ("enzyme", "gene/protein", "drug"): (
        "metabolized by {x}",
        "processed by the enzyme {x}",
        "broken down by {x}",
        "that {x} metabolizes",
    ),
    ("transporter", "drug", "gene/protein"): (
        "that transport {x}",
        "carrying {x} across membranes",
        "acting as transporters of {x}",
        "moving {x} into cells",
    ),
    ("transporter", "gene/protein", "drug"): (
        "transported by {x}",
        "carried by {x}",
        "moved by {x}",
        "that rely on {x} for transport",
    ),
    ("carrier",): (
        "with a carrier relation to {x}",
        "carried by {x}",
        "bound by {x} as carrier",
        "linked to {x} as carrier",
    ),
    ("indication", "disease", "drug"): (
        "indicated for {x}",
        "used to treat {x}",
        "approved for {x}",
        "prescribed for {x}",
    ),
    ("indication", "drug", "disease"): (
        "treated with {x}",
        "for which {x} is indicated",
        "managed with {x}",
        "that {x} is approved for",
    ),
    ("contraindication", "disease", "drug"): (
        "contraindicated in {x}",
        "that should be avoided with {x}",
        "not to be used with {x}",
        "unsafe in {x}",
    ),
    ("contraindication", "drug", "disease"): (
        "in which {x} is contraindicated",
        "where {x} must be avoided",
        "that rule out {x}",
        "incompatible with {x}",
    ),
    ("off-label use",): (
        "with an off-label use for {x}",
        "used off-label with {x}",
        "off-label related to {x}",
        "tied to {x} off-label",
    ),
    ("synergistic interaction",): (
        "with a synergistic interaction with {x}",
        "that act synergistically with {x}",
        "that potentiate {x}",
        "combining synergistically with {x}",
    ),
    ("side effect", "drug", "effect/phenotype"): (
        "that are side effects of {x}",
        "caused as a side effect by {x}",
        "reported as adverse effects of {x}",
        "induced by {x}",
    ),
    ("side effect", "effect/phenotype", "drug"): (
        "with {x} as a side effect",
        "that can cause {x}",
        "known to induce {x}",
        "listing {x} among adverse effects",
    ),
    ("interacts with",): (
        "interacting with {x}",
        "that interact with {x}",
        "involved with {x}",
        "in interaction with {x}",
    ),
    ("linked to",): ("linked to {x}", "connected to {x}", "related to {x}", "tied to {x}"),
    ("expression present", "anatomy", "gene/protein"): (
        "expressed in {x}",
        "present in {x}",
        "with expression in {x}",
        "found in {x}",
    ),
    ("expression present", "gene/protein", "anatomy"): (
        "expressing {x}",
        "where {x} is expressed",
        "in which {x} is present",
        "with {x} expression",
    ),
    ("expression absent", "anatomy", "gene/protein"): (
        "not expressed in {x}",
        "absent from {x}",
        "with no expression in {x}",
        "missing in {x}",
    ),
    ("expression absent", "gene/protein", "anatomy"): (
        "lacking {x} expression",
        "where {x} is not expressed",
        "in which {x} is absent",
        "without {x}",
    ),
    ("has_brand", "brand", "product"): ("made by {x}", "from {x}", "by the brand {x}", "sold under {x}"),
    ("has_brand", "product", "brand"): ("that make {x}", "behind {x}", "that sell {x}", "producing {x}"),
    ("has_color",): ("in {x}", "colored {x}", "that come in {x}", "available in {x}"),
    ("has_category",): ("in the {x} category", "listed under {x}", "from the {x} section", "categorized as {x}"),
    ("also_buy",): (
        "often bought together with {x}",
        "that people also buy with {x}",
        "frequently purchased alongside {x}",
        "bought by customers of {x}",
    ),
    ("also_view",): (
        "also viewed with {x}",
        "that shoppers browse next to {x}",
        "viewed alongside {x}",
        "looked at by people viewing {x}",
    ),
    ("author___writes___paper", "author", "paper"): (
        "written by {x}",
        "authored by {x}",
        "by {x}",
        "with {x} as an author",
    ),
    ("author___writes___paper", "paper", "author"): (
        "who wrote {x}",
        "who authored {x}",
        "behind {x}",
        "among the authors of {x}",
    ),
    ("paper___cites___paper",): (
        "citing or cited by {x}",
        "with a citation link to {x}",
        "connected to {x} by citation",
        "in the citation neighbourhood of {x}",
    ),
    ("paper___has_topic___field_of_study", "field_of_study", "paper"): (
        "on {x}",
        "about {x}",
        "in the field {x}",
        "tagged with {x}",
    ),
    ("paper___has_topic___field_of_study", "paper", "field_of_study"): (
        "covered by {x}",
        "that {x} is about",
        "topics of {x}",
        "addressed in {x}",
    ),
    ("author___affiliated_with___institution", "institution", "author"): (
        "affiliated with {x}",
        "from {x}",
        "working at {x}",
        "at {x}",
    ),
    ("author___affiliated_with___institution", "author", "institution"): (
        "hosting {x}",
        "where {x} works",
        "employing {x}",
        "of {x}",
    ),
}
PROPERTY_PHRASES = (
    "mentioning {p}",
    "described with {p}",
    "involving {p}",
    "related to {p}",
    "with {p} in their description",
    "noted for {p}",
    "that mention {p}",
)
FRAMES = (
    "Which {T} {R} {P}?",
    "Find {T} {R} {P}.",
    "I'm looking for {T} {P}, {R}.",
    "List {T} {R}. Only those {P}.",
    "What are the {T} {R} {P}?",
    "{T} {R} {P}",
    "Can you suggest {T} {P} {R}?",
    "Looking for {T} {R}, ideally {P}.",
    "Name one {t} {R} {P}.",
)
FRAMES_NO_PROPERTY = (
    "Which {T} {R}?",
    "Find {T} {R}.",
    "I'm looking for {T} {R}.",
    "List the {T} {R}.",
    "{T} {R}",
    "Name one {t} {R}.",
)
DISTRACTORS: dict[str, tuple[str, ...]] = {
    "hpo": (
        "I'm a clinician looking into a case.",
        "For a genetics seminar:",
        "My patient's family asked me this.",
        "Quick question for a differential diagnosis.",
    ),
    "prime": (
        "I'm a clinician looking into a case.",
        "For a pharmacology review:",
        "Working on a drug repurposing project.",
        "A colleague in the lab asked me this.",
    ),
    "amazon": (
        "I'm shopping for a gift.",
        "My old one broke last week.",
        "Planning a trip next month.",
        "Trying to stay within budget.",
    ),
    "mag": (
        "I'm writing a literature review.",
        "For my thesis background chapter:",
        "A reviewer asked us to cite related work.",
        "Preparing a reading list for students.",
    ),
}


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
            p[i + 1] in rels and skb.schema.connects(p[i + 1], p[i], p[i + 2])
            for p in tpl.paths
            for i in range(0, len(p) - 2, 2)
        )
        if ok:
            out.append(tpl)
    if not out:
        raise GraspError(f"none of the {skb.schema.name!r} templates fits this SKB's schema")
    return tuple(out)


def tokens(text: str) -> list[str]:
    """Lowercase alphanumeric tokens: the unit of the property-match rule."""
    return _TOKEN.findall(text.lower())


def key_terms(phrase: str) -> frozenset[str]:
    return frozenset(t for t in tokens(phrase) if t not in STOPWORDS)


class _Graph:
    """One symmetric CSR adjacency per relation name, node type codes, and cached document token sets."""

    def __init__(self, skb: SKB):
        self.skb = skb
        n = skb.num_nodes
        codes, names = pd.factorize(skb.nodes["type"])
        self.type_code = codes
        self.type_index = {t: i for i, t in enumerate(names)}
        src, dst = skb.edges["src"].to_numpy(np.int64), skb.edges["dst"].to_numpy(np.int64)
        rel_codes, rel_names = pd.factorize(skb.edges["rel"])
        self.adj: dict[str, sp.csr_matrix] = {}
        for i, rel in enumerate(rel_names):
            m = rel_codes == i
            a, b = src[m], dst[m]
            ones = np.ones(2 * len(a), dtype=np.int8)
            self.adj[rel] = sp.csr_matrix((ones, (np.concatenate([a, b]), np.concatenate([b, a]))), shape=(n, n))
        self.text_columns = {c: skb.nodes[c].to_numpy(dtype=object) for c in ("name", *skb.schema.text_fields)}
        self._postings: dict[str, dict[str, np.ndarray]] = {}

    def neighbours(self, rel: str, nodes: np.ndarray, node_type: str) -> np.ndarray:
        m = self.adj[rel]
        if len(nodes) == 1:
            i = int(nodes[0])
            out = m.indices[m.indptr[i] : m.indptr[i + 1]]
            return out[self.type_code[out] == self.type_index.get(node_type, -1)]
        out = m[nodes].indices
        out = out[self.type_code[out] == self.type_index.get(node_type, -1)]
        if len(out) < 4096:
            return np.unique(out)
        seen = np.zeros(len(self.type_code), dtype=bool)  # O(N) dedup beats sorting big frontiers
        seen[out] = True
        return np.flatnonzero(seen)

    def degree(self, rel: str, node: int) -> int:
        m = self.adj[rel]
        return int(m.indptr[node + 1] - m.indptr[node])

    def doc_tokens(self, node: int) -> frozenset[str]:
        """Tokens of the node's document: its name and every text field it has."""
        return frozenset(tokens(" ".join(v for col in self.text_columns.values() if isinstance(v := col[node], str))))

    def fields_of(self, node: int) -> dict[str, str]:
        """The node's non-empty text fields, in schema order."""
        node_type = self.skb.nodes["type"].iat[node]
        return {
            f: v
            for f in self.skb.schema.node_types[node_type]
            if isinstance(v := self.text_columns[f][node], str) and v
        }

    def matching(self, node_type: str, terms: frozenset[str], candidates: np.ndarray) -> np.ndarray:
        """The ``candidates`` (nodes of ``node_type``) whose document tokens include every term."""
        if node_type not in self._postings:
            lists: dict[str, list[int]] = {}
            for node in self.ids_by_type[node_type].tolist():
                for t in self.doc_tokens(node):
                    lists.setdefault(t, []).append(node)
            self._postings[node_type] = {t: np.asarray(ids, np.int64) for t, ids in lists.items()}
        postings = self._postings[node_type]
        out = candidates
        for t in terms:
            ids = postings.get(t)
            if ids is None:
                return candidates[:0]
            at = np.minimum(np.searchsorted(ids, out), len(ids) - 1)
            out = out[ids[at] == out]
        return out

    def describable(self, node_type: str) -> bool:
        """True when nodes of this type have a text field a property can be cut from."""
        return any(f not in NON_PROPERTY_FIELDS for f in self.skb.schema.node_types.get(node_type, ()))

    @cached_property
    def ids_by_type(self) -> dict[str, np.ndarray]:
        return {t: np.flatnonzero(self.type_code == i) for t, i in self.type_index.items()}


def grounded_queries(
    skb: SKB, n_queries: int, seed: int = 0, cfg: QueryGenConfig = QueryGenConfig()
) -> list[SynthQuery]:
    """``n_queries`` distinct queries with their groundings, in generation order.

    Raises :class:`GraspError` when the SKB has no templates for its schema or ``n_queries`` distinct queries
    cannot be found within ``cfg.max_attempts_per_query × n_queries`` groundings.
    """
    dataset = _dataset_of(skb)
    templates = templates_for(skb)
    graph = _Graph(skb)
    r = random.Random(seed)
    seen: set[str] = set()
    out: list[SynthQuery] = []
    attempts = 0
    while len(out) < n_queries:
        attempts += 1
        if attempts > cfg.max_attempts_per_query * max(n_queries, 1):
            raise GraspError(
                f"found only {len(out)} of {n_queries} queries for {skb.schema.name!r} after {attempts - 1} "
                "groundings: the SKB is too small or too sparse for that many (ask for fewer queries)"
            )
        made = _make_query(graph, r.choice(templates), dataset, r, cfg)
        if made is not None and made.text not in seen:
            seen.add(made.text)
            out.append(made)
    return out


def synthesize_queries(
    skb: SKB,
    n_queries: int,
    seed: int = 0,
    split_fractions: tuple[float, float, float] = (0.6, 0.2, 0.2),
    cfg: QueryGenConfig = QueryGenConfig(),
) -> pd.DataFrame:
    """``n_queries`` STaRK-protocol queries over ``skb``: columns qid, split, query, answer_ids, template.

    Splits get ``round(n × fraction)`` queries (test takes the remainder), assigned after a seeded shuffle.
    """
    if len(split_fractions) != 3 or min(split_fractions) < 0 or abs(sum(split_fractions) - 1) > 1e-6:
        raise GraspError(f"split_fractions must be three non-negative numbers summing to 1, got {split_fractions}")
    rows = grounded_queries(skb, n_queries, seed, cfg)
    random.Random(f"{seed}-splits").shuffle(rows)
    n_train = round(n_queries * split_fractions[0])
    n_val = round(n_queries * split_fractions[1])
    return pd.DataFrame(
        {
            "qid": np.arange(n_queries, dtype=np.int64),
            "split": ["train"] * n_train + ["val"] * n_val + ["test"] * (n_queries - n_train - n_val),
            "query": [q.text for q in rows],
            "answer_ids": [q.answer_ids for q in rows],
            "template": [q.template for q in rows],
        }
    )


def with_queries(skb: SKB, queries: pd.DataFrame) -> SKB:
    """A copy of ``skb`` whose queries are ``queries`` (validated)."""
    out = SKB(skb.schema, skb.nodes, skb.edges, queries.reset_index(drop=True))
    validate(out)
    return out


def _make_query(graph: _Graph, tpl: Template, dataset: str, r: random.Random, cfg: QueryGenConfig) -> SynthQuery | None:
    """One grounded, worded query, or None when this grounding is degenerate."""
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
    if not graph.describable(tpl.target):  # a name-only type (a brand, an hpo gene): the relation is the query
        if len(candidates) > cfg.max_answers:
            return None
        phrase, answers = None, candidates.tolist()
    else:
        prop = _pick_property(graph, gold, candidates, r, cfg)
        if prop is None:
            return None
        phrase, answers = prop
    text = _word(graph, tpl, anchors, phrase, dataset, r, cfg)
    return SynthQuery(text, answers, tpl.id, anchors, phrase)


def _walk_back(graph: _Graph, path: tuple[str, ...], gold: int, r: random.Random) -> int | None:
    node = gold
    for i in range(len(path) - 2, 0, -2):  # hop (path[i-1]) -[path[i]]- (path[i+1])
        nbrs = graph.neighbours(path[i], np.array([node]), path[i - 1])
        if len(nbrs) == 0:
            return None
        node = int(nbrs[r.randrange(len(nbrs))])
    return node


def _walk_forward(graph: _Graph, path: tuple[str, ...], anchor: int, max_frontier: int) -> np.ndarray | None:
    frontier = np.array([anchor])
    for i in range(1, len(path), 2):
        frontier = graph.neighbours(path[i], frontier, path[i + 1])
        if len(frontier) == 0 or len(frontier) > max_frontier:
            return None
    return np.sort(frontier)


def _property_clauses(graph: _Graph, node: int) -> list[str]:
    """Every clause of the node's descriptive text fields (the pool a property phrase is cut from)."""
    out = []
    for f, text in graph.fields_of(node).items():
        if f in NON_PROPERTY_FIELDS:
            continue
        out += [c.strip() for c in _CLAUSE.split(text) if key_terms(c)]
    return out


def _cut_phrase(clause: str, r: random.Random) -> str:
    words = clause.split()
    content = [i for i, w in enumerate(words) if key_terms(w)]
    start = r.choice(content)
    length = r.choice((1, 2, 2, 3, 3, 3))
    window = words[start : start + length]
    while len(window) > 1 and not key_terms(window[-1]):
        window.pop()
    return " ".join(window)


def _pick_property(graph: _Graph, gold: int, candidates: np.ndarray, r: random.Random, cfg: QueryGenConfig):
    clauses = _property_clauses(graph, gold)
    if not clauses:
        return None
    for _ in range(cfg.property_tries):
        phrase = _cut_phrase(r.choice(clauses), r)
        terms = key_terms(phrase)
        answers = graph.matching(str(graph.skb.nodes["type"].iat[gold]), terms, candidates).tolist()
        if not 1 <= len(answers) <= cfg.max_answers:
            continue
        if len(answers) == len(candidates) > 1:  # the property must narrow the relation's candidates
            continue
        return phrase, answers
    return None


def _anchor_text(graph: _Graph, node: int, r: random.Random, cfg: QueryGenConfig) -> str:
    name = str(graph.text_columns["name"][node])
    node_type = str(graph.skb.nodes["type"].iat[node])
    fields = graph.fields_of(node)
    aliases = [a.strip() for f in ("alias", "synonyms") for a in re.split(r"[;|]", fields.get(f, "")) if a.strip()]
    roll = r.random()
    if aliases and roll < cfg.alias_prob:
        text = r.choice(aliases)
    elif roll < cfg.alias_prob + cfg.paraphrase_prob:
        text = _paraphrase(name, node_type, r)
    else:
        text = name
    if r.random() < cfg.typed_anchor_prob and node_type in TYPE_NOUNS:
        text = f"the {r.choice(TYPE_NOUNS[node_type])[0]} {text}"
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


def _path_clause(graph: _Graph, path: tuple[str, ...], anchor: int, r: random.Random, cfg: QueryGenConfig) -> str:
    """The relation clause of the target: hops nest from the anchor outwards."""
    x = _anchor_text(graph, anchor, r, cfg)
    for i in range(1, len(path) - 2, 2):  # every hop but the last describes an intermediate node
        mid = r.choice(TYPE_NOUNS.get(path[i + 1], ((path[i + 1], path[i + 1]),)))[0]
        x = f"{'an' if mid[0] in 'aeiou' else 'a'} {mid} {_hop_phrase(path[i], path[i - 1], path[i + 1], r).format(x=x)}"
    return _hop_phrase(path[-2], path[-3], path[-1], r).format(x=x)


def _word(
    graph, tpl: Template, anchors, phrase: str | None, dataset: str, r: random.Random, cfg: QueryGenConfig
) -> str:
    singular, plural = r.choice(TYPE_NOUNS.get(tpl.target, ((tpl.target, tpl.target),)))
    rel = " and ".join(_path_clause(graph, p, a, r, cfg) for p, a in zip(tpl.paths, anchors))
    if phrase is None:
        text = r.choice(FRAMES_NO_PROPERTY).format(T=plural, t=singular, R=rel)
    else:
        prop = r.choice(PROPERTY_PHRASES).format(p=swap_synonym(r, phrase))
        text = r.choice(FRAMES).format(T=plural, t=singular, R=rel, P=prop)
    text = text[0].upper() + text[1:]
    if r.random() < cfg.distractor_prob:
        text = f"{r.choice(DISTRACTORS[dataset])} {text}"
    return text

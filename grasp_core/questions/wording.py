"""How the generic query synthesizer words a question, from the schema's own names (``docs/byokb.md``).

Readable defaults come from the relation, type and field names (``has_brand`` → "with brand {x}";
``author___writes___paper`` → "that {x} writes" / "that write {x}"; ``phenotype present`` → "with a phenotype
present relation to {x}"), plural nouns and verb agreement by :mod:`inflect`. A user SKB may carry
``wording.json`` beside ``schema.json`` (``grasp data import`` writes the defaults there to edit); an entry there
replaces the default of the same key, anything it leaves out keeps its default.

The file (every part optional)::

    {"types": {"paper": [["paper", "papers"], ["article", "articles"]]},
     "hops": [{"relation": "author___writes___paper", "from": "author", "to": "paper",
               "phrases": ["written by {x}", "by {x}"]}],
     "fields": {"abstract": ["whose abstract mentions {p}", "about {p}"]},
     "registers": {"question": {"property": ["Which {T} {R} {P}?"], "no_property": ["Which {T} {R}?"],
                                "contexts": []}}}

A hop phrase describes the node at the hop's end (``to``) relative to ``{x}``, the node it starts from, and must
read after a singular or a plural noun ("citing {x}", "that {x} cites", not "that cite {x}"). A relation within
one type whose name reads as a verb is walked one way: ``"cites|down"`` goes from the stored ``src`` (``{x}``) to
its ``dst`` ("papers that {x} cites"), ``"cites|up"`` the other way ("papers citing {x}"). A field
phrase wraps a property phrase ``{p}``; a frame puts together ``{T}`` (plural target noun), ``{t}`` (singular),
``{R}`` (the relation clause) and ``{P}`` (the property clause).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from grasp_core.errors import SKBFormatError
from grasp_core.io import read_json, write_json
from grasp_core.skb.schema import Relation, Schema

WORDING_FILE = "wording.json"  # in a user SKB directory, beside schema.json

PREPOSITIONS = frozenset("with to of in for by from on at into as onto about under over".split())
HAVE = frozenset({"has", "have", "had"})

# register -> (frames with a property, frames without one, context sentences that may precede the question)
DEFAULT_REGISTERS: dict[str, dict[str, list[str]]] = {
    "question": {
        "property": ["Which {T} {R} {P}?", "What are the {T} {R} {P}?", "Are there {T} {R} {P}?"],
        "no_property": ["Which {T} {R}?", "What are the {T} {R}?"],
        "contexts": [],
    },
    "request": {
        "property": ["Find {T} {R} {P}.", "List the {T} {R} {P}.", "Show me {T} {R}, only those {P}."],
        "no_property": ["Find {T} {R}.", "List the {T} {R}.", "Show me the {T} {R}."],
        "contexts": ["For a report:", "For my notes:"],
    },
    "conversational": {
        "property": [
            "I'm looking for {T} {R}, ideally ones {P}.",
            "Can you help me find {T} {R} {P}?",
            "I need a {t} {R}, one {P}.",
        ],
        "no_property": ["I'm looking for {T} {R}.", "Can you help me find the {T} {R}?"],
        "contexts": ["Quick question.", "Hoping someone can help.", "I'm working on a project."],
    },
    "terse": {
        "property": ["{T} {R} {P}", "{T} {P} {R}"],
        "no_property": ["{T} {R}"],
        "contexts": [],
    },
}


@cache
def _engine():
    import inflect

    return inflect.engine()


def words(name: str) -> list[str]:
    """``author___writes___paper`` -> [author, writes, paper]; ``has_brand`` -> [has, brand]."""
    return [w for w in re.split(r"[_\s]+|(?<=[a-z])(?=[A-Z])", name) if w]


def type_noun(node_type: str) -> tuple[str, str]:
    """(singular, plural) of a type name: ``field_of_study`` -> (field of study, fields of study),
    ``gene/protein`` -> (gene or protein, genes or proteins)."""
    parts = [" ".join(words(p)).lower() for p in node_type.split("/") if p.strip()] or [node_type]
    plural = [_engine().plural_noun(p) or p for p in parts]
    return " or ".join(parts), " or ".join(plural)


def _verb_phrase(rel: Relation) -> list[str]:
    """The words of a relation without the type names that frame it (``author___writes___paper`` -> [writes])."""
    parts = rel.name.split("___")
    if len(parts) == 3:
        return words(parts[1].lower())
    return [w.lower() for w in words(rel.name)]


def _is_verb(word: str) -> bool:
    """A third-person verb (writes, cites, treats, has): inflect gives it a different plural form."""
    return word.endswith("s") and not word.endswith("ss") and _engine().plural_verb(word) not in ("", word)


def reads_as_verb(rel: Relation) -> bool:
    """True when the relation's name is a verb phrase ("writes", "has_brand", "subclass_of", "linked to"): its
    direction means something, unlike a label ("ppi", "also_buy", "parent-child")."""
    v = _verb_phrase(rel)
    return bool(v) and (v[0] in HAVE or v[-1] in PREPOSITIONS or _is_verb(v[0]))


def directed(rel: Relation) -> bool:
    """A relation within one type whose name reads as a verb: questions walk it one way (``name|down``: stored
    src -> dst, ``name|up``: dst -> src); other relations are walked undirected."""
    return rel.src == rel.dst and reads_as_verb(rel)


def default_hop_phrases(
    rel: Relation, start: str, end: str, nouns: dict[str, tuple[str, str]], way: str = ""
) -> list[str]:
    """Phrases for the node of type ``end`` reached from ``{x}`` of type ``start`` over ``rel`` (``way``: ``down``
    or ``up`` for a :func:`directed` relation).

    Each reads after a singular or a plural noun ("papers citing {x}", "a paper citing {x}"): the node of type
    ``end`` is never the subject of a finite verb."""
    v = _verb_phrase(rel)
    verb = " ".join(v)
    participle = " ".join([_engine().present_participle(v[0]) or v[0], *v[1:]]) if v else verb
    # {x} is the subject: "{x} <verb> <end>"
    forward = way == "down" if way else (rel.src == start and rel.dst == end)
    symmetric = rel.src == rel.dst and not way
    end_noun = nouns.get(end, type_noun(end))[0]
    if v and v[0] in HAVE and len(v) > 1:  # "has brand": <src> has the brand <dst>
        attr = " ".join(v[1:])
        as_src = [f"with {attr} {{x}}", f"having {{x}} as {attr}"]
        if attr == end_noun:
            as_dst = ["of {x}", "that {x} has"]
        else:
            as_dst = [f"serving as the {attr} of {{x}}", f"that {{x}} has as its {attr}"]
        if symmetric:
            return [f"having {{x}} as {attr} or serving as the {attr} of {{x}}"]
        return as_dst if forward else as_src
    if v and (v[-1] in PREPOSITIONS or _is_verb(v[0])):  # "associated with", "interacts with", "writes"
        subject = f"{participle} {{x}}" if _is_verb(v[0]) else f"{verb} {{x}}"
        obj = f"that {{x}} {verb}" if _is_verb(v[0]) else f"that {{x}} is {verb}"
        if symmetric:
            return [f"{subject} or {obj}" if _is_verb(v[0]) else subject]
        return [obj] if forward else [subject]
    label = verb or rel.name
    article = _engine().a(label).split(" ", 1)[0]
    return [
        f"with {article} {label} relation to {{x}}",
        f"linked by {label} to {{x}}",
        f"connected through {label} to {{x}}",
    ]


def default_field_phrases(field_name: str, term_field: bool) -> list[str]:
    """Property clauses around ``{p}`` for a field, from its name."""
    f = " ".join(words(field_name)).lower()
    mention = (
        "mention" if _engine().singular_noun(f) else "mentions"
    )  # "whose causes mention", "whose abstract mentions"
    if term_field:
        return [f"with {f} {{p}}", f"listed with {f} {{p}}", f"having {{p}} among their {f}"]
    return [f"whose {f} {mention} {{p}}", f"with {{p}} in their {f}", "mentioning {p}", "described with {p}"]


@dataclass(frozen=True)
class Wording:
    types: dict[str, list[tuple[str, str]]]  # node type -> (singular, plural) choices
    hops: dict[tuple[str, str, str], list[str]]  # (relation, from type, to type) -> phrases of the "to" node
    fields: dict[str, list[str]]  # text field -> property clauses with {p}
    registers: dict[str, dict[str, list[str]]] = field(default_factory=lambda: DEFAULT_REGISTERS)

    def to_json(self) -> dict:
        return {
            "types": {t: [list(n) for n in ns] for t, ns in self.types.items()},
            "hops": [{"relation": r, "from": a, "to": b, "phrases": p} for (r, a, b), p in self.hops.items()],
            "fields": self.fields,
            "registers": self.registers,
        }


def default_wording(schema: Schema, term_fields: frozenset[str] = frozenset()) -> Wording:
    """The wording read off the schema's names."""
    nouns = {t: type_noun(t) for t in schema.node_types}
    hops: dict[tuple[str, str, str], list[str]] = {}
    for rel in schema.relations:
        if directed(rel):
            for way in ("down", "up"):
                hops.setdefault(
                    (f"{rel.name}|{way}", rel.src, rel.dst), default_hop_phrases(rel, rel.src, rel.dst, nouns, way)
                )
            continue
        for start, end in dict.fromkeys([(rel.src, rel.dst), (rel.dst, rel.src)]):
            hops.setdefault((rel.name, start, end), default_hop_phrases(rel, start, end, nouns))
    fields = {f: default_field_phrases(f, f in term_fields) for f in schema.text_fields}
    return Wording({t: [n] for t, n in nouns.items()}, hops, fields)


def load_wording(skb_dir: str | Path | None, schema: Schema, term_fields: frozenset[str] = frozenset()) -> Wording:
    """The defaults, with the entries of ``<skb_dir>/wording.json`` (when there is one) in their place."""
    base = default_wording(schema, term_fields)
    file = Path(skb_dir) / WORDING_FILE if skb_dir else None
    if file is None or not file.exists():
        return base
    try:
        obj = read_json(file)
    except ValueError as exc:
        raise SKBFormatError(str(file), f"not valid JSON ({exc})") from exc
    return _merge(base, obj, str(file))


def _phrases(value, file: str, what: str, slot: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(p, str) and p.strip() for p in value):
        raise SKBFormatError(file, f"{what}: expected a non-empty list of phrases")
    missing = [p for p in value if slot and slot not in p]
    if missing:
        raise SKBFormatError(file, f"{what}: phrase {missing[0]!r} has no {slot} placeholder")
    return list(value)


def _merge(base: Wording, obj, file: str) -> Wording:
    if not isinstance(obj, dict):
        raise SKBFormatError(file, "expected a JSON object with 'types', 'hops', 'fields' and/or 'registers'")
    types = dict(base.types)
    for t, ns in (obj.get("types") or {}).items():
        if t not in types:
            raise SKBFormatError(file, f"types: {t!r} is not a node type of the schema ({sorted(types)})")
        if not isinstance(ns, list) or not ns or not all(isinstance(n, list) and len(n) == 2 for n in ns):
            raise SKBFormatError(file, f"types: {t!r} needs a list of [singular, plural] pairs")
        types[t] = [(str(a), str(b)) for a, b in ns]
    hops = dict(base.hops)
    for i, h in enumerate(obj.get("hops") or []):
        key = (h.get("relation"), h.get("from"), h.get("to")) if isinstance(h, dict) else None
        if key not in hops:
            raise SKBFormatError(file, f"hops: no relation {key!r} (relation, from, to) in the schema", row=i)
        hops[key] = _phrases(h.get("phrases"), file, f"hops[{i}]", "{x}")
    fields = dict(base.fields)
    for f, ps in (obj.get("fields") or {}).items():
        if f not in fields:
            raise SKBFormatError(file, f"fields: {f!r} is not a text field of the schema")
        fields[f] = _phrases(ps, file, f"fields[{f!r}]", "{p}")
    registers = {k: dict(v) for k, v in base.registers.items()}
    for name, spec in (obj.get("registers") or {}).items():
        if not isinstance(spec, dict):
            raise SKBFormatError(file, f"registers: {name!r} must be an object")
        reg = registers.setdefault(name, {"property": [], "no_property": [], "contexts": []})
        for part, slot in (("property", "{R}"), ("no_property", "{R}")):
            if part in spec:
                reg[part] = _phrases(spec[part], file, f"registers[{name!r}].{part}", slot)
        if "contexts" in spec:
            reg["contexts"] = [str(c) for c in spec["contexts"]]
        if not reg["property"] or not reg["no_property"]:
            raise SKBFormatError(file, f"registers: {name!r} needs 'property' and 'no_property' frames")
    return Wording(types, hops, fields, registers)


def write_default_wording(skb_dir: str | Path, schema: Schema, term_fields: frozenset[str] = frozenset()) -> Path:
    """Write the default wording to ``<skb_dir>/wording.json`` for a user to edit."""
    path = Path(skb_dir) / WORDING_FILE
    write_json(path, default_wording(schema, term_fields).to_json())
    return path

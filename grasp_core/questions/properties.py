"""What makes a phrase of a node a *property* a synthesized question may ask for, and when a node has it.

A property is a phrase of the gold node scoped to the field it comes from (:class:`Property`): a whole term of a
term-list field (an inheritance mode, an onset, a synonym, a feature: :data:`TERM_FIELDS`), or a noun phrase of a
descriptive field (a run of 1–3 content words between stopwords, verbs and punctuation, the head noun last:
:func:`noun_phrases`), or for some types (an hpo disease) a noun phrase of the name ("muscular dystrophy":
:func:`is_name_phrase`). A phrase with a number, or whose words are all stopwords or generic words, is never a
property (:func:`is_meaningful`). Identifier-like fields (``source``, counts, dates, aliases) give none
(:data:`NON_PROPERTY_FIELDS`). A node satisfies a property when the phrase's tokens (lowercase alphanumeric runs,
:func:`tokens`) occur contiguously and within one clause in the property's field (:func:`normalized`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NON_PROPERTY_FIELDS = frozenset(
    {
        "source",
        "alias",
        "database",
        "type_of_gene",
        "paper_count",
        "citation_count",
        "publication_date",
        "brand",
        "comment",
    }
)
# Fields holding a list of whole terms ("; "-separated): each term is a property as it stands.
TERM_FIELDS = frozenset(
    {"inheritance", "clinical_course", "clinical_modifier", "synonyms", "features", "interpro", "category", "venue"}
)
# Node types whose name also gives properties (its noun phrases), per dataset.
NAME_PROPERTY_TYPES: dict[str, frozenset[str]] = {"hpo": frozenset({"disease"})}
STOPWORDS = frozenset(
    """a an the of in on at to for from by with and or is are be been was were it its this that
these those as into than then such which who whom whose their there may can also other not no all any some
each per via over under between within without both more most very often highly well i my we our they""".split()
)
# Words that end a noun phrase (verbs, adverbs, connectives) and, with the generic nouns, never make a
# property on their own.
BREAK_WORDS = frozenset(
    """characterized characterised defined described due refers refer referring resulting results result
caused causes associated involving involves involve including includes include especially usually typically
frequently generally commonly mainly mostly rarely sometimes occurs occur occurring observed seen present
presence affecting affects affected leading leads lead considered known called term terms type types
form forms kind kinds e g i e etc ie eg has have had being does do using used use shows show showing
reduces improves improve available ideal designed made makes works we our study studies propose
proposes relate relates report reports suggest suggests confirm confirms discuss plays developed evaluated based
existing approaches suffer substantially further contains contain enables enable supports support encodes encode
stabilizes regulates binds activates inhibits blocks coordinated""".split()
)
GENERIC_WORDS = frozenset(
    """abnormality abnormalities anomaly anomalies finding findings feature features condition conditions
disease diseases disorder disorders syndrome syndromes patient patients individual individuals
structure morphology function level levels size region part portion side area areas number amount
degree increase decrease change changes state process thing things case cases normal abnormal increased
decreased elevated excessive small large long short high low mild severe surface production presence absence
development formation growth appearance shape position length width time age manner way person people child
children birth life whole entire usual directs direct rare instance instances""".split()
)
ADJECTIVE_ENDINGS = ("al", "ive", "ic", "ed", "ing", "ous", "ary", "ile", "ar")
_TOKEN = re.compile(r"[a-z0-9]+")
_CLAUSE = re.compile(r"[.;:,|!?\n()\[\]]+")
TERM_SEPARATOR = re.compile(r"\s*[;|]\s*")


@dataclass(frozen=True)
class Property:
    """A phrase of the gold node and the field it must occur in (``name`` or a text field)."""

    field: str
    phrase: str


@dataclass(frozen=True)
class PropertyRules:
    """Which fields give properties and how: the built-in field names by default; the generic synthesizer adds
    what a user SKB's data shows (:mod:`grasp_core.questions.generic_queries`)."""

    skip_fields: frozenset[str] = NON_PROPERTY_FIELDS
    term_fields: frozenset[str] = TERM_FIELDS
    name_types: frozenset[str] = frozenset()  # node types whose name also gives properties


def tokens(text: str) -> list[str]:
    """Lowercase alphanumeric tokens: the unit of the property-match rule."""
    return _TOKEN.findall(text.lower())


def is_meaningful(phrase: str) -> bool:
    """True for a property phrase: no number, a content word that is neither a stopword nor generic, and a
    lone word only when it is a noun-like word of five letters or more (not "-ing", "-ed", "-ly")."""
    toks = tokens(phrase)
    if not toks or any(any(c.isdigit() for c in t) for t in toks):
        return False
    content = [t for t in toks if t not in STOPWORDS and t not in BREAK_WORDS and t not in GENERIC_WORDS]
    if not content:
        return False
    return len(toks) > 1 or (len(content[0]) >= 5 and not content[0].endswith(("ing", "ed", "ly")))


def noun_phrases(text: str) -> list[str]:
    """Candidate noun phrases of ``text``: runs of content words (last three kept, the head noun last).

    A run next to a number is part of a numbered name or a measurement ("chromosome 6", "4 mm wide"), not a
    phrase of its own.
    """
    out = []
    for clause in _CLAUSE.split(text):
        run: list[str] = []
        after_number = False
        for word in [*clause.split(), ""]:
            core = word.strip("\"'`*/")
            toks = tokens(core)
            numeric = any(c.isdigit() for c in core)
            if toks and not numeric and not any(t in STOPWORDS or t in BREAK_WORDS for t in toks):
                run.append(core)
                continue
            phrase = " ".join(run[-3:])
            if run and not after_number and not numeric and is_meaningful(phrase):
                out.append(phrase)
            run, after_number = [], numeric
    return list(dict.fromkeys(out))


def is_name_phrase(phrase: str, name: str) -> bool:
    """A part of a name that names a kind of thing: two words or more but fewer than the name, its head not an
    adjective ("muscular dystrophy", not "autosomal recessive" or "seizures")."""
    toks = tokens(phrase)
    return 2 <= len(toks) < len(tokens(name)) and not toks[-1].endswith(ADJECTIVE_ENDINGS)


def normalized(text: str) -> str:
    """`` a b | c d `` : the tokens of each clause, clauses fenced so that no phrase spans two."""
    return " " + " | ".join(" ".join(tokens(c)) for c in _CLAUSE.split(text)) + " "

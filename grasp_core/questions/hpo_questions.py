"""How people ask about the HPO graph: question patterns per ``hpo`` template and register (step 3 of the protocol).

Four registers: a **clinician** (differential diagnosis, gene panels), a patient's **family** (lay words, a
child's symptoms), a **researcher** (annotations, ontology terms) and **terse** search-box queries ("genes behind
marfan syndrome"). A pattern fills ``{a}``/``{b}`` (the anchors, in template path order), ``{T}`` (the plural
noun of the target type, or "forms of <name phrase>" when the property is one) and ``{P}`` (the property clause,
with its leading space, or nothing). Gene targets have no property (an hpo gene has no text), so their
patterns have no ``{P}``. Every pattern of a template must ask for exactly what the template's path means:
``parent-child|down`` targets are the anchor's direct sub-terms, ``|up`` its direct parents.

The tables are ``data/hpo_questions.json``: one key per constant below, of the same name.
"""

from __future__ import annotations

from grasp_core.io import read_package_json

_TABLES = read_package_json("grasp_core.questions", "hpo_questions.json")

REGISTERS: tuple[str, ...] = _TABLES["REGISTERS"]
# The plural noun of a target type, per register.
TARGET_NOUNS: dict[str, dict[str, tuple[str, ...]]] = _TABLES["TARGET_NOUNS"]
# ``{T}`` when the property is a phrase of the target disease's name ("forms of muscular dystrophy").
NAME_PHRASE_NOUNS: tuple[str, ...] = _TABLES["NAME_PHRASE_NOUNS"]
# The property clause of a target, by the field its phrase comes from and register; ``{p}`` is the phrase.
PROPERTY_CLAUSES: dict[str, dict[str, tuple[str, ...]]] = _TABLES["PROPERTY_CLAUSES"]
# Plain-language versions of the commonest disease course and inheritance terms, for the family register.
LAY_TERMS: dict[str, tuple[str, ...]] = _TABLES["LAY_TERMS"]
# Question patterns per template id and register.
PATTERNS: dict[str, dict[str, tuple[str, ...]]] = _TABLES["PATTERNS"]
# A context sentence some questions start with, per register (the terse register has none).
CONTEXTS: dict[str, tuple[str, ...]] = _TABLES["CONTEXTS"]

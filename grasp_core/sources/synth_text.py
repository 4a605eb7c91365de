"""Word lists and sentence grammars for the synthetic SKBs (``synth.py``).

Every list is grouped by *topic* (a Prime organ system, an Amazon shopping domain, a MAG research area):
a node gets one topic and draws most of its words from it, so texts of linked nodes share vocabulary the
way real ones do. The lists are ``data/synth_words.json``: one key per constant below, of the same name. Synonym
groups (``kidney``/``renal``, ``waterproof``/``water resistant``, :mod:`grasp_core.questions.synonyms`, shared with
the questions) make a name and a description say the same thing in different words, which keeps lexical retrieval
honest.
"""

from __future__ import annotations

from grasp_core.io import read_package_json

_WORDS = read_package_json("grasp_core.sources", "synth_words.json")

# --------------------------------------------------------------------------------------------- shared
DIGITS = "0123456789"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
SYLLABLES: tuple[str, ...] = _WORDS["SYLLABLES"]

# ---------------------------------------------------------------------------------------------- prime
# topic -> (organs/tissues, symptoms/features, molecules)
PRIME_TOPICS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = _WORDS["PRIME_TOPICS"]
PRIME_MODIFIERS: tuple[str, ...] = _WORDS["PRIME_MODIFIERS"]
PRIME_CONDITIONS: tuple[str, ...] = _WORDS["PRIME_CONDITIONS"]
PRIME_EPONYMS: tuple[str, ...] = _WORDS["PRIME_EPONYMS"]
PRIME_ABNORMAL: tuple[str, ...] = _WORDS["PRIME_ABNORMAL"]
PRIME_FEATURES: tuple[str, ...] = _WORDS["PRIME_FEATURES"]
PRIME_GENE_PREFIXES: tuple[str, ...] = _WORDS["PRIME_GENE_PREFIXES"]
PRIME_PROTEIN_CLASSES: tuple[str, ...] = _WORDS["PRIME_PROTEIN_CLASSES"]
PRIME_GENE_ACTIONS: tuple[str, ...] = _WORDS["PRIME_GENE_ACTIONS"]
PRIME_DOMAINS: tuple[str, ...] = _WORDS["PRIME_DOMAINS"]
PRIME_DRUG_SUFFIXES: tuple[str, ...] = _WORDS["PRIME_DRUG_SUFFIXES"]
PRIME_DRUG_CLASSES: tuple[str, ...] = _WORDS["PRIME_DRUG_CLASSES"]
PRIME_DRUG_ACTIONS: tuple[str, ...] = _WORDS["PRIME_DRUG_ACTIONS"]
PRIME_DRUG_FORMS: tuple[str, ...] = _WORDS["PRIME_DRUG_FORMS"]
PRIME_PROCESSES: tuple[str, ...] = _WORDS["PRIME_PROCESSES"]
PRIME_REGULATION: tuple[str, ...] = _WORDS["PRIME_REGULATION"]
PRIME_MF_ACTIVITIES: tuple[str, ...] = _WORDS["PRIME_MF_ACTIVITIES"]
PRIME_COMPONENTS: tuple[str, ...] = _WORDS["PRIME_COMPONENTS"]
PRIME_PATHWAY_HEADS: tuple[str, ...] = _WORDS["PRIME_PATHWAY_HEADS"]
PRIME_EXPOSURES: tuple[str, ...] = _WORDS["PRIME_EXPOSURES"]
PRIME_ANATOMY_ADJ: tuple[str, ...] = _WORDS["PRIME_ANATOMY_ADJ"]
PRIME_ANATOMY_PARTS: tuple[str, ...] = _WORDS["PRIME_ANATOMY_PARTS"]
PRIME_SOURCES: dict[str, tuple[str, ...]] = _WORDS["PRIME_SOURCES"]

# --------------------------------------------------------------------------------------------- amazon
# domain -> (product nouns, uses)
AMAZON_DOMAINS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = _WORDS["AMAZON_DOMAINS"]
AMAZON_CATEGORY_NOUNS: tuple[str, ...] = _WORDS["AMAZON_CATEGORY_NOUNS"]
AMAZON_COLORS: tuple[str, ...] = _WORDS["AMAZON_COLORS"]
AMAZON_COLOR_MODIFIERS: tuple[str, ...] = _WORDS["AMAZON_COLOR_MODIFIERS"]
AMAZON_BRAND_SUFFIXES: tuple[str, ...] = _WORDS["AMAZON_BRAND_SUFFIXES"]
AMAZON_ADJECTIVES: tuple[str, ...] = _WORDS["AMAZON_ADJECTIVES"]
AMAZON_MATERIALS: tuple[str, ...] = _WORDS["AMAZON_MATERIALS"]
AMAZON_FEATURES: tuple[str, ...] = _WORDS["AMAZON_FEATURES"]
AMAZON_OPINIONS: tuple[str, ...] = _WORDS["AMAZON_OPINIONS"]
AMAZON_REVIEW_SUMMARIES: tuple[str, ...] = _WORDS["AMAZON_REVIEW_SUMMARIES"]

# ------------------------------------------------------------------------------------------------ mag
# area -> (topic terms, method terms)
MAG_AREAS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = _WORDS["MAG_AREAS"]
MAG_TITLE_PATTERNS: tuple[str, ...] = _WORDS["MAG_TITLE_PATTERNS"]
MAG_ADJECTIVES: tuple[str, ...] = _WORDS["MAG_ADJECTIVES"]
MAG_ABSTRACT_SENTENCES: tuple[str, ...] = _WORDS["MAG_ABSTRACT_SENTENCES"]
MAG_VENUES: tuple[str, ...] = _WORDS["MAG_VENUES"]
MAG_FIRST_NAMES: tuple[str, ...] = _WORDS["MAG_FIRST_NAMES"]
MAG_LAST_NAMES: tuple[str, ...] = _WORDS["MAG_LAST_NAMES"]
MAG_INSTITUTION_PATTERNS: tuple[str, ...] = _WORDS["MAG_INSTITUTION_PATTERNS"]
MAG_PLACES: tuple[str, ...] = _WORDS["MAG_PLACES"]


def article(phrase: str) -> str:
    """``phrase`` with its indefinite article ("an acute ...", "a renal ...")."""
    return f"{'an' if phrase[:1].lower() in 'aeiou' else 'a'} {phrase}"

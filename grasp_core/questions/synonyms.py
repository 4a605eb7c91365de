"""Synonym groups of the synthetic vocabulary (``kidney``/``renal``/``nephric``, ``waterproof``/``water resistant``)
and the swap of a phrase, or one of its words, for another word of its group.

The texts of the synthetic SKBs (:mod:`grasp_core.sources.synth`) and the property phrases of their questions
(:mod:`grasp_core.questions.querygen`) both swap, so a name, its description and a question about it often say the
same thing in different words, which keeps lexical retrieval honest.
"""

from __future__ import annotations

import random

SYNONYMS: tuple[tuple[str, ...], ...] = (
    ("kidney", "renal", "nephric"),
    ("heart", "cardiac", "myocardial"),
    ("liver", "hepatic"),
    ("lung", "pulmonary", "respiratory"),
    ("skin", "cutaneous", "dermal"),
    ("brain", "cerebral", "neural"),
    ("bone", "skeletal", "osseous"),
    ("eye", "ocular", "ophthalmic"),
    ("blood", "hematologic", "haematological"),
    ("stomach", "gastric"),
    ("bowel", "intestinal", "enteric"),
    ("muscle", "muscular", "myopathic"),
    ("ear", "auditory", "otic"),
    ("joint", "articular"),
    ("vessel", "vascular"),
    ("nerve", "neuronal"),
    ("gland", "glandular"),
    ("tooth", "dental"),
    ("breast", "mammary"),
    ("pancreas", "pancreatic"),
    ("enlarged", "hypertrophic", "swollen"),
    ("reduced", "decreased", "diminished", "low"),
    ("increased", "elevated", "raised", "high"),
    ("absent", "missing", "lacking"),
    ("inflammation", "inflammatory", "itis"),
    ("pain", "ache", "discomfort"),
    ("tumor", "neoplasm", "growth"),
    ("inherited", "hereditary", "familial", "genetic"),
    ("congenital", "present at birth", "inborn"),
    ("waterproof", "water resistant", "water repellent"),
    ("lightweight", "light", "featherweight"),
    ("durable", "sturdy", "rugged", "heavy duty"),
    ("portable", "compact", "travel size"),
    ("cheap", "affordable", "budget", "inexpensive"),
    ("small", "mini", "little"),
    ("large", "big", "oversized"),
    ("stainless steel", "steel"),
    ("bag", "pouch", "case"),
    ("bottle", "flask"),
    ("method", "approach", "technique"),
    ("model", "framework"),
    ("analysis", "study", "investigation"),
    ("efficient", "fast", "scalable"),
    ("novel", "new"),
    ("robust", "reliable", "stable"),
)
_SYNONYM_OF = {w: group for group in SYNONYMS for w in group}


def swap_synonym(r: random.Random, phrase: str) -> str:
    """``phrase`` with the whole phrase or one word swapped for a synonym, each half of the time."""
    if phrase in _SYNONYM_OF and r.random() < 0.5:
        return r.choice(_SYNONYM_OF[phrase])
    words = phrase.split()
    hits = [i for i, w in enumerate(words) if w in _SYNONYM_OF]
    if hits and r.random() < 0.5:
        i = r.choice(hits)
        words[i] = r.choice(_SYNONYM_OF[words[i]])
    return " ".join(words)

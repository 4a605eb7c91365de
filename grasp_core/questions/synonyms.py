"""Synonym groups of the synthetic vocabulary (``kidney``/``renal``/``nephric``, ``waterproof``/``water resistant``)
and the swap of a phrase, or one of its words, for another word of its group.

The texts of the synthetic SKBs (:mod:`grasp_core.sources.synth`) and the property phrases of their questions
(:mod:`grasp_core.questions.querygen`) both swap, so a name, its description and a question about it often say the
same thing in different words, which keeps lexical retrieval honest. The groups are ``data/synonyms.json``.
"""

from __future__ import annotations

import random

from grasp_core.io import read_package_json

SYNONYMS: tuple[tuple[str, ...], ...] = read_package_json("grasp_core.questions", "synonyms.json")
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

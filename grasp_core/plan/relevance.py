"""The relevance text of a plan: what the query asks of its answers once the anchors are taken out.

The programmatic teacher writes it into its plans, and the executor derives the same text when a plan leaves
``relevance_text`` empty (the ``cpu`` planner does: a small model trained from scratch cannot copy free text
reliably, so it only decides the structure and the executor fills in the rest deterministically).
"""

from __future__ import annotations

import re
from collections.abc import Sequence


def relevance_text(query: str, mentions: Sequence[str]) -> str:
    """The query minus the anchor mentions (case-insensitive), whitespace and dangling punctuation tidied.

    A mention is cut as whole words: the gazetteer writes an exact match the way the node's name is written, which
    can be the stem of the query's word ("Exception" for "exceptions"), and the word's inflection goes with it
    rather than staying behind as a stray "s". Falls back to the whole query when nothing would be left."""
    text = query
    for m in sorted(mentions, key=len, reverse=True):
        if m.strip():
            text = re.sub(_whole_words(m.strip()), " ", text, flags=re.IGNORECASE)
    text = re.sub(r"\s+([,.;:?!])", r"\1", re.sub(r"\s+", " ", text)).strip(" ,;:")
    return text if text.strip(" .?!") else query


def _whole_words(mention: str) -> str:
    """A pattern of ``mention`` that starts at a word start and runs on to the end of the word it ends in."""
    start = r"(?<!\w)" if re.match(r"\w", mention) else ""
    end = r"\w*" if re.search(r"\w$", mention) else ""
    return start + re.escape(mention) + end

"""Entity linking (paper §3.1): every anchor/target mention -> its most similar nodes, per node type.

A mention is embedded (names' token limit) and searched in the NAME index of each of its predicted types (names
and aliases: a node's cosine is its best one); the top ``top_k`` nodes of each type are kept with their cosine and
degree. A span that is exactly a name or an alias (``Mention.exact``) links every node it names first (cosine 1,
highest degree first, at most ``max_exact``), so an ambiguous alias keeps all its owners. Because an extractor sometimes mislabels
a mention, exactly one further type is added when its best match is near-exact (``cosine >= near_exact``) or
beats the predicted types' best by at least ``extra_type_margin``; every other type of the schema is checked and
the best-scoring one is the candidate. Attribute mentions are listed without links.

Decisions the paper leaves open:
- A predicted type the schema does not know (an LLM typo) is dropped; a mention left with no known type gets
  the best-scoring type of the schema through the extra-type rule (its predicted best counts as -inf).
- Links are ordered by type: predicted types first (in predicted order), then the added type.
- Work is batched: one encoder call for all linkable mentions of all queries, one index search per node type.
  :class:`NameHits` holds those hits per distinct text, so an extractor that searched its candidate spans and
  mention texts already (the gazetteer) hands them on and linking neither encodes nor searches again: a
  question costs one encoder call and one pass over the name index (the pass is memory-bound: a search of 5
  vectors costs what a search of 1 does).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from grasp_core.entities.config import LinkingConfig
from grasp_core.entities.table import EntityRow, EntityTable, Link, Role
from grasp_core.skb.format import SKB


@dataclass(frozen=True)
class Mention:
    """One extracted mention. ``parent`` is the 0-based index of the longer mention it is nested in; ``exact`` the
    nodes whose name or alias the mention's span is (normalized), highest degree first."""

    text: str
    types: tuple[str, ...]
    role: Role
    parent: int | None = None
    exact: tuple[int, ...] = ()


class NameHits:
    """Per node type, the top-``top_k`` name-index hits (names and aliases) of texts; each distinct text is encoded
    and searched once: :meth:`add` encodes the texts not seen yet in one call and searches each type once."""

    def __init__(self, index, encoder, types: Sequence[str], cfg: LinkingConfig = LinkingConfig()):
        self.index, self.encoder, self.types, self.cfg = index, encoder, list(types), cfg
        self._row: dict[str, int] = {}
        empty = (np.zeros((0, cfg.top_k), np.float32), np.zeros((0, cfg.top_k), np.int64))
        self._hits: dict[str, tuple[np.ndarray, np.ndarray]] = {t: empty for t in self.types}

    def add(self, texts: Iterable[str]) -> None:
        new = [t for t in dict.fromkeys(texts) if t not in self._row]
        if not new:
            return
        vectors = self.encoder.encode(new, max_tokens=self.cfg.name_max_tokens)
        for t in self.types:
            scores, ids = self.index.search(t, "name", vectors, self.cfg.top_k)
            self._hits[t] = (np.concatenate([self._hits[t][0], scores]), np.concatenate([self._hits[t][1], ids]))
        self._row.update({text: i for i, text in enumerate(new, start=len(self._row))})

    def of(self, texts: Sequence[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """type -> (scores float32 [n, top_k], node ids int64 [n, top_k]) of ``texts`` (added first if new)."""
        self.add(texts)
        rows = np.asarray([self._row[t] for t in texts], np.int64)
        return {t: (scores[rows], ids[rows]) for t, (scores, ids) in self._hits.items()}

    def best(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(cosine [n], node id [n]) of each text's best node over all types (id -1 when no type has one)."""
        hits = self.of(texts)
        if not self.types:
            return np.full(len(texts), -np.inf, np.float32), np.full(len(texts), -1, np.int64)
        scores = np.stack([hits[t][0][:, 0] for t in self.types], axis=1)
        ids = np.stack([hits[t][1][:, 0] for t in self.types], axis=1)
        pick = np.argmax(scores, axis=1)  # ties: the first type, as a merged all-types search orders them
        return scores[np.arange(len(texts)), pick], ids[np.arange(len(texts)), pick]


def link_mentions(
    mentions: Sequence[Mention], skb: SKB, index, encoder, cfg: LinkingConfig = LinkingConfig()
) -> EntityTable:
    """Link the mentions of one query into its entity table."""
    return link_many([mentions], skb, index, encoder, cfg)[0]


def link_many(
    mention_lists: Sequence[Sequence[Mention]],
    skb: SKB,
    index,
    encoder,
    cfg: LinkingConfig = LinkingConfig(),
    hits: NameHits | None = None,
) -> list[EntityTable]:
    """Link the mentions of many queries at once (one encoder call, one name-index search per node type; none
    for the texts ``hits`` holds already)."""
    known = list(skb.schema.node_types)
    linkable = [
        (q, m)
        for q, ms in enumerate(mention_lists)
        for m, mention in enumerate(ms)
        if mention.role != "attribute" and mention.text.strip()
    ]
    hits = hits if hits is not None else NameHits(index, encoder, known, cfg)
    found = hits.of([mention_lists[q][m].text for q, m in linkable])  # type -> (scores [n, k], ids [n, k])
    links_of: dict[tuple[int, int], tuple[tuple[str, ...], dict[str, tuple[Link, ...]]]] = {}
    names, degrees, node_types = skb.nodes["name"].to_numpy(), skb.degrees, skb.nodes["type"].to_numpy()
    for row, (q, m) in enumerate(linkable):
        mention = mention_lists[q][m]
        predicted = tuple(dict.fromkeys(t for t in mention.types if t in skb.schema.node_types))
        types = predicted + _extra_type(predicted, known, found, row, cfg)
        links = {t: _links(mention.exact, found[t], row, t, node_types, names, degrees, cfg) for t in types}
        links_of[(q, m)] = (types, links)
    tables = []
    for q, ms in enumerate(mention_lists):
        rows = []
        for m, mention in enumerate(ms):
            types, links = links_of.get((q, m), (mention.types, {}))
            rows.append(EntityRow(f"E{m + 1}", mention.text, mention.role, tuple(types), links, mention.parent))
        tables.append(EntityTable(tuple(rows)))
    return tables


def _links(exact, hits, row: int, node_type: str, types, names, degrees, cfg: LinkingConfig) -> tuple[Link, ...]:
    """The exact matches of the type (cosine 1: every node the span names, by degree), then the dense ones."""
    first = [i for i in exact if types[i] == node_type][: cfg.max_exact]
    out = [Link(int(i), str(names[i]), 1.0, int(degrees[i])) for i in first]
    dense = [(s, i) for s, i in zip(hits[0][row], hits[1][row]) if i >= 0 and i not in first]
    out += [Link(int(i), str(names[i]), float(s), int(degrees[i])) for s, i in dense[: max(0, cfg.top_k - len(first))]]
    return tuple(out)


def _extra_type(predicted: tuple[str, ...], known: list[str], hits, row: int, cfg: LinkingConfig) -> tuple[str, ...]:
    """The one further type the paper's rule admits (or nothing)."""

    def best(t: str) -> float:
        scores, ids = hits[t][0][row], hits[t][1][row]
        valid = scores[ids >= 0]
        return float(valid.max()) if len(valid) else -np.inf

    others = [(best(t), t) for t in known if t not in predicted]
    if not others:
        return ()
    score, t = max(others, key=lambda x: x[0])
    predicted_best = max((best(p) for p in predicted), default=-np.inf)
    if score > -np.inf and (score >= cfg.near_exact or score >= predicted_best + cfg.extra_type_margin):
        return (t,)
    return ()

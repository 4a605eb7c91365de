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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

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


@dataclass(frozen=True)
class LinkingConfig:
    top_k: int = field(default=3, metadata={"help": "Nodes kept per node type for each mention (paper: 3)."})
    near_exact: float = field(
        default=0.99, metadata={"help": "A non-predicted type is added when its best cosine reaches this."}
    )
    extra_type_margin: float = field(
        default=0.02,
        metadata={"help": "... or when its best cosine beats the predicted types' best by at least this much."},
    )
    name_max_tokens: int = field(default=64, metadata={"help": "Token limit when embedding a mention (names)."})
    max_exact: int = field(
        default=10, metadata={"help": "Exact (name or alias) matches kept per type, before the dense ones."}
    )


def link_mentions(
    mentions: Sequence[Mention], skb: SKB, index, encoder, cfg: LinkingConfig = LinkingConfig()
) -> EntityTable:
    """Link the mentions of one query into its entity table."""
    return link_many([mentions], skb, index, encoder, cfg)[0]


def link_many(
    mention_lists: Sequence[Sequence[Mention]], skb: SKB, index, encoder, cfg: LinkingConfig = LinkingConfig()
) -> list[EntityTable]:
    """Link the mentions of many queries at once (one encoder call, one name-index search per node type)."""
    known = list(skb.schema.node_types)
    linkable = [
        (q, m)
        for q, ms in enumerate(mention_lists)
        for m, mention in enumerate(ms)
        if mention.role != "attribute" and mention.text.strip()
    ]
    hits = _search_all_types(
        [mention_lists[q][m].text for q, m in linkable], known, index, encoder, cfg
    )  # type -> (scores [n, k], ids [n, k])
    links_of: dict[tuple[int, int], tuple[tuple[str, ...], dict[str, tuple[Link, ...]]]] = {}
    names, degrees, node_types = skb.nodes["name"].to_numpy(), skb.degrees, skb.nodes["type"].to_numpy()
    for row, (q, m) in enumerate(linkable):
        mention = mention_lists[q][m]
        predicted = tuple(dict.fromkeys(t for t in mention.types if t in skb.schema.node_types))
        types = predicted + _extra_type(predicted, known, hits, row, cfg)
        links = {t: _links(mention.exact, hits[t], row, t, node_types, names, degrees, cfg) for t in types}
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


def _search_all_types(texts: list[str], types: list[str], index, encoder, cfg: LinkingConfig):
    if not texts:
        empty = (np.zeros((0, cfg.top_k), np.float32), np.zeros((0, cfg.top_k), np.int64))
        return {t: empty for t in types}
    vectors = encoder.encode(texts, max_tokens=cfg.name_max_tokens)
    return {t: index.search(t, "name", vectors, cfg.top_k) for t in types}


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

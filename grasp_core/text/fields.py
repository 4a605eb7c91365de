"""Decomposition of every node's document into fields, for mFAR (Li et al., ICLR 2025).

Fields of an SKB (the same list for every node; a node that has no value for a field gets ``""``):

- ``doc``: the whole document (type + name + text fields), mFAR's "1 + n" setting where the single
  whole-document field sits next to the n fields; its dense vectors are the document index's.
- ``name``: the node name; its dense vectors are the name index's.
- one field per text field of the schema (``description``, ``definition``, ...);
- ``rel:<relation>`` per relation type: the names of the node's neighbours over that relation (either
  direction), highest degree first (ties: smaller node id), at most ``max_neighbours``, joined by ``"; "``.
  Degree order keeps the best-known neighbours when a node has thousands (a product's ``also_view``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grasp_core.skb.format import SKB

DOC, NAME = "doc", "name"
RELATION_PREFIX = "rel:"


def field_names(skb: SKB) -> list[str]:
    return [DOC, NAME, *skb.schema.text_fields, *(RELATION_PREFIX + r for r in skb.schema.relation_names)]


def relation_texts(skb: SKB, max_neighbours: int = 32) -> dict[str, list[str]]:
    """For each relation: per node, the names of its top-``max_neighbours`` neighbours by degree (or ``""``)."""
    names = skb.nodes["name"].astype(str).to_numpy()
    degree = skb.degrees
    edges = skb.edges
    out: dict[str, list[str]] = {}
    for rel in skb.schema.relation_names:
        sel = edges["rel"].to_numpy() == rel
        src, dst = edges["src"].to_numpy()[sel], edges["dst"].to_numpy()[sel]
        node = np.concatenate([src, dst])
        nbr = np.concatenate([dst, src])
        pairs = pd.DataFrame({"node": node, "nbr": nbr}).drop_duplicates()
        pairs["deg"] = degree[pairs["nbr"].to_numpy()]
        pairs = pairs.sort_values(["node", "deg", "nbr"], ascending=[True, False, True])
        pairs = pairs[pairs.groupby("node").cumcount() < max_neighbours]
        pairs["nbr_name"] = names[pairs["nbr"].to_numpy()]
        joined = pairs.groupby("node", sort=False)["nbr_name"].agg("; ".join)
        texts = [""] * skb.num_nodes
        for node_id, text in joined.items():
            texts[int(node_id)] = text
        out[rel] = texts
    return out


def field_texts(skb: SKB, max_neighbours: int = 32) -> dict[str, list[str]]:
    """Every field of :func:`field_names` -> one text per node (``""`` where the node has no value)."""
    nodes = skb.nodes
    out = {DOC: skb.documents(), NAME: nodes["name"].astype(str).tolist()}
    for f in skb.schema.text_fields:
        out[f] = [v if isinstance(v, str) else "" for v in nodes[f]]
    for rel, texts in relation_texts(skb, max_neighbours).items():
        out[RELATION_PREFIX + rel] = texts
    return out

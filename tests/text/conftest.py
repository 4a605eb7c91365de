"""A handmade tiny Amazon-shaped SKB whose queries need the right fields.

Each query names a product's brand, colour and category; the gold product is the one linked to all
three. Every product's ``review`` field names *other* brands, colours and categories, so the whole
document and the review field are misleading while the relation fields are exact: uniform field
weights rank badly, learned weights should not.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grasp_core.embed.config import EncoderConfig
from grasp_core.embed.encoder import load_encoder
from grasp_core.embed.node_embeddings import build_node_embeddings, load_node_embeddings
from grasp_core.embed.vector_index import NodeIndex
from grasp_core.skb.format import SKB, validate
from grasp_core.skb.schema import Relation, Schema

BRANDS = ["Acme", "Zentro", "Kovax", "Lumina", "Brisko", "Harlow", "Tarvo", "Quell"]
COLORS = ["red", "blue", "green", "black", "white", "yellow"]
CATEGORIES = ["kettle", "backpack", "lamp", "headphones", "blender"]
WORDS = "sturdy compact light portable classic modern durable elegant simple handy".split()


def tiny_skb(num_products: int = 80, seed: int = 0) -> SKB:
    rng = np.random.default_rng(seed)
    schema = Schema(
        "tiny-amazon",
        {"product": ("description", "review"), "brand": (), "color": (), "category": ()},
        (
            Relation("has_brand", "product", "brand"),
            Relation("has_color", "product", "color"),
            Relation("has_category", "product", "category"),
            Relation("also_buy", "product", "product"),
        ),
    )
    rows = []
    for kind, names in (("brand", BRANDS), ("color", COLORS), ("category", CATEGORIES)):
        rows += [{"type": kind, "name": n, "description": None, "review": None} for n in names]
    offset = {"brand": 0, "color": len(BRANDS), "category": len(BRANDS) + len(COLORS)}
    first_product = len(rows)
    combos = [(b, c, k) for b in range(len(BRANDS)) for c in range(len(COLORS)) for k in range(len(CATEGORIES))]
    chosen = [combos[i] for i in rng.choice(len(combos), num_products, replace=False)]
    edges = []
    for p, (b, c, k) in enumerate(chosen):
        pid = first_product + p
        noise = [
            f"{BRANDS[rng.integers(len(BRANDS))]} {COLORS[rng.integers(len(COLORS))]} "
            f"{CATEGORIES[rng.integers(len(CATEGORIES))]}"
            for _ in range(4)
        ]
        rows.append(
            {
                "type": "product",
                "name": f"Item {p:03d}",
                "description": " ".join(rng.choice(WORDS, 6)),
                "review": "I compared it with " + ", ".join(noise) + ".",
            }
        )
        edges += [
            (pid, "has_brand", offset["brand"] + b),
            (pid, "has_color", offset["color"] + c),
            (pid, "has_category", offset["category"] + k),
        ]
        if p:
            edges.append((pid, "also_buy", first_product + int(rng.integers(p))))
    nodes = pd.DataFrame(rows)
    nodes.insert(0, "key", [f"n{i}" for i in range(len(nodes))])
    nodes.insert(0, "node_id", np.arange(len(nodes)))
    queries = []
    for p, (b, c, k) in enumerate(chosen):
        split = "train" if p % 4 < 2 else ("val" if p % 4 == 2 else "test")
        phr = ["a {c} {k} made by {b}", "{b} {k}, {c} please", "looking for {b}'s {c} {k}"][p % 3]
        queries.append(
            {
                "qid": p,
                "split": split,
                "query": phr.format(b=BRANDS[b], c=COLORS[c], k=CATEGORIES[k]),
                "answer_ids": [first_product + p],
            }
        )
    skb = SKB(schema, nodes, pd.DataFrame(edges, columns=["src", "rel", "dst"]), pd.DataFrame(queries))
    validate(skb)
    return skb


@pytest.fixture(scope="session")
def skb() -> SKB:
    return tiny_skb()


@pytest.fixture(scope="session")
def encoder():
    return load_encoder(EncoderConfig())


@pytest.fixture(scope="session")
def node_index(skb, encoder, tmp_path_factory) -> NodeIndex:
    out = build_node_embeddings(skb, encoder, tmp_path_factory.mktemp("emb") / "emb")
    return NodeIndex.build(skb, load_node_embeddings(out))

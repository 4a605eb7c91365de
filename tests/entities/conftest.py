"""A tiny Prime-shaped SKB with names chosen for linking, nesting, synonyms and symbols; real MiniLM + faiss."""

import numpy as np
import pandas as pd
import pytest

from grasp_core.embed.config import EncoderConfig
from grasp_core.embed.encoder import load_encoder
from grasp_core.embed.node_embeddings import build_node_embeddings, load_node_embeddings
from grasp_core.embed.vector_index import NodeIndex
from grasp_core.skb.format import SKB, aliases_from_fields, validate
from grasp_core.skb.schema import Relation, Schema

NODES = [  # type, name, synonyms
    ("disease", "Marfan syndrome", "MFS"),
    ("disease", "retinitis pigmentosa", None),
    ("disease", "type 2 diabetes", "adult-onset diabetes; T2D"),
    ("gene/protein", "FBN1", None),
    ("gene/protein", "MET", None),
    ("gene/protein", "RHO", None),
    ("drug", "metformin", None),
    ("drug", "aspirin", None),
    ("effect/phenotype", "Aortic root aneurysm", None),
    ("effect/phenotype", "Tall stature", "Increased body height"),
    ("effect/phenotype", "Night blindness", "Nyctalopia"),
    ("anatomy", "retina", None),
    ("anatomy", "aorta", None),
    ("anatomy", "aortic root", None),
]
EDGES = [  # src, rel, dst
    (3, "associated with", 0),
    (0, "phenotype present", 9),
    (0, "phenotype present", 8),
    (5, "associated with", 1),
    (1, "phenotype present", 10),
    (6, "indication", 2),
    (3, "ppi", 4),
    (11, "expression present", 5),
    (12, "expression present", 3),
    (7, "indication", 2),
]
SCHEMA = Schema(
    "tiny-prime",
    {"disease": ("synonyms",), "gene/protein": (), "drug": (), "effect/phenotype": ("synonyms",), "anatomy": ()},
    (
        Relation("associated with", "gene/protein", "disease"),
        Relation("phenotype present", "disease", "effect/phenotype"),
        Relation("indication", "drug", "disease"),
        Relation("ppi", "gene/protein", "gene/protein"),
        Relation("expression present", "anatomy", "gene/protein"),
    ),
)


def ids(skb: SKB, *names: str) -> list[int]:
    by_name = {n: i for i, n in enumerate(skb.nodes["name"])}
    return [by_name[n] for n in names]


@pytest.fixture(scope="session")
def skb() -> SKB:
    nodes = pd.DataFrame(
        {
            "node_id": np.arange(len(NODES)),
            "key": [f"K{i}" for i in range(len(NODES))],
            "type": [t for t, _, _ in NODES],
            "name": [n for _, n, _ in NODES],
            "synonyms": [s for _, _, s in NODES],
        }
    )
    nodes["aliases"] = aliases_from_fields(nodes, ("synonyms",))
    edges = pd.DataFrame(EDGES, columns=["src", "rel", "dst"])
    queries = pd.DataFrame({"qid": [], "split": [], "query": [], "answer_ids": []})
    skb = SKB(SCHEMA, nodes, edges, queries)
    validate(skb)
    return skb


@pytest.fixture(scope="session")
def encoder():
    return load_encoder(EncoderConfig())


@pytest.fixture(scope="session")
def index(skb, encoder, tmp_path_factory):
    out = build_node_embeddings(skb, encoder, tmp_path_factory.mktemp("emb") / "embeddings")
    return NodeIndex.build(skb, load_node_embeddings(out))


class CountingEncoder:
    """``encoder`` with every ``encode`` call's texts recorded in ``calls``."""

    def __init__(self, encoder):
        self.encoder, self.dim, self.calls = encoder, encoder.dim, []

    def encode(self, texts, max_tokens, show_progress=False):
        self.calls.append(list(texts))
        return self.encoder.encode(texts, max_tokens)

import numpy as np
import pandas as pd
import pytest

from grasp_core.embed.config import EncoderConfig
from grasp_core.embed.encoder import load_encoder
from grasp_core.skb.format import SKB
from grasp_core.skb.schema import Relation, Schema

NODES = [
    ("drug", "aspirin", "pain reliever that also thins the blood"),
    ("drug", "ibuprofen", "anti-inflammatory drug for pain and fever"),
    ("drug", "metformin", "first-line medication for type 2 diabetes"),
    ("disease", "type 2 diabetes", "a chronic condition affecting blood sugar"),
    ("disease", "migraine", "recurrent headaches, often with nausea"),
    ("disease", "retinitis pigmentosa", "inherited degeneration of the retina"),
    ("anatomy", "retina", "light-sensitive tissue at the back of the eye"),
    ("anatomy", "liver", None),
]


@pytest.fixture(scope="session")
def encoder():
    return load_encoder(EncoderConfig())


@pytest.fixture
def skb():
    schema = Schema(
        "tiny",
        {"drug": ("details",), "disease": ("details",), "anatomy": ("details",)},
        (Relation("indication", "drug", "disease"), Relation("located in", "disease", "anatomy")),
    )
    nodes = pd.DataFrame(
        {
            "node_id": np.arange(len(NODES)),
            "key": [f"K{i}" for i in range(len(NODES))],
            "type": [t for t, _, _ in NODES],
            "name": [n for _, n, _ in NODES],
            "details": [d for _, _, d in NODES],
        }
    )
    edges = pd.DataFrame({"src": [0, 2, 5], "rel": ["indication", "indication", "located in"], "dst": [4, 3, 6]})
    queries = pd.DataFrame({"qid": [], "split": [], "query": [], "answer_ids": []})
    return SKB(schema, nodes, edges, queries)

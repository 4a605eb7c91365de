"""The ltr reranker's features on the handmade 7-node graph, checked against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from grasp_core.ranking import Ranking
from grasp_core.rerank.features import FeatureBuilder, RerankInput
from grasp_core.skb.format import SKB
from grasp_core.text.bm25 import tokenize
from grasp_core.text.config import MFARConfig
from grasp_core.text.mfar import FieldIndex, FieldWeights, MFARRetriever

QUERY = "which disease causes tall stature and height"  # tokens: which diseas caus tall statur height (6)


class FixedQueryEncoder:
    """Embeds every query as [1, 0], so that neighbour cosines are the cosines of the fixture's angles."""

    dim, identity = 2, "fixed-2d"

    @staticmethod
    def encode(texts, max_tokens):
        return np.tile(np.array([1.0, 0.0], np.float32), (len(texts), 1))


def text_model(skb):
    """A real mFAR over the toy SKB (BM25 per field, untrained uniform weights) on the fixed query encoder."""
    fields = FieldIndex.build(skb, None, FixedQueryEncoder(), MFARConfig(dense_fields=()))
    return MFARRetriever(fields, FieldWeights(2, fields.num_scorers), FixedQueryEncoder())


def cos(deg: float) -> float:
    return math.cos(math.radians(deg))


@pytest.fixture(scope="module")
def builder(tiny_skb, doc_vectors):
    return FeatureBuilder(tiny_skb, doc_vectors, text_model(tiny_skb))


def example(fused_ids=(0, 6, 3, 5)) -> RerankInput:
    return RerankInput(
        QUERY,
        fused=Ranking(np.array(fused_ids, np.int64), np.array([0.04, 0.03, 0.02, 0.01][: len(fused_ids)], np.float32)),
        text=Ranking(np.array([6, 0]), np.array([2.0, 1.0], np.float32)),
        graph=Ranking(np.array([0]), np.array([1.5], np.float32)),
        target_type="disease",
        bindings=((3, 0.9),),  # the plan bound Tall stature
        links=((0, 3, 0.8), (1, 4, 0.7)),  # entity rows: E1 -> Tall stature, E2 -> Lens dislocation
    )


def test_feature_values_match_hand_computation(builder):
    (X,) = builder.build([example()], K=50)
    assert X.shape == (4, builder.num_features)
    f = {name: X[:, j] for j, name in enumerate(builder.names)}
    # rows: Marfan syndrome (0), Loeys-Dietz (6), Tall stature (3), Aortic dilatation (5)
    np.testing.assert_allclose(f["fused rank"], [1, 2, 3, 4])
    np.testing.assert_allclose(f["fused score / top"], [1, 0.75, 0.5, 0.25], rtol=1e-6)
    np.testing.assert_allclose(f["text rank"], [2, 1, 101, 101])
    np.testing.assert_allclose(f["text score"], [1, 2, 0, 0])
    np.testing.assert_allclose(f["text missing"], [0, 0, 1, 1])
    np.testing.assert_allclose(f["graph rank"], [1, 101, 101, 101])
    np.testing.assert_allclose(f["graph score"], [1.5, 0, 0, 0])
    np.testing.assert_allclose(f["type is plan target"], [1, 1, 0, 0])
    np.testing.assert_allclose(f["no plan"], [0, 0, 0, 0])
    np.testing.assert_allclose(f["plan bindings adjacent"], [1, 0, 0, 0])  # Marfan -[phenotype present]- Tall stature
    np.testing.assert_allclose(f["binding adjacent cosine"], [0.9, 0, 0, 0], rtol=1e-6)
    np.testing.assert_allclose(f["is binding"], [0, 0, 1, 0])
    np.testing.assert_allclose(f["log degree"], np.log1p([5, 2, 2, 2]), rtol=1e-6)
    np.testing.assert_allclose(f["name overlap"], [0, 0, 2 / 6, 0], rtol=1e-6)  # tall, statur of 6 query tokens
    np.testing.assert_allclose(f["name overlap count"], [0, 0, 2, 0])
    np.testing.assert_allclose(f["field overlap"], [0, 0, 1 / 6, 0], rtol=1e-6)  # "Height above average."
    np.testing.assert_allclose(f["field overlap count"], [0, 0, 1, 0])
    np.testing.assert_allclose(f["is linked"], [0, 0, 1, 0])
    np.testing.assert_allclose(f["linked cosine"], [0, 0, 0.8, 0], rtol=1e-6)
    # Marfan is next to both linked phenotypes; Tall stature is next to Lens dislocation (parent-child)
    np.testing.assert_allclose(f["linked adjacent cosine"], [0.8, 0, 0.7, 0], rtol=1e-6)
    np.testing.assert_allclose(f["linked rows adjacent"], [2, 0, 1, 0])
    np.testing.assert_allclose(f["linked adjacent cosine: phenotype present"], [0.8, 0, 0, 0], rtol=1e-6)
    np.testing.assert_allclose(f["linked adjacent cosine: parent-child"], [0, 0, 0.7, 0], rtol=1e-6)
    np.testing.assert_allclose(f["linked adjacent cosine: associated with"], [0, 0, 0, 0])
    # neighbours (angle to the query vector): Marfan - genes FBN1 40°, TGFBR2 10°; phenotypes 20°, 60°, 5°
    np.testing.assert_allclose(f["log neighbours: associated with"], np.log1p([2, 1, 0, 0]), rtol=1e-6)
    np.testing.assert_allclose(f["neighbour max cos: associated with"], [cos(10), cos(10), 0, 0], rtol=1e-5)
    np.testing.assert_allclose(
        f["neighbour mean cos: associated with"], [(cos(40) + cos(10)) / 2, cos(10), 0, 0], rtol=1e-5
    )
    np.testing.assert_allclose(f["neighbour max cos: phenotype present"], [cos(5), cos(5), cos(0), cos(0)], rtol=1e-5)
    np.testing.assert_allclose(
        f["neighbour mean cos: phenotype present"],
        [(cos(20) + cos(60) + cos(5)) / 3, cos(5), cos(0), (cos(0) + cos(30)) / 2],
        rtol=1e-5,
    )
    np.testing.assert_allclose(f["neighbour max cos: parent-child"], [0, 0, cos(60), 0], rtol=1e-5)
    # the text columns are mFAR's own per-field BM25 scores and total for these candidates
    model = builder.text_model
    tokens = tokenize([QUERY])
    ids = np.array([0, 6, 3, 5])
    raw = np.stack([model.fields.lexical[fld].scores_at(tokens, ids)[0] for fld, _ in model.fields.scorers], axis=1)
    assert raw[:, model.fields.scorer_names.index("name/lexical")].tolist()[2] > 0  # Tall stature's name matches
    for j, name in enumerate(model.fields.scorer_names):
        np.testing.assert_allclose(f[f"mfar {name}"], raw[:, j], rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        total = model.model(torch.tensor([[1.0, 0.0]]), torch.from_numpy(raw[None]))[0].numpy()
    np.testing.assert_allclose(f["mfar total"], total, rtol=1e-5, atol=1e-6)


def test_short_and_empty_lists_and_a_node_without_neighbours(tiny_skb, doc_vectors):
    isolated = SKB(tiny_skb.schema, tiny_skb.nodes, tiny_skb.edges.iloc[1:], tiny_skb.queries)  # FBN1 loses its edge
    builder = FeatureBuilder(isolated, doc_vectors, text_model(isolated))
    empty = RerankInput(QUERY, Ranking.empty())
    short, no_plan = builder.build([example(fused_ids=(1, 0)), empty], K=50)
    assert no_plan.shape == (0, builder.num_features)
    assert short.shape == (2, builder.num_features)
    assert np.isfinite(short).all()
    f = {name: short[0, j] for j, name in enumerate(builder.names)}
    assert f["log degree"] == 0
    assert all(f[f"{what}: {r}"] == 0 for r in builder.relations for what in ("log neighbours", "neighbour max cos"))
    (top,) = builder.build([example()], K=3)
    assert top.shape == (3, builder.num_features)
    (plain,) = builder.build([RerankInput(QUERY, example().fused)], K=50)  # no text, graph, plan or entity table
    g = {name: plain[:, j] for j, name in enumerate(builder.names)}
    np.testing.assert_allclose(g["no plan"], 1)
    np.testing.assert_allclose(g["graph missing"], 1)
    np.testing.assert_allclose(g["linked rows adjacent"], 0)


def test_asked_type_features_read_the_question_s_request_words(tiny_skb, doc_vectors):
    """A hand-set asked-type model: its only weight says "disease" (the word after "which") asks for a disease."""
    from grasp_core.rerank.asked_type import AskedType

    types = ["disease", "gene", "phenotype"]
    weights = np.zeros((3, 3), np.float32)  # 2-d query vector, then the request word "disease"
    weights[0, 2] = 2.0
    asked = AskedType(types, weights, np.zeros(3, np.float32), ["disease"], window=1)
    builder = FeatureBuilder(tiny_skb, doc_vectors, text_model(tiny_skb), asked=asked)
    (X,) = builder.build([example()], K=50)
    f = {name: X[:, j] for j, name in enumerate(builder.names)}
    p = math.exp(2) / (math.exp(2) + 2)
    # rows: Marfan syndrome, Loeys-Dietz (diseases), Tall stature, Aortic dilatation (phenotypes)
    np.testing.assert_allclose(f["asked type prob"], [p, p, (1 - p) / 2, (1 - p) / 2], rtol=1e-5)
    np.testing.assert_allclose(f["asked type is candidate type"], [1, 1, 0, 0])

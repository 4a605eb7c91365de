import faiss
import numpy as np
import pytest

from grasp_core.embed.config import IndexConfig
from grasp_core.embed.node_embeddings import NodeEmbeddings, build_node_embeddings, load_node_embeddings
from grasp_core.embed.vector_index import NodeIndex
from grasp_core.errors import CorruptArtifactError, MissingArtifactError


@pytest.fixture
def embeddings(skb, encoder, tmp_path):
    return load_node_embeddings(build_node_embeddings(skb, encoder, tmp_path / "emb"))


def brute_force(emb, ids, q, k):
    scores = q @ emb[ids].T
    order = np.argsort(-scores, axis=1)[:, :k]
    return np.take_along_axis(scores, order, 1), ids[order]


def test_search_by_type_returns_global_ids_in_cosine_order(skb, encoder, embeddings):
    index = NodeIndex.build(skb, embeddings)
    q = encoder.encode(["diabetes", "eye"], 64)
    scores, ids = index.search("disease", "name", q, 2)
    ref_scores, ref_ids = brute_force(embeddings.name, skb.ids_of_type("disease"), q, 2)
    np.testing.assert_array_equal(ids, ref_ids)
    np.testing.assert_allclose(scores, ref_scores, atol=1e-5)
    assert ids[0, 0] == 3 and ids.dtype == np.int64 and scores.dtype == np.float32
    _, doc_ids = index.search("anatomy", "doc", encoder.encode(["back of the eye"], 64), 1)
    assert doc_ids[0, 0] == 6


def test_search_all_types_merges_and_pads(skb, encoder, embeddings):
    index = NodeIndex.build(skb, embeddings)
    q = encoder.encode(["blood", "retina"], 64)
    scores, ids = index.search(None, "doc", q, 5)
    ref_scores, ref_ids = brute_force(embeddings.doc, np.arange(8), q, 5)
    np.testing.assert_array_equal(ids, ref_ids)
    np.testing.assert_allclose(scores, ref_scores, atol=1e-5)
    scores, ids = index.search("anatomy", "name", q, 4)
    assert (ids[:, 2:] == -1).all() and np.isneginf(scores[:, 2:]).all() and (ids[:, :2] >= 6).all()
    with pytest.raises(ValueError, match="unknown node type"):
        index.search("gene", "name", q, 1)


def test_vectors_returns_the_embeddings(skb, embeddings):
    index = NodeIndex.build(skb, embeddings)
    np.testing.assert_array_equal(index.vectors("doc", [4, 1]), embeddings.doc[[4, 1]])


def test_save_load_roundtrip_and_checks(skb, encoder, embeddings, tmp_path):
    index = NodeIndex.build(skb, embeddings)
    index.save(tmp_path / "idx")
    loaded = NodeIndex.load(tmp_path / "idx", embeddings)
    q = encoder.encode(["pain"], 64)
    for t in (None, "drug"):
        np.testing.assert_array_equal(loaded.search(t, "doc", q, 3)[1], index.search(t, "doc", q, 3)[1])
    other = NodeEmbeddings(embeddings.name, embeddings.doc, "other|pooling=mean|dim=384", {})
    with pytest.raises(MissingArtifactError, match="other embeddings"):
        NodeIndex.load(tmp_path / "idx", other)
    with pytest.raises(MissingArtifactError):
        NodeIndex.load(tmp_path / "absent", embeddings)
    (tmp_path / "idx" / "001.doc.faiss").write_bytes(b"garbage")
    with pytest.raises(CorruptArtifactError, match="'disease'"):
        NodeIndex.load(tmp_path / "idx", embeddings)


def test_large_types_use_hnsw_with_high_recall(tmp_path):
    rng = np.random.default_rng(0)
    import pandas as pd

    from grasp_core.skb.format import SKB
    from grasp_core.skb.schema import Schema

    n = 3000
    vectors = rng.standard_normal((n, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    emb = NodeEmbeddings(vectors, vectors, "random|pooling=mean|dim=16", {})
    nodes = pd.DataFrame(
        {
            "node_id": np.arange(n),
            "key": [str(i) for i in range(n)],
            "type": ["big"] * (n - 10) + ["small"] * 10,
            "name": [str(i) for i in range(n)],
        }
    )
    skb = SKB(
        Schema("r", {"big": (), "small": ()}, ()),
        nodes,
        pd.DataFrame({"src": [], "rel": [], "dst": []}),
        pd.DataFrame(),
    )
    index = NodeIndex.build(skb, emb, IndexConfig(hnsw_min_size=1000, name_hnsw_min_size=1000))
    assert isinstance(index.indexes["big", "name"], faiss.IndexHNSW)
    assert isinstance(index.indexes["small", "name"], faiss.IndexFlat)
    names_only = NodeIndex.build(skb, emb, IndexConfig(name_hnsw_min_size=1000))  # the name index switches alone
    assert isinstance(names_only.indexes["big", "name"], faiss.IndexHNSW)
    assert isinstance(names_only.indexes["big", "doc"], faiss.IndexFlat)
    # built on one thread: the same vectors give the same graph, byte for byte
    assert (
        faiss.serialize_index(names_only.indexes["big", "name"]).tobytes()
        == faiss.serialize_index(index.indexes["big", "name"]).tobytes()
    )
    q = vectors[rng.choice(n - 10, 50)] + 0.1 * rng.standard_normal((50, 16)).astype(np.float32)
    _, ids = index.search("big", "name", q, 10)
    _, exact = brute_force(vectors, np.arange(n - 10), q, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, exact)])
    assert recall > 0.95
    loaded = NodeIndex.load(index.save(tmp_path / "idx"), emb)
    assert loaded.indexes["big", "doc"].hnsw.efSearch == IndexConfig().hnsw_ef_search
    np.testing.assert_array_equal(loaded.search("big", "name", q, 10)[1], ids)


def test_name_search_is_the_max_over_names_and_aliases_each_node_once(tmp_path):
    """Alias vectors join their type's name index; a node answers once, at its best vector's cosine; the index
    round-trips; an SKB without aliases builds the same index as before."""
    import pandas as pd

    from grasp_core.skb.format import SKB
    from grasp_core.skb.schema import Schema

    rng = np.random.default_rng(3)
    n, a = 40, 60
    unit = rng.standard_normal((n + a, 8)).astype(np.float32)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    owner = rng.integers(0, n, a).astype(np.int64)
    nodes = pd.DataFrame(
        {
            "node_id": np.arange(n),
            "key": [str(i) for i in range(n)],
            "type": ["x", "y"] * (n // 2),
            "name": list("n" * n),
        }
    )
    skb = SKB(
        Schema("r", {"x": (), "y": ()}, ()), nodes, pd.DataFrame({"src": [], "rel": [], "dst": []}), pd.DataFrame()
    )
    emb = NodeEmbeddings(unit[:n], unit[:n], "random|dim=8", {}, unit[n:], owner)
    index = NodeIndex.load(NodeIndex.build(skb, emb).save(tmp_path / "idx"), emb)
    q = rng.standard_normal((5, 8)).astype(np.float32)
    for t in ("x", "y"):
        scores, ids = index.search(t, "name", q, 4)
        members = skb.ids_of_type(t)
        best = np.full((5, n), -np.inf, np.float32)
        best[:, members] = q @ unit[members].T
        for j, node in enumerate(owner):
            if node in members:
                best[:, node] = np.maximum(best[:, node], q @ unit[n + j])
        expected = np.argsort(-best, axis=1, kind="stable")[:, :4]
        assert (ids == expected).all()
        assert np.allclose(scores, np.take_along_axis(best, expected, 1), atol=1e-5)
        assert all(len(set(row)) == 4 for row in ids)  # each node once
        scores, ids = index.search(t, "name", q, n // 2 + 3)  # more than the type has: padded
        assert (np.sort(ids[:, : n // 2], axis=1) == members).all() and (ids[:, n // 2 :] == -1).all()
        assert np.isneginf(scores[:, n // 2 :]).all() and (np.diff(scores[:, : n // 2], axis=1) <= 0).all()
    plain = NodeIndex.build(skb, NodeEmbeddings(unit[:n], unit[:n], "random|dim=8", {}))
    assert plain.indexes["x", "name"].ntotal == n // 2
    assert (plain.search("x", "name", q, 3)[1] == plain.search("x", "doc", q, 3)[1]).all()

import numpy as np
import pytest

from grasp_core.embed import node_embeddings as ne
from grasp_core.embed.config import EncoderConfig
from grasp_core.embed.node_embeddings import build_node_embeddings, embeddings_are_current, load_node_embeddings
from grasp_core.errors import CorruptArtifactError, MissingArtifactError


def test_build_writes_float16_vectors_of_names_and_documents(skb, encoder, tmp_path):
    out = build_node_embeddings(skb, encoder, tmp_path / "emb")
    assert np.load(out / "name.npy").dtype == np.float16 and np.load(out / "doc.npy").shape == (8, 384)
    emb = load_node_embeddings(out)
    assert emb.identity == encoder.identity and emb.name.dtype == np.float32
    np.testing.assert_allclose(emb.name, encoder.encode(skb.nodes["name"].tolist(), 64), atol=2e-3)
    np.testing.assert_allclose(emb.doc[5], encoder.encode([skb.document(5)], 512)[0], atol=2e-3)
    np.testing.assert_allclose(np.linalg.norm(emb.doc, axis=1), 1.0, atol=1e-6)
    assert emb.meta["name_hash"] == ne.texts_hash(skb.nodes["name"].tolist())
    assert not (tmp_path / ".emb.work").exists()
    assert embeddings_are_current(out, skb, encoder)
    assert not embeddings_are_current(out, skb, encoder, EncoderConfig(doc_max_tokens=128))
    skb.nodes.loc[7, "details"] = "the organ that filters blood"
    assert not embeddings_are_current(out, skb, encoder)


def test_rerun_reuses_finished_chunks_and_reencodes_changed_ones(skb, encoder, tmp_path, monkeypatch):
    calls, crash = [], [True]
    real_encode = encoder.encode

    def counting_encode(texts, max_tokens, show_progress=False):
        calls.append(list(texts))
        if crash[0] and len(calls) == 3:
            raise RuntimeError("crash")  # simulate a crash after two finished chunks
        return real_encode(texts, max_tokens)

    monkeypatch.setattr(encoder, "encode", counting_encode)
    with pytest.raises(RuntimeError, match="crash"):
        build_node_embeddings(skb, encoder, tmp_path / "emb", chunk_size=3)
    assert not (tmp_path / "emb").exists() and len(list((tmp_path / ".emb.work").iterdir())) == 2
    calls.clear()
    crash[0] = False
    skb.nodes.loc[1, "name"] = "advil"  # invalidates the first name chunk only
    out = build_node_embeddings(skb, encoder, tmp_path / "emb", chunk_size=3)
    # 3 name chunks + 3 doc chunks: name chunk 1 survived the crash, name chunk 0 changed, the rest never ran
    assert calls[:2] == [["aspirin", "advil", "metformin"], ["retina", "liver"]] and len(calls) == 5
    emb = load_node_embeddings(out)
    np.testing.assert_allclose(emb.name[1], real_encode(["advil"], 64)[0], atol=2e-3)
    calls.clear()
    build_node_embeddings(skb, encoder, out, chunk_size=3)
    assert calls == []  # current: nothing re-encoded


def test_corrupt_or_missing_embeddings_raise(skb, encoder, tmp_path):
    with pytest.raises(MissingArtifactError):
        load_node_embeddings(tmp_path / "nothing")
    out = build_node_embeddings(skb, encoder, tmp_path / "emb")
    data = (out / "doc.npy").read_bytes()
    (out / "doc.npy").write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptArtifactError, match="doc.npy"):
        load_node_embeddings(out)


def test_rebuild_after_an_edit_reencodes_only_the_changed_texts_and_equals_a_full_rebuild(
    skb, encoder, tmp_path, monkeypatch
):
    out = build_node_embeddings(skb, encoder, tmp_path / "emb")
    before = {k: np.load(out / f"{k}.npy") for k in ne.KINDS}
    calls = []
    real_encode = encoder.encode

    def counting_encode(texts, max_tokens, show_progress=False):
        calls.append(list(texts))
        return real_encode(texts, max_tokens)

    monkeypatch.setattr(encoder, "encode", counting_encode)
    skb.nodes.loc[7, "details"] = "the organ that filters blood"  # node 7's document only
    build_node_embeddings(skb, encoder, out)
    assert calls == [[skb.document(7)]]
    incremental = {k: np.load(out / f"{k}.npy") for k in ne.KINDS}
    full = build_node_embeddings(skb, encoder, tmp_path / "full")
    for kind in ne.KINDS:  # bit for bit: the unchanged rows are the previous vectors and a full rebuild's
        np.testing.assert_array_equal(incremental[kind], np.load(full / f"{kind}.npy"))
    np.testing.assert_array_equal(incremental["doc"][:7], before["doc"][:7])
    assert not np.array_equal(incremental["doc"][7], before["doc"][7])
    np.testing.assert_array_equal(incremental["name"], before["name"])
    calls.clear()
    build_node_embeddings(skb, encoder, out, EncoderConfig(doc_max_tokens=128))  # another limit: docs only, all
    assert calls == [skb.documents()]


def test_a_corrupt_previous_artifact_is_not_reused(skb, encoder, tmp_path, monkeypatch):
    out = build_node_embeddings(skb, encoder, tmp_path / "emb")
    data = bytearray((out / "name.npy").read_bytes())
    data[-1] ^= 0xFF  # a flipped byte in the last vector: the manifest no longer matches
    (out / "name.npy").write_bytes(bytes(data))
    calls = []
    real_encode = encoder.encode
    monkeypatch.setattr(encoder, "encode", lambda t, m, show_progress=False: calls.append(list(t)) or real_encode(t, m))
    skb.nodes.loc[0, "name"] = "acetylsalicylic acid"
    build_node_embeddings(skb, encoder, out)
    assert calls == [skb.nodes["name"].tolist(), skb.documents()]  # everything encoded anew


def test_loaded_rows_are_unit_norm_and_the_same_whichever_rows_are_converted_together():
    vectors = np.random.default_rng(0).normal(size=(1000, 24)).astype(np.float16)
    vectors[[3, 500]] = 0  # a node without text: stays the zero vector
    whole = vectors.astype(np.float32)
    whole = whole / np.maximum(np.linalg.norm(whole, axis=1, keepdims=True), 1e-12)
    for chunk in (1, 7, 2048):
        assert np.array_equal(ne._unit_rows(vectors, chunk), whole)
    assert ne._unit_rows(vectors).dtype == np.float32 and not ne._unit_rows(vectors)[[3, 500]].any()
    assert np.allclose(np.linalg.norm(np.delete(whole, [3, 500], axis=0), axis=1), 1, atol=1e-6)

from dataclasses import replace

import numpy as np
import pytest
import torch

from grasp_core.embed.node_embeddings import build_node_embeddings, load_node_embeddings
from grasp_core.embed.vector_index import NodeIndex
from grasp_core.errors import GraspError
from grasp_core.ranking import Ranking
from grasp_core.text.bm25 import tokenize
from grasp_core.text.config import MFARConfig
from grasp_core.text.mfar import FieldIndex, FieldWeights, MFARRetriever, _top_k_ids, row_products
from grasp_core.text.mfar_train import _trainable_copy, train_mfar
from tests.text.conftest import tiny_skb

CFG = MFARConfig(epochs=4, patience=4, batch_size=8, hard_negatives=8, candidates_per_field=20)


@pytest.fixture(scope="module")
def trained(skb, node_index, encoder, tmp_path_factory):
    seen = []
    retriever, history = train_mfar(
        skb, node_index, encoder, CFG, progress=seen.append, work_dir=tmp_path_factory.mktemp("field_vectors")
    )
    return retriever, history, seen


def test_training_learns_field_weights_and_improves_validation_mrr(trained, skb):
    retriever, history, seen = trained
    assert seen == history and [h["epoch"] for h in history] == list(range(len(history)))
    assert history[0]["train_loss"] is None and all(h["train_loss"] > 0 for h in history[1:])
    best = max(h["val_mrr"] for h in history[1:])
    assert best > history[0]["val_mrr"] + 5  # uniform weights are fooled by the noisy review field
    weights = retriever.field_weights(skb.split("val")["query"].tolist())
    uniform = 1 / len(retriever.fields.scorer_names)
    assert np.abs(weights - uniform).max() > 0.02
    mean = dict(zip(retriever.fields.scorer_names, weights.mean(0)))
    assert mean["rel:has_brand/lexical"] > mean["review/lexical"]
    # the kept model is the best epoch: its own ranking reproduces the best validation MRR
    val = skb.split("val")
    ranks = [r.rank_of(a) for r, a in zip(retriever.rank(val["query"].tolist()), val["answer_ids"])]
    assert 100 * np.mean([1 / r if r else 0 for r in ranks]) == pytest.approx(best)


def test_cpu_default_gives_every_field_a_lexical_scorer_and_only_doc_and_name_a_dense_one(trained):
    fields = trained[0].fields
    assert [f for f, m in fields.scorers if m == "lexical"] == fields.fields
    assert [f for f, m in fields.scorers if m == "dense"] == ["doc", "name"] == list(fields.dense)
    assert fields.scorer_names[:3] == ["doc/lexical", "doc/dense", "name/lexical"]
    assert fields.num_scorers == len(fields.fields) + 2


def test_dense_fields_none_embeds_every_field_and_unknown_fields_are_refused(encoder, tmp_path):
    skb = tiny_skb(num_products=12)  # every field gets encoded: keep it small
    index = NodeIndex.build(skb, load_node_embeddings(build_node_embeddings(skb, encoder, tmp_path / "emb")))
    fields = FieldIndex.build(skb, index, encoder, MFARConfig(dense_fields=None), work_dir=tmp_path / "fields")
    assert list(fields.dense) == fields.fields and fields.num_scorers == 2 * len(fields.fields)
    products = (skb.nodes["type"] == "product").to_numpy()
    np.testing.assert_array_equal(fields.present["review"], products)
    np.testing.assert_allclose(fields.dense["name"], index.vectors("name", np.arange(skb.num_nodes)), atol=1e-3)
    assert np.abs(fields.dense["review"][products]).sum() > 0 and not fields.dense["review"][~products].any()
    # with HNSW nominees (review: only the products are in its index) the pools are the exact ones
    approx = FieldIndex.build(
        skb, index, encoder, MFARConfig(dense_fields=None, dense_ann_min_nodes=0), work_dir=tmp_path / "fields"
    )
    assert approx.ann["review"].ntotal == products.sum() < skb.num_nodes
    queries = ["a kettle that reviewers liked", "Acme toaster"]
    tokens, vecs = tokenize(queries, fields.bm25), encoder.encode(queries, 512)
    for a, b in zip(approx.candidates(tokens, vecs, 4), fields.candidates(tokens, vecs, 4)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    with pytest.raises(GraspError, match="unknown fields \\['colour'\\]"):
        FieldIndex.build(skb, index, encoder, MFARConfig(dense_fields=("doc", "colour")))
    with pytest.raises(GraspError, match="pass the NodeIndex"):
        FieldIndex.build(skb, None, encoder, MFARConfig())
    assert FieldIndex.build(skb, None, encoder, MFARConfig(dense_fields=())).scorers == [
        (f, "lexical") for f in fields.fields
    ]


def test_top_k_ids_breaks_ties_by_smaller_index():
    rng = np.random.default_rng(0)
    values = rng.integers(0, 4, (50, 30)).astype(np.float32)  # many ties
    for k in (1, 7, 30):
        ids = np.sort(_top_k_ids(torch.from_numpy(values), k).numpy(), axis=1)
        expected = [np.sort(np.lexsort((np.arange(30), -row))[:k]) for row in values]
        np.testing.assert_array_equal(ids, expected)
    # ties at or below the floor are left to topk, but every value above it is still taken
    ids = _top_k_ids(torch.from_numpy(values), 12, floor=2.0).numpy()
    for row, picked in zip(values, ids):
        assert set(np.flatnonzero(row > 2)) <= set(picked) or (row[picked] > 2).all()


def reference_pools(fields, tokens, vecs, per_field):
    """The straightforward per-query selection: per query and scorer, sort the eligible nodes by
    (score desc, node id) and keep the first ``per_field``; the pool is the union."""
    scores = fields.raw_scores(tokens, vecs)
    out = []
    for q in range(len(vecs)):
        picks = []
        for (f, m), values in zip(fields.scorers, scores):
            row = values[q]
            eligible = np.flatnonzero(row > 0 if m == "lexical" else fields.present[f])
            picks.append(eligible[np.lexsort((eligible, -row[eligible]))][:per_field])
        ids = np.unique(np.concatenate(picks))
        out.append((ids, np.stack([s[q, ids] for s in scores], axis=-1)))
    return out


@pytest.mark.parametrize("per_field", [3, 20])
def test_vectorized_candidates_match_a_per_query_reference(trained, skb, per_field):
    retriever = trained[0]
    queries = skb.queries["query"].tolist() + ["zzz unmatched words", "Acme"]
    tokens, vecs = retriever.encode_queries(queries)
    pools = retriever.fields.candidates(tokens, vecs, per_field)
    reference = reference_pools(retriever.fields, tokens, vecs, per_field)
    assert pools.ids.shape[1] == max(len(ids) for ids, _ in reference)
    for ids, raw, ok, (ref_ids, ref_raw) in zip(pools.ids, pools.raw, pools.valid, reference):
        np.testing.assert_array_equal(ids[ok], ref_ids)
        np.testing.assert_array_equal(raw[ok], ref_raw)
        assert (ids[~ok] == -1).all() and (raw[~ok] == 0).all()
    # and the final rankings equal scoring each reference pool on its own
    ranked = MFARRetriever(
        retriever.fields,
        retriever.model,
        retriever.encoder,
        replace(CFG, candidates_per_field=per_field, query_batch_size=7),
    ).rank(queries, k=10)
    with torch.no_grad():
        for r, v, (ref_ids, ref_raw) in zip(ranked, vecs, reference):
            s = retriever.model(torch.from_numpy(v[None]), torch.from_numpy(ref_raw[None]))[0].numpy()
            expected = Ranking.from_scores(ref_ids, s, 10)
            np.testing.assert_array_equal(r.node_ids, expected.node_ids)
            np.testing.assert_allclose(r.scores, expected.scores, rtol=1e-5, atol=1e-6)
    # a batch no lexical scorer matches at all: only the dense scorers nominate
    tokens, vecs = retriever.encode_queries(["zzz unmatched words"])
    (ref_ids, _), pool = (
        reference_pools(retriever.fields, tokens, vecs, per_field)[0],
        retriever.fields.candidates(tokens, vecs, per_field),
    )
    np.testing.assert_array_equal(pool.ids[pool.valid], ref_ids)


def test_from_dense_ann_min_nodes_dense_nominees_come_from_hnsw_and_are_scored_exactly(
    trained, skb, node_index, encoder, tmp_path
):
    """At the threshold each dense field gets an HNSW index over the nodes that have it; on a corpus this small its
    search is exhaustive, so the pools are the exact ones, their dense scores computed exactly for the union; the
    index round-trips."""
    exact = trained[0]
    fields = FieldIndex.build(skb, node_index, encoder, replace(CFG, dense_ann_min_nodes=skb.num_nodes))
    assert set(fields.ann) == {"doc", "name"} and not exact.fields.ann  # below the threshold: exact products
    assert all(fields.ann[f].ntotal == fields.present[f].sum() for f in fields.ann)
    queries = skb.queries["query"].tolist() + ["zzz unmatched words"]
    tokens, vecs = exact.encode_queries(queries)
    approx, reference = fields.candidates(tokens, vecs, 5), exact.fields.candidates(tokens, vecs, 5)
    np.testing.assert_array_equal(approx.ids, reference.ids)
    np.testing.assert_allclose(approx.raw, reference.raw, rtol=1e-6, atol=1e-6)
    (tmp_path / "fields").mkdir()
    fields.save(tmp_path / "fields")
    loaded = FieldIndex.load(tmp_path / "fields")
    assert set(loaded.ann) == {"doc", "name"}
    again = loaded.candidates(tokens, vecs, 5)
    np.testing.assert_array_equal(again.ids, approx.ids)
    np.testing.assert_array_equal(again.raw, approx.raw)


def test_candidates_are_the_union_of_per_scorer_tops(trained, skb, encoder):
    base = trained[0]
    retriever = MFARRetriever(base.fields, base.model, encoder, replace(CFG, candidates_per_field=3))
    query = "a red kettle made by Acme"
    _, pools = retriever.pools([query])
    ids = pools.ids[0][pools.valid[0]]
    assert len(ids) <= retriever.fields.num_scorers * 3 < skb.num_nodes
    assert pools.raw.shape == (1, len(ids), retriever.fields.num_scorers)
    tokens, vecs = retriever.encode_queries([query])
    for scores in retriever.fields.raw_scores(tokens, vecs):
        if scores[0].max() > 0:  # a lexical scorer without any match contributes no candidate
            assert scores[0, ids].max() == scores[0].max()  # every scorer's best node (or a tie) is a candidate
    assert len(retriever.rank([query], k=7)[0]) == 7
    assert retriever.rank([]) == []


def test_save_load_round_trip_gives_identical_rankings(trained, skb, encoder, tmp_path):
    retriever = trained[0]
    queries = skb.queries["query"].tolist()
    loaded = MFARRetriever.load(retriever.save(tmp_path / "mfar"), encoder)
    assert loaded.cfg == retriever.cfg and loaded.fields.fields == retriever.fields.fields
    for a, b in zip(retriever.rank(queries, k=20), loaded.rank(queries, k=20)):
        np.testing.assert_array_equal(a.node_ids, b.node_ids)
        np.testing.assert_array_equal(a.scores, b.scores)


def test_a_query_scores_bit_identically_alone_and_in_any_batch():
    """A matrix product's last bits depend on the batch's shape (this machine's OpenBLAS gave other bits for a
    query's row alone than in a larger batch); near-tied nodes then swapped ranks between a question alone and the
    evaluation's batch."""
    rng = np.random.default_rng(0)
    queries = rng.standard_normal((200, 384)).astype(np.float32)
    vectors = rng.standard_normal((3000, 384)).astype(np.float32)
    batch = row_products(queries, vectors)
    np.testing.assert_allclose(batch, queries @ vectors.T, rtol=1e-4, atol=1e-4)
    for rows in (slice(0, 1), slice(5, 7), slice(13, 37), slice(0, 64)):
        np.testing.assert_array_equal(row_products(queries[rows], vectors), batch[rows])
    model = FieldWeights(384, 15)
    torch.nn.init.normal_(model.linear.weight)
    with torch.no_grad():
        weights = model.weights(torch.from_numpy(queries))
        for rows in (slice(0, 1), slice(5, 7), slice(13, 37)):
            torch.testing.assert_close(model.weights(torch.from_numpy(queries[rows])), weights[rows], rtol=0, atol=0)


def test_a_query_ranks_alone_as_in_its_batch(trained, skb):
    retriever = trained[0]
    queries = skb.queries["query"].tolist()
    batch = retriever.rank(queries, k=20)
    for query, ranking in zip(queries, batch):
        alone = retriever.rank([query], k=20)[0]
        np.testing.assert_array_equal(alone.node_ids, ranking.node_ids)
        np.testing.assert_array_equal(alone.scores, ranking.scores)


def test_load_with_another_encoder_is_refused(trained, encoder, tmp_path):
    path = trained[0].save(tmp_path / "mfar")

    class Other:
        identity, dim = "other|pooling=mean|dim=384", 384

    with pytest.raises(GraspError, match="was built with encoder"):
        MFARRetriever.load(path, Other())


def test_encoder_finetuning_needs_float32_weights(skb, node_index):
    from grasp_core.embed.config import EncoderConfig
    from grasp_core.embed.encoder import load_encoder

    bf16 = load_encoder(EncoderConfig(dtype="bfloat16"))
    with pytest.raises(GraspError, match="dtype='float32'"):
        train_mfar(skb, node_index, bf16, MFARConfig(finetune_encoder=True))


def test_encoder_finetuning_trains_a_copy_of_the_encoder(encoder):
    tuned = _trainable_copy(encoder)
    before = encoder.encode(["retina"], 16)
    np.testing.assert_allclose(tuned.encode(["retina"], 16), before, rtol=0, atol=1e-6)
    with torch.no_grad():
        for p in tuned.model.parameters():
            p.mul_(1.5)
    assert not np.allclose(tuned.encode(["retina"], 16), before, atol=1e-3)
    np.testing.assert_array_equal(encoder.encode(["retina"], 16), before)  # the cached encoder is untouched


def test_encoder_finetuning_needs_a_gpu(skb, node_index, encoder):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(GraspError, match="finetune_encoder needs a CUDA GPU"):
        train_mfar(skb, node_index, encoder, MFARConfig(finetune_encoder=True))

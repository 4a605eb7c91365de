from dataclasses import replace

import numpy as np
import pytest

from grasp_core.errors import GraspError
from grasp_core.text.mfar import MFARConfig, MFARRetriever, train_mfar

CFG = MFARConfig(epochs=4, patience=4, batch_size=8, hard_negatives=8, candidates_per_field=20)


@pytest.fixture(scope="module")
def trained(skb, node_index, encoder, tmp_path_factory):
    seen = []
    retriever, history = train_mfar(skb, node_index, encoder, CFG, progress=seen.append,
                                    work_dir=tmp_path_factory.mktemp("field_vectors"))
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


def test_candidates_are_the_union_of_per_scorer_tops(trained, skb, encoder):
    base = trained[0]
    retriever = MFARRetriever(base.fields, base.model, encoder, replace(CFG, candidates_per_field=3))
    query = "a red kettle made by Acme"
    _, pools = retriever.pools([query])
    ids, raw = pools[0]
    assert len(ids) <= retriever.fields.num_scorers * 3 < skb.num_nodes
    assert raw.shape == (len(ids), retriever.fields.num_scorers)
    tokens, vecs = retriever.encode_queries([query])
    for scores in retriever.fields.raw_scores(tokens, vecs):
        if scores[0].max() > 0:  # a lexical scorer without any match contributes no candidate
            assert scores[0, ids].max() == scores[0].max()  # every scorer's best node (or a tie) is a candidate
    assert len(retriever.rank([query], k=7)[0]) == 7


def test_save_load_round_trip_gives_identical_rankings(trained, skb, encoder, tmp_path):
    retriever = trained[0]
    queries = skb.queries["query"].tolist()
    loaded = MFARRetriever.load(retriever.save(tmp_path / "mfar"), encoder)
    assert loaded.cfg == retriever.cfg and loaded.fields.fields == retriever.fields.fields
    for a, b in zip(retriever.rank(queries, k=20), loaded.rank(queries, k=20)):
        np.testing.assert_array_equal(a.node_ids, b.node_ids)
        np.testing.assert_array_equal(a.scores, b.scores)


def test_load_with_another_encoder_is_refused(trained, encoder, tmp_path):
    path = trained[0].save(tmp_path / "mfar")

    class Other:
        identity, dim = "other|pooling=mean|dim=384", 384

    with pytest.raises(GraspError, match="was built with encoder"):
        MFARRetriever.load(path, Other())


def test_encoder_finetuning_needs_a_gpu(skb, node_index, encoder):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(GraspError, match="finetune_encoder needs a CUDA GPU"):
        train_mfar(skb, node_index, encoder, MFARConfig(finetune_encoder=True))

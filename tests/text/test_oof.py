"""Out-of-fold mFAR rankings: a training query is ranked by a model that never trained on it; val and test by the
full model, unchanged."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from grasp_core.errors import GraspError
from grasp_core.io import atomic_dir
from grasp_core.text.config import MFARConfig, OutOfFoldConfig
from grasp_core.text.mfar import MFARRetriever
from grasp_core.text.mfar_train import train_mfar
from grasp_core.text.oof import assign_folds, out_of_fold_rank, save_folds, train_fold_models

CFG = MFARConfig(epochs=3, patience=3, batch_size=8, hard_negatives=8, candidates_per_field=20)
OOF = OutOfFoldConfig(folds=2)


@pytest.fixture(scope="module")
def folded(skb, node_index, encoder, tmp_path_factory):
    full, _ = train_mfar(skb, node_index, encoder, CFG, work_dir=tmp_path_factory.mktemp("oof_fields"))
    assignment, models, histories = train_fold_models(skb, node_index, encoder, full, OOF)
    path = tmp_path_factory.mktemp("oof") / "mfar_model"
    with atomic_dir(path) as tmp:
        full.write(tmp)
        save_folds(tmp, assignment, models)
    return full, assignment, models, histories, path


def test_folds_cover_the_training_queries_evenly_and_deterministically():
    qids = list(range(100, 131))
    folds = assign_folds(qids, OutOfFoldConfig(folds=3))
    assert sorted(folds) == qids and sorted(np.bincount(list(folds.values()))) == [10, 10, 11]
    assert assign_folds(list(reversed(qids)), OutOfFoldConfig(folds=3)) == folds  # depends on the qids, not order
    assert assign_folds(qids, OutOfFoldConfig(folds=3, seed=1)) != folds
    with pytest.raises(GraspError, match="0 \\(off\\) or at least 2"):
        assign_folds(qids, OutOfFoldConfig(folds=1))


def test_a_fold_model_is_the_model_trained_without_that_fold(folded, skb, node_index, encoder):
    full, assignment, models, histories, _ = folded
    train = skb.split("train")["qid"].astype(int).tolist()
    assert set(assignment) == set(train) and len(models) == len(histories) == 2
    # the same training with the fold's queries moved out of the SKB's train split gives the same weights: the
    # fold model never saw them
    held_out = {q for q, f in assignment.items() if f == 0}
    queries = skb.queries.copy()
    queries.loc[queries["qid"].astype(int).isin(held_out), "split"] = "unused"
    reference, _ = train_mfar(replace(skb, queries=queries), node_index, encoder, CFG, fields=full.fields)
    for name, value in reference.model.state_dict().items():
        torch.testing.assert_close(models[0].state_dict()[name], value, rtol=0, atol=0)
    assert any(not torch.equal(models[0].state_dict()[n], v) for n, v in full.model.state_dict().items())


def test_training_queries_get_their_fold_models_ranking_and_the_rest_the_full_models(folded, skb, encoder):
    full, assignment, models, _, path = folded
    loaded = MFARRetriever.load(path, encoder)  # serving loads the full model only, folds or not
    rankings = out_of_fold_rank(path, loaded, skb.queries, k=20)
    by_full = full.rank(skb.queries["query"].tolist(), k=20)
    by_fold = [
        MFARRetriever(full.fields, m, encoder, full.cfg).rank(skb.queries["query"].tolist(), k=20) for m in models
    ]
    changed = 0
    for i, (qid, split) in enumerate(zip(skb.queries["qid"].astype(int), skb.queries["split"])):
        expected = by_fold[assignment[qid]][i] if split == "train" else by_full[i]
        np.testing.assert_array_equal(rankings[i].node_ids, expected.node_ids)
        # batches differ (train queries are ranked apart), so the encoder's float rounding may differ in the last bits
        np.testing.assert_allclose(rankings[i].scores, expected.scores, rtol=0, atol=1e-5)
        changed += split == "train" and not np.allclose(rankings[i].scores, by_full[i].scores, rtol=0, atol=1e-3)
    assert changed > 0
    # folds off: every query by the full model
    plain = path.parent / "plain"
    full.save(plain)
    for a, b in zip(out_of_fold_rank(plain, loaded, skb.queries, k=20), by_full):
        np.testing.assert_allclose(a.scores, b.scores, rtol=0, atol=1e-5)
    assert train_fold_models(skb, None, encoder, full, OutOfFoldConfig(folds=0)) == ({}, [], [])


def test_folds_refuse_a_fine_tuned_query_encoder(folded, skb, encoder):
    full = folded[0]
    tuned = MFARRetriever(full.fields, full.model, encoder, replace(CFG, finetune_encoder=True))
    with pytest.raises(GraspError, match="OutOfFoldConfig.folds=0 or MFARConfig.finetune_encoder=False"):
        train_fold_models(skb, None, encoder, tuned, OOF)

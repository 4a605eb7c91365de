import os
import subprocess
import sys

import numpy as np
import pytest
import rank_bm25

from grasp_core.errors import MissingArtifactError
from grasp_core.text.bm25 import BM25Retriever, LexicalIndex, tokenize
from grasp_core.text.config import BM25Config

CORPUS = [
    "The quick brown fox jumps over the lazy dog",
    "A fox is a small omnivorous mammal; foxes hunt at night",
    "Dogs and cats are common household pets",
    "The brown bear eats berries and fish in the river",
    "Running foxes were seen running near the running river",
    "the of and",  # only stopwords: an empty document
    "Mammal mammal mammal: every mammal here is a mammal",
    "River fish: salmon, trout and other fish of the river",
]
QUERIES = ["brown fox", "running mammals", "river fish salmon", "household pets dogs", "the", "fox fox river"]


def test_tokenize_lowercases_drops_stopwords_and_stems():
    assert tokenize(["The Running Foxes ran, a b"]) == [["run", "fox", "ran"]]
    assert tokenize(["The Running"], BM25Config(stemmer=None, stopwords=None)) == [["the", "running"]]


@pytest.mark.parametrize(
    "cfg, reference",
    [
        (
            BM25Config(method="atire", idf_method="robertson"),
            lambda t: rank_bm25.BM25Okapi(t, k1=1.5, b=0.75, epsilon=0.0),
        ),
        (BM25Config(method="bm25+", k1=1.2, b=0.6), lambda t: rank_bm25.BM25Plus(t, k1=1.2, b=0.6, delta=0.5)),
    ],
)
def test_scores_match_rank_bm25(cfg, reference):
    """Same tokens, same variant and parameters: identical scores (bm25s' own parity setting)."""
    tokens = tokenize(CORPUS, cfg)
    index = LexicalIndex.build(CORPUS, np.arange(len(CORPUS)), len(CORPUS), cfg)
    ref = reference(tokens)
    query_tokens = tokenize(QUERIES, cfg)
    ours = index.scores(query_tokens)
    for q, row in zip(query_tokens, ours):
        expected = ref.get_scores(q)
        np.testing.assert_allclose(row, expected, atol=1e-5, rtol=0)
    assert ours.max() > 1.0  # the queries do match something


def test_absent_rows_score_zero_and_are_not_in_the_collection():
    rows = np.array([1, 3])
    index = LexicalIndex.build(["red kettle", "blue lamp"], rows, num_nodes=5)
    scores = index.scores(tokenize(["kettle"]))[0]
    assert scores[1] > 0 and np.count_nonzero(scores) == 1
    # N = 2 documents, not 5: the lucene idf of a term in 1 of 2 docs
    tf_part = 1 / (1 + 1.5 * (1 - 0.75 + 0.75 * 2 / 2))
    assert scores[1] == pytest.approx(np.log(1 + (2 - 1 + 0.5) / 1.5) * tf_part, rel=1e-5)
    np.testing.assert_allclose(index.scores_at(tokenize(["kettle"]), np.array([3, 1])), [[0, scores[1]]])


def test_retriever_ranks_matching_nodes_only(skb):
    retriever = BM25Retriever.build(skb)
    queries = ["Item 007 sturdy", "zzzz unknown words", ""]
    rankings = retriever.rank(queries, k=10)
    assert len(rankings) == 3
    assert rankings[0].node_ids[0] == skb.nodes.index[skb.nodes["name"] == "Item 007"][0]
    assert np.all(np.diff(rankings[0].scores) <= 0) and np.all(rankings[0].scores > 0)
    assert len(rankings[1]) == 0 and len(rankings[2]) == 0


def test_relations_flag_adds_neighbour_names(skb):
    acme = skb.nodes.index[skb.nodes["name"] == "Acme"][0]
    acme_products = set(skb.edges.loc[(skb.edges["rel"] == "has_brand") & (skb.edges["dst"] == acme), "src"])
    plain = BM25Retriever.build(skb).rank(["Acme"], k=100)[0]
    linked = BM25Retriever.build(skb, BM25Config(include_relations=True)).rank(["Acme"], k=100)[0]
    # only reviews mention brands in the plain documents; the relation line names every product's brand
    assert not acme_products <= set(plain.node_ids.tolist())
    assert acme_products <= set(linked.node_ids.tolist())


def test_save_load_round_trip(skb, tmp_path):
    retriever = BM25Retriever.build(skb, BM25Config(k1=1.2))
    queries = skb.queries["query"].tolist()
    before = retriever.rank(queries, k=20)
    loaded = BM25Retriever.load(retriever.save(tmp_path / "bm25"))
    assert loaded.index.cfg == retriever.index.cfg
    for a, b in zip(before, loaded.rank(queries, k=20)):
        np.testing.assert_array_equal(a.node_ids, b.node_ids)
        np.testing.assert_array_equal(a.scores, b.scores)


def test_an_index_is_plain_npy_and_json_files_the_same_bytes_each_time(skb, tmp_path):
    """Its digest is its data version: no zip, whose headers and deflate follow the Python that wrote it."""
    from grasp_core import manifest

    retriever = BM25Retriever.build(skb)
    first, second = (manifest.read(retriever.save(tmp_path / name)) for name in ("a", "b"))
    assert first is not None and second is not None and first.digest == second.digest
    assert {f.rsplit(".", 1)[-1] for f in first.files} == {"npy", "json"}
    loaded = BM25Retriever.load(tmp_path / "a").index.weights
    assert loaded.dtype == retriever.index.weights.dtype and (loaded != retriever.index.weights).nnz == 0


def test_load_missing_index_is_a_clear_error(tmp_path):
    with pytest.raises(MissingArtifactError, match="BM25Retriever.build"):
        BM25Retriever.load(tmp_path / "nothing")


def test_index_is_identical_under_any_hash_seed():
    """Token ids (and so the weights' columns and the order the scores are summed in) must not depend on the
    hash seed of the process: two runs of the pipeline have to build the same index and the same rankings."""
    code = (
        "import hashlib, json, numpy as np\n"
        "from grasp_core.text.bm25 import LexicalIndex\n"
        "texts = [f'gene {i} seizure ataxia protein{i % 7} kinase{i % 3} retina{i % 5} variant' for i in range(200)]\n"
        "ix = LexicalIndex.build(texts, np.arange(200), 200)\n"
        "w = ix.weights\n"
        "print(json.dumps(ix.vocab), hashlib.md5(w.data.tobytes() + w.indices.tobytes()).hexdigest())\n"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True, text=True
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outs) == 1 and next(iter(outs)).strip()

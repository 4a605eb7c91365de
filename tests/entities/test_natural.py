"""Questions in people's words on the tiny SKB: synonyms link through the alias vectors, descriptive spans get
weak links, an ambiguous alias keeps every owner, a term look-up answers the named node, the asked-type model."""

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest

from grasp_core.entities.gazetteer import GazetteerExtractor
from grasp_core.entities.linking import Mention, link_mentions
from grasp_core.plan.execute import PlanExecutor
from grasp_core.planner.candidates import candidate_plans, json_text
from grasp_core.rerank.asked_type import AskedType, fit_asked_type, request_words
from grasp_core.rerank.config import AskedTypeConfig
from tests.entities.conftest import ids


def test_a_synonym_only_mention_links_to_its_node_through_its_alias_vector(skb, index, encoder):
    # "increased height of the body" is no name: it is close to the alias "Increased body height" of Tall stature
    row = link_mentions([Mention("increased height of the body", ("effect/phenotype",), "anchor")], skb, index, encoder)
    top = row.rows[0].links["effect/phenotype"][0]
    tall = ids(skb, "Tall stature")[0]
    name_cos = float(encoder.encode(["increased height of the body"], 64)[0] @ index.vectors("name", [tall])[0])
    assert top.node_id == tall and top.score > name_cos + 0.1  # the alias, not the name, carried it


def test_an_ambiguous_exact_span_keeps_every_node_it_names_with_its_degree(skb, index, encoder):
    marfan, diabetes = ids(skb, "Marfan syndrome", "type 2 diabetes")
    row = link_mentions([Mention("MFS", ("disease",), "anchor", exact=(marfan, diabetes))], skb, index, encoder)
    links = row.rows[0].links["disease"]
    assert [(link.node_id, link.score) for link in links[:2]] == [(marfan, 1.0), (diabetes, 1.0)]
    assert links[1].degree == int(skb.degrees[diabetes])


@pytest.fixture(scope="module")
def gazetteer(skb, index, encoder):
    return GazetteerExtractor(skb, index, encoder)


def test_a_descriptive_span_is_linked_weakly_with_its_similarity(gazetteer, skb):
    table = gazetteer.extract(["which diseases come with an increase in the height of the body"])[0]
    row = next(r for r in table.rows if "height" in r.mention)
    assert row.mention == "increase in the height of the body"  # the query's wording, stopwords inside
    link = row.links["effect/phenotype"][0]
    assert link.node_id == ids(skb, "Tall stature")[0] and 0.7 <= link.score < 1.0


def test_a_term_look_up_question_returns_the_named_node_first(gazetteer, skb, index, encoder):
    query = "What is the medical term for increased height of the body?"
    table = gazetteer.extract([query])[0]
    plans = candidate_plans(skb.schema, table, query, ["effect/phenotype"])
    look_ups = [p for p in plans if p["anchors"] and not p["hops"]]
    assert look_ups, plans
    executor = PlanExecutor(skb, index, encoder, store=None)
    ranking, trace = executor.execute(json_text(look_ups[0]), query, table)
    assert trace.error is None and int(ranking.node_ids[0]) == ids(skb, "Tall stature")[0]


def test_the_asked_type_model_learns_which_type_a_question_asks_for(encoder):
    train = {
        "gene/protein": ["Which genes are linked to {x}?", "genes behind {x}", "What gene is faulty in {x}?"],
        "drug": ["Which drugs treat {x}?", "medications for {x}", "What can I take for {x}?"],
        "disease": ["What diseases cause {x}?", "Which conditions come with {x}?", "disorders with {x}"],
    }
    fillers = ["headache", "a rash", "tall stature", "night blindness"]
    texts = [t.format(x=f) for ts in train.values() for t in ts for f in fillers]
    labels = [k for k, ts in train.items() for _ in ts for _ in fillers] + ["mixed"]
    types = ["disease", "gene/protein", "drug", "anatomy"]
    model = fit_asked_type(encoder.encode([*texts, "anything"], 64), [*texts, "anything"], labels, types)
    tests = {"Which genes are behind Marfan syndrome?": "gene/protein", "Which drugs help with migraine?": "drug"}
    assert model.predict(encoder.encode(list(tests), 64), list(tests)) == list(tests.values())
    p = model.proba(encoder.encode(list(tests), 64), list(tests))
    assert np.allclose(p.sum(1), 1) and (p[:, types.index("anatomy")] < 0.05).all()  # never asked for: ~0


def test_request_words_are_the_words_that_open_the_question_and_follow_its_cues():
    assert request_words("Which conditions is the FBN1 gene associated with?", 1) == {"condition"}
    assert request_words("My son has tall stature. What symptoms could he get?", 1) == {"son", "symptom"}
    assert request_words("constant ringing in the ears", 2) == {"constant", "ringing"}
    assert request_words("Which genes?", 0) == set()


def test_the_request_words_carry_the_asked_type_past_what_the_question_names(encoder, tmp_path):
    """Every training question names a node of another type than the one it asks for; the model learns the
    request words ("conditions", "genes") from the training queries and keeps them through save and load."""
    asks = {"disease": ("conditions", "disorders"), "gene/protein": ("genes", "proteins")}
    named = {
        "disease": ["the FBN1 gene", "the RHO gene", "MET", "the gene TP53"],
        "gene/protein": ["Marfan syndrome", "type 2 diabetes", "retinitis pigmentosa", "night blindness"],
    }
    frames = ["Which {T} are linked to {x}?", "What {T} go with {x}?", "{T} tied to {x}"]
    texts, labels = [], []
    for t, nouns in asks.items():
        for noun in nouns:
            for frame in frames:
                texts += [frame.format(T=noun, x=x) for x in named[t]]
                labels += [t] * len(named[t])
    cfg, types = AskedTypeConfig(cue_min_count=3), ["disease", "gene/protein", "drug"]
    vectors = encoder.encode(texts, 64)
    model = fit_asked_type(vectors, texts, labels, types, cfg)
    alone = fit_asked_type(vectors, texts, labels, types, dataclasses.replace(cfg, cue_window=0))
    assert {"condition", "disorder", "gene", "protein"} <= set(model.vocabulary) and alone.vocabulary == []
    tests = {
        "Which conditions is the ABCA4 gene associated with?": "disease",
        "Which genes cause Stargardt disease?": "gene/protein",
    }
    model.save(tmp_path)
    loaded = AskedType.load(tmp_path)
    assert loaded is not None and loaded.vocabulary == model.vocabulary
    q, right = encoder.encode(list(tests), 64), [types.index(t) for t in tests.values()]
    for m in (model, loaded):
        p = m.proba(q, list(tests))[[0, 1], right]
        assert (p > 0.8).all() and (p > alone.proba(q, list(tests))[[0, 1], right] + 0.2).all()  # words: sure


def test_a_request_noun_no_training_question_opens_with_is_read_by_its_types_among_the_names(encoder, tmp_path):
    """No training question says "syndromes" or "hereditary"; the names view learns from the training questions'
    request words that the type whose names use a word is the one asked for, sees that the SKB's disease names use
    "syndrome" and "hereditary", and carries such a question to diseases, through save and load; without names the
    view is absent."""
    frames = {
        "disease": ["Which conditions go with {x}?", "disorders with {x}"],
        "gene/protein": ["Which genes cause {x}?"],
    }
    fillers = ["headache", "a rash", "tall stature", "night blindness"]
    texts = [f.format(x=x) for fs in frames.values() for f in fs for x in fillers]
    labels = [t for t, fs in frames.items() for _ in fs for _ in fillers]
    names = [("disease", f"{n} syndrome") for n in ("Marfan", "Stickler", "Alport", "Usher")]
    names += [("disease", f"hereditary {n}") for n in ("angioedema", "spherocytosis", "neuropathy")]
    names += [("disease", n) for n in ("bleeding disorder", "mood disorder", "skin condition", "heart condition")]
    names += [("gene/protein", f"{n} gene") for n in ("FBN1", "COL2A1", "USH2A", "SPTB")]
    types, cfg = ["disease", "gene/protein"], AskedTypeConfig(cue_min_count=2)
    vectors = encoder.encode(texts, 64)
    model = fit_asked_type(vectors, texts, labels, types, cfg, names)
    plain = fit_asked_type(vectors, texts, labels, types, cfg)
    assert {"syndrome", "hereditary"} <= set(model.name_words) and plain.name_words == []
    assert plain.weights.shape[1] == model.weights.shape[1] - len(types)  # the view is T more columns
    tests = ["Which syndromes come with a rash?", "Hereditary disorders of the skin with a rash"]
    model.save(tmp_path)
    loaded = AskedType.load(tmp_path)
    assert loaded is not None and loaded.name_words == model.name_words
    q = encoder.encode(tests, 64)
    np.testing.assert_allclose(loaded.proba(q, tests), model.proba(q, tests), rtol=1e-5)
    p, p_plain = model.proba(q, tests)[:, 0], plain.proba(q, tests)[:, 0]
    assert (p > 0.5).all() and (p > p_plain).all()


def test_request_words_skip_stemmed_stopwords():
    assert request_words("What does Huntington disease do to a person?", 1) == {"huntington"}


_FIT_IN_A_FRESH_PROCESS = """
import hashlib, sys
import numpy as np
from grasp_core.rerank.asked_type import AskedTypeConfig, fit_asked_type
rng = np.random.default_rng(0)
words = ["rash", "gene", "syndrome", "fever", "protein", "disorder", "kinase", "pain", "receptor", "onset"]
texts = [" ".join(rng.choice(words, 6)) + " which " + " ".join(rng.choice(words, 3)) for _ in range(300)]
labels = ["disease" if t.count("gene") + t.count("kinase") < 2 else "gene/protein" for t in texts]
names = [(t, " ".join(rng.choice(words, 2))) for t in ("disease", "gene/protein") for _ in range(40)]
vectors = rng.normal(size=(len(texts), 32)).astype(np.float32)
model = fit_asked_type(vectors, texts, labels, ["disease", "gene/protein"], AskedTypeConfig(cue_min_count=2), names)
print(hashlib.sha256(model.weights.tobytes() + model.bias.tobytes()).hexdigest())
"""


def test_the_asked_type_fit_is_the_same_model_in_every_process():
    """The served reranker's features read this model, and LightGBM's early-stopping round moves with the smallest
    change in them: two processes with different string hashes (so sets in another order) and BLAS thread counts
    fit bit-identical weights."""
    digests = {
        subprocess.run(
            [sys.executable, "-c", _FIT_IN_A_FRESH_PROCESS],
            env={**os.environ, "PYTHONHASHSEED": seed, "OPENBLAS_NUM_THREADS": threads},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed, threads in (("1", "1"), ("2", "2"), ("3", "2"))
    }
    assert len(digests) == 1, digests

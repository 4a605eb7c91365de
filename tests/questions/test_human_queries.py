"""The hand-written hpo ``test-human`` questions: gold computed by their graph queries on the real hpo SKB."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from grasp_core.datasets import DatasetConfig, build_queries
from grasp_core.errors import GraspError
from grasp_core.questions.human_queries import REGISTERS, GraphQueries, human_queries, load_questions, shape
from grasp_core.questions.querygen import with_queries
from grasp_core.skb.format import HUMAN_QID_OFFSET, validate
from grasp_core.sources.hpo import build_hpo_skb


@pytest.fixture(scope="module")
def hpo():
    return build_hpo_skb()


@pytest.fixture(scope="module")
def evaluator(hpo):
    return GraphQueries(hpo)


def names(skb, ids) -> set[str]:
    return set(skb.nodes["name"].to_numpy()[ids])


def key_id(skb, key: str) -> int:
    return int(np.flatnonzero(skb.nodes["key"].to_numpy() == key)[0])


def test_the_set_covers_every_target_type_shape_and_register():
    questions = load_questions()
    assert len(questions) >= 110
    assert [q["id"] for q in questions] == list(range(len(questions)))
    assert len({q["query"] for q in questions}) == len(questions)
    targets = Counter(q["graph"].get("target", "phenotype") for q in questions)  # a "node" question names a term
    assert all(targets[t] >= 25 for t in ("gene", "disease", "phenotype")), targets
    shapes = Counter(shape(q["graph"]) for q in questions)
    assert all(shapes[s] >= 9 for s in ("term", "one-hop", "two-hop", "intersection")), shapes
    assert {q["register"] for q in questions} == set(REGISTERS)


def test_every_question_has_between_1_and_100_answers_of_its_target_type(hpo, evaluator):
    types = hpo.nodes["type"].to_numpy()
    for q in load_questions():
        answers = evaluator.answers(q["graph"])
        assert 1 <= len(answers) <= 100, (q["id"], q["query"], len(answers))
        assert set(types[answers]) == {q["graph"].get("target", "phenotype")}, q["id"]


def test_one_hop_intersection_and_two_hop_semantics(hpo, evaluator):
    aw, pp = "associated with", "phenotype present"
    rett_genes = evaluator.answers({"target": "gene", "all": [{"rel": aw, "node": "OMIM:312750"}]})
    assert names(hpo, rett_genes) == {"MECP2"}
    fbn1 = {"target": "disease", "all": [{"rel": aw, "node": "NCBIGene:2200"}]}
    fbn1_diseases = evaluator.answers(fbn1)
    assert key_id(hpo, "OMIM:154700") in fbn1_diseases and len(fbn1_diseases) == 16
    # two hops: the diseases of the Marfan gene are exactly FBN1's diseases
    via = {
        "target": "disease",
        "all": [{"rel": aw, "via": {"target": "gene", "all": [{"rel": aw, "node": "OMIM:154700"}]}}],
    }
    assert np.array_equal(evaluator.answers(via), fbn1_diseases)
    # an intersection is the set intersection of its one-hop parts
    parts = [{"rel": pp, "node": "HP:0000592"}, {"rel": pp, "node": "HP:0000703"}]
    both = evaluator.answers({"target": "disease", "all": parts})
    one = [set(evaluator.answers({"target": "disease", "all": [p]})) for p in parts]
    assert set(both) == one[0] & one[1] and key_id(hpo, "OMIM:166200") in both  # osteogenesis imperfecta type I
    # a text-field condition filters by substring
    xl = evaluator.answers(
        {"target": "disease", "all": [{"field": "inheritance", "has": "x-linked"}, {"rel": pp, "node": "HP:0003707"}]}
    )
    assert names(hpo, xl) == {"Duchenne muscular dystrophy", "Muscular dystrophy, Becker type"}


def test_parent_child_direction(hpo, evaluator):
    children = evaluator.answers(
        {"target": "phenotype", "all": [{"rel": "parent-child", "node": "HP:0000365", "end": "dst"}]}
    )
    parents = evaluator.answers(
        {"target": "phenotype", "all": [{"rel": "parent-child", "node": "HP:0000407", "end": "src"}]}
    )
    assert key_id(hpo, "HP:0000407") in children  # sensorineural hearing impairment is a kind of hearing impairment
    assert key_id(hpo, "HP:0000365") in parents
    with pytest.raises(GraspError, match="which end"):
        evaluator.answers({"target": "phenotype", "all": [{"rel": "parent-child", "node": "HP:0000365"}]})


@pytest.mark.parametrize(
    "graph, message",
    [
        ({"node": "HP:9999999"}, "not in the hpo SKB"),
        ({"target": "protein", "all": [{"rel": "associated with", "node": "HP:0000365"}]}, "needs a node type"),
        ({"target": "gene", "all": [{"rel": "causes", "node": "HP:0000365"}]}, "unknown relation"),
        ({"target": "gene", "all": [{"rel": "phenotype present", "node": "HP:0000365"}]}, "never reaches a gene"),
        ({"target": "gene", "all": [{"field": "definition", "has": "x"}]}, "no text field"),
        ("HP:0000365", "a graph query is a JSON object"),
        ({"target": "phenotype", "all": [{"rel": "parent-child", "node": "HP:0000365", "end": "child"}]}, "'end' is"),
        ({"target": "gene", "all": [{"rel": "associated with"}]}, "needs 'node', 'via' or 'field'"),
    ],
)
def test_malformed_graph_queries_are_one_line_errors(evaluator, graph, message):
    with pytest.raises(GraspError, match=message):
        evaluator.answers(graph)


def test_rows_are_a_valid_test_human_split(hpo):
    rows = human_queries(hpo)
    assert set(rows["split"]) == {"test-human"}
    assert rows["qid"].min() == HUMAN_QID_OFFSET and rows["qid"].is_unique
    assert set(rows["template"].str.removeprefix("human:")) == {"term", "one-hop", "two-hop", "intersection"}
    validate(with_queries(hpo, rows))
    pp = "phenotype present"
    hemangioblastoma_and_pheochromocytoma = [{"rel": pp, "node": "HP:0010797"}, {"rel": pp, "node": "HP:0002666"}]
    empty = [{"id": 0, "query": "q", "graph": {"target": "disease", "all": hemangioblastoma_and_pheochromocytoma}}]
    with pytest.raises(GraspError, match="question 0 has no answer"):
        human_queries(hpo, empty)  # no hpo disease is annotated with both: rewrite it, never an empty gold


def test_hpo_queries_carry_the_test_human_split_apart_from_the_synthetic_ones(hpo):
    queries = build_queries("hpo", hpo, DatasetConfig(n_queries=30, term_queries=0, intent_queries=0))
    human_splits = queries["split"].isin(["test-human", "val-human"])
    synth, human = queries[~human_splits], queries[queries["split"] == "test-human"]
    assert len(synth) == 30 and len(human) == len(load_questions())
    assert synth["qid"].max() < HUMAN_QID_OFFSET and not set(synth["query"]) & set(human["query"])
    validate(with_queries(hpo, queries))

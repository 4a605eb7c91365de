import pandas as pd
import pytest

from grasp_core.entities.config import GazetteerConfig
from grasp_core.entities.gazetteer import GazetteerExtractor
from grasp_core.skb.format import SKB
from grasp_core.textnorm import normalize
from tests.entities.conftest import SCHEMA, CountingEncoder, ids


@pytest.fixture(scope="module")
def gazetteer(skb, index, encoder):
    return GazetteerExtractor(skb, index, encoder)


def rows_by_mention(table):
    return {r.mention: r for r in table.rows}


def test_normalize_folds_case_punctuation_and_plurals():
    assert normalize("Seizures, Night-Blindness") == normalize("seizure night blindness")
    assert normalize("Allergies") == "allergy" and normalize("stress") == "stress"


def test_two_names_give_two_exactly_linked_anchors(gazetteer, skb):
    table = gazetteer.extract(["Which genes are associated with Marfan syndrome and tall stature?"])[0]
    rows = rows_by_mention(table)
    assert set(rows) == {"genes", "Marfan syndrome", "Tall stature"}
    for name, node_type in (("Marfan syndrome", "disease"), ("Tall stature", "effect/phenotype")):
        row = rows[name]
        assert row.role == "anchor" and row.types == (node_type,) and row.parent is None
        top = row.links[node_type][0]
        assert top.node_id == ids(skb, name)[0] and top.score == pytest.approx(1.0, abs=1e-3)
    # "Which genes": the type word after a request cue describes the answer
    assert rows["genes"].role == "target" and rows["genes"].types[0] == "gene/protein"
    assert [r.mention for r in table.rows] == ["genes", "Marfan syndrome", "Tall stature"]  # query order


def test_a_type_word_ending_the_query_is_the_target(gazetteer):
    table = gazetteer.extract(["Patient with tall stature and a variant in FBN1: which diseases?"])[0]
    rows = rows_by_mention(table)
    assert rows["diseases"].role == "target" and rows["diseases"].types == ("disease",)
    assert {"Tall stature", "FBN1"} <= set(rows)


def test_synonym_match_is_written_as_the_node_name(gazetteer, skb):
    rows = rows_by_mention(gazetteer.extract(["disease with increased body height or nyctalopia"])[0])
    assert set(rows) == {"Tall stature", "Night blindness"}
    assert rows["Night blindness"].links["effect/phenotype"][0].node_id == ids(skb, "Night blindness")[0]


def test_nested_mention_points_to_its_parent(gazetteer, skb):
    table = gazetteer.extract(["patients with an aortic root aneurysm"])[0]
    assert [(r.mention, r.types, r.parent) for r in table.rows] == [
        ("Aortic root aneurysm", ("effect/phenotype",), None),
        ("aortic root", ("anatomy",), 0),
    ]
    assert 'E2 "aortic root" role=anchor types=anatomy nested_in=E1' in table.render()
    assert (
        not GazetteerExtractor(skb, gazetteer.index, gazetteer.encoder, GazetteerConfig(nested=False))
        .extract(["patients with an aortic root aneurysm"])[0]
        .rows[1:]
    )


def test_numeric_constraints_are_unlinked_attributes(gazetteer):
    table = gazetteer.extract(["What drugs treat type 2 diabetes under $50 and last at least 30 hours?"])[0]
    rows = rows_by_mention(table)
    assert rows["under $50"].role == "attribute" and rows["under $50"].links == {}
    assert rows["at least 30 hours"].role == "attribute" and rows["at least 30 hours"].types == ()
    # the number inside a node name is not an attribute
    assert rows["type 2 diabetes"].role == "anchor"
    assert rows["drugs"].role == "target" and rows["drugs"].types[0] == "drug"


def test_symbols_match_only_when_written_as_symbols(gazetteer, skb):
    assert gazetteer.extract(["patients who met the criteria"])[0].rows == ()
    rows = rows_by_mention(gazetteer.extract(["proteins that interact with MET or fbn1"])[0])
    assert rows["MET"].links["gene/protein"][0].node_id == ids(skb, "MET")[0]
    assert rows["FBN1"].links["gene/protein"][0].node_id == ids(skb, "FBN1")[0]  # a digit: not an English word


def test_fuzzy_match_catches_a_variant_spelling(gazetteer, skb):
    rows = gazetteer.extract(["Which diseases present with nighttime blindness"])[0].rows
    fuzzy = [r for r in rows if r.role == "anchor"]
    assert len(fuzzy) == 1 and fuzzy[0].mention == "nighttime blindness"  # the query's wording is kept
    top = fuzzy[0].links["effect/phenotype"][0]
    assert top.node_id == ids(skb, "Night blindness")[0] and 0.85 <= top.score < 0.999
    # a clinging word is trimmed: the best of the run and the run less its first/last token is kept
    trimmed = gazetteer.extract(["Which genes are linked with nighttime blindness symptoms"])[0].rows
    assert [(r.mention, r.role) for r in trimmed] == [("genes", "target"), ("nighttime blindness", "anchor")]
    off = GazetteerExtractor(skb, gazetteer.index, gazetteer.encoder, GazetteerConfig(fuzzy=False))
    assert [r.role for r in off.extract(["Which diseases present with nighttime blindness"])[0].rows] == ["target"]


def test_batches_give_the_same_tables_as_single_queries(skb, index, encoder):
    queries = ["FBN1 and RHO", "metformin or aspirin for type 2 diabetes", "nothing to see here", "retina"]
    small = GazetteerExtractor(skb, index, encoder, GazetteerConfig(batch_size=2))
    batched = [t.to_json() for t in small.extract(queries)]
    assert batched == [GazetteerExtractor(skb, index, encoder).extract([q])[0].to_json() for q in queries]
    assert batched[2] == []


def test_a_batch_is_encoded_once_and_linked_as_without_shared_hits(gazetteer, skb, index, encoder):
    """Candidate spans and the mention texts they become share one encoder call and one name-index pass; the
    tables are those of linking the same mentions on their own."""
    from grasp_core.entities.linking import link_many

    counting = CountingEncoder(encoder)
    calls = counting.calls

    queries = ["Which genes come with an increase in the height of the body", "Marfan syndrome and nighttime blindness"]
    tables = GazetteerExtractor(skb, index, counting).extract(queries)
    assert len(calls) == 1 and len(calls[0]) == len(set(calls[0]))  # one call, each text once
    assert {"genes", "Marfan syndrome", "nighttime blindness"} <= set(calls[0])  # mentions among the spans
    alone = link_many(gazetteer.find_mentions(queries), skb, index, encoder)
    assert [t.to_json() for t in tables] == [t.to_json() for t in alone]


def test_a_whole_question_that_is_a_name_or_alias_names_its_node(gazetteer, skb):
    assert gazetteer.named("Marfan syndrome") == tuple(ids(skb, "Marfan syndrome"))
    assert gazetteer.named("  NYCTALOPIA ") == tuple(ids(skb, "Night blindness"))  # an alias, any case
    assert gazetteer.named("retinas") == tuple(ids(skb, "retina"))  # a plural
    assert gazetteer.named("which genes cause Marfan syndrome?") == ()  # a question naming it asks for others
    assert gazetteer.named("Marfan") == tuple(ids(skb, "Marfan syndrome"))  # its head (what precedes "syndrome")
    assert gazetteer.named("marfan syndrom") == tuple(ids(skb, "Marfan syndrome"))  # one typo
    assert gazetteer.named("nyctalopa") == tuple(ids(skb, "Night blindness"))  # a typo in one word of 7+ letters
    assert gazetteer.named("retna") == ()  # a short word one edit from a name is not read as it
    assert gazetteer.named("retinitis") == ()  # no head word: a name's first word alone names nothing


def test_a_name_inside_a_look_up_wording_names_its_node(gazetteer, skb):
    marfan = tuple(ids(skb, "Marfan syndrome"))
    assert gazetteer.named("what is marfan?") == marfan  # a head inside a wording
    assert gazetteer.named("Marfan syndrome info") == marfan
    assert gazetteer.named("tell me about the marfan syndrom") == marfan  # an article and a typo
    assert gazetteer.named("what is a retina") == tuple(ids(skb, "retina"))
    assert gazetteer.named("FBN1 gene") == tuple(ids(skb, "FBN1"))  # a type word beside the name
    assert gazetteer.named("gene FBN1") == tuple(ids(skb, "FBN1"))
    assert gazetteer.named("marfan gene") == ()  # the type word names another type: not a look-up of it
    assert gazetteer.named("what is the gene of marfan") == ()  # the rest of the wording is no name
    assert gazetteer.named("marfan aorta") == ()  # two names are not one
    assert gazetteer.named("what is") == ()


def test_a_look_up_wording_without_its_place_for_the_name_is_refused(skb, index, encoder):
    with pytest.raises(ValueError, match="exactly once"):
        GazetteerExtractor(skb, index, encoder, GazetteerConfig(lookup_frames=("what is",)))


def test_heads_and_typos_link_inside_a_question(gazetteer, skb):
    rows = rows_by_mention(gazetteer.extract(["which genes cause marfan"])[0])
    assert rows["Marfan syndrome"].links["disease"][0].node_id == ids(skb, "Marfan syndrome")[0]
    rows = rows_by_mention(gazetteer.extract(["drugs for type 2 diabtes and nyctalopia"])[0])
    assert rows["type 2 diabetes"].links["disease"][0].node_id == ids(skb, "type 2 diabetes")[0]


def test_a_head_is_a_name_people_type_alone_and_not_an_english_word():
    from grasp_core.entities.dictionary import build_dictionary

    names = [
        ("disease", "Marfan syndrome", None),
        ("disease", "Wells syndrome", "Eosinophilic cellulitis, seen in adults as well as in children"),
        ("disease", "Eye disease", None),
        ("disease", "Usher syndrome, type I", None),
        ("disease", "Usher syndrome, type II", None),
        ("effect/phenotype", "Abnormality of the eye", None),
        ("effect/phenotype", "Eye pain", "Pain in the eye, well localized"),
    ]
    nodes = pd.DataFrame(
        {
            "node_id": range(len(names)),
            "key": [f"K{i}" for i in range(len(names))],
            "type": [t for t, _, _ in names],
            "name": [n for _, n, _ in names],
            "synonyms": [s for _, _, s in names],
        }
    )
    nodes["aliases"] = [[] for _ in names]
    edges = pd.DataFrame({"src": [0], "rel": ["phenotype present"], "dst": [5]})
    skb = SKB(SCHEMA, nodes, edges, pd.DataFrame({"qid": [], "split": [], "query": [], "answer_ids": []}))
    entries = build_dictionary(skb, GazetteerConfig()).entries
    assert entries["marfan"] == (0,)
    assert "well" not in entries  # "well" is written in lower case in the text: an English word
    assert "eye" not in entries  # most names holding "eye" have no head word after it
    assert set(entries["usher syndrome"]) == set(entries["usher"]) == {3, 4}  # the name up to its head word
    assert "marfan" not in build_dictionary(skb, GazetteerConfig(head_words=())).entries

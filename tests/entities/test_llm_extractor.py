import json

import pandas as pd
import pytest

from grasp_core.entities.gazetteer import GazetteerExtractor
from grasp_core.entities.linking import Mention
from grasp_core.entities.llm_extractor import (
    LLMExtractor,
    gazetteer_demonstrations,
    mentions_to_json,
    parse_mentions,
)
from grasp_core.errors import ExtractionError
from grasp_core.skb.format import SKB
from tests.entities.conftest import SCHEMA, ids

ANSWER = json.dumps(
    [
        {"text": "Aortic root aneurysm", "types": ["effect/phenotype"], "role": "anchor", "nested_in": None},
        {"text": "aortic root", "types": ["anatomy", "disease"], "role": "anchor", "nested_in": 1},
        {"text": "drugs", "types": ["drug"], "role": "target", "nested_in": None},
        {"text": "under $50", "types": [], "role": "attribute", "nested_in": None},
    ]
)


def test_parser_reads_a_clean_answer():
    mentions = parse_mentions(ANSWER, SCHEMA)
    assert mentions == [
        Mention("Aortic root aneurysm", ("effect/phenotype",), "anchor"),
        Mention("aortic root", ("anatomy", "disease"), "anchor", parent=0),
        Mention("drugs", ("drug",), "target"),
        Mention("under $50", (), "attribute"),
    ]
    assert parse_mentions(mentions_to_json(mentions), SCHEMA) == mentions  # round trip


@pytest.mark.parametrize(
    "text",
    [
        f"```json\n{ANSWER}\n```\nThese are the mentions.",
        f"Sure! Here they are: {ANSWER}\n\nQuery: next query\nMentions: []",
        f"<think>hmm, let me see [x]</think>{ANSWER}",
        json.dumps({"mentions": json.loads(ANSWER)}),
    ],
)
def test_parser_tolerates_fences_prose_and_wrappers(text):
    assert [m.text for m in parse_mentions(text, SCHEMA)] == [
        "Aortic root aneurysm",
        "aortic root",
        "drugs",
        "under $50",
    ]


def test_parser_keeps_complete_objects_of_a_cut_off_list():
    cut = ANSWER[: ANSWER.index('"drugs"') + 12]
    assert [m.text for m in parse_mentions(cut, SCHEMA)] == ["Aortic root aneurysm", "aortic root"]


def test_parser_normalizes_types_roles_and_bad_items():
    text = json.dumps(
        [
            {
                "text": "FBN1",
                "types": ["Gene/Protein", "protein", "gene_protein"],
                "role": "ANCHOR",
            },  # case, unknown, dup
            {"text": "", "types": ["drug"], "role": "anchor"},  # skipped: empty text
            "a stray string",  # skipped
            {
                "text": "Tall stature",
                "type": "effect phenotype",
                "role": "entity",
                "nested_in": 7,
            },  # bad role, bad index
            {"text": "retina", "types": ["anatomy", "disease", "drug"], "role": "anchor", "nested_in": 5},  # itself
        ]
    )
    mentions = parse_mentions(text, SCHEMA)
    assert mentions == [
        Mention("FBN1", ("gene/protein",), "anchor"),
        Mention("Tall stature", ("effect/phenotype",), "anchor"),
        Mention("retina", ("anatomy", "disease"), "anchor"),
    ]


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty output"),
        ("I could not find any entity.", "no JSON list in the output"),
        ('[{"text": "FBN1", "types": ["gene/protein"],, }]', "invalid JSON"),
        ('[{"types": ["drug"]}, {"text": "  "}]', "no item of the list has a non-empty 'text'"),
        ('"just a string"', "no JSON list in the output"),
        ('{"answer": 3}', "the JSON is not a list of mentions"),
    ],
)
def test_parser_fails_with_a_reason(text, reason):
    with pytest.raises(ExtractionError) as err:
        parse_mentions(text, SCHEMA)
    assert err.value.reason.startswith(reason)


def test_an_empty_list_is_a_valid_answer():
    assert parse_mentions("[]", SCHEMA) == []


@pytest.fixture(scope="module")
def gazetteer(skb, index, encoder):
    return GazetteerExtractor(skb, index, encoder)


DEMOS = [
    (
        "Which genes are linked to Marfan syndrome?",
        [Mention("genes", ("gene/protein",), "target"), Mention("Marfan syndrome", ("disease",), "anchor")],
    )
] * 4


def test_prompt_has_schema_rules_demonstrations_and_query(skb, index, encoder, gazetteer):
    extractor = LLMExtractor(skb, index, encoder, lambda p: ["[]"] * len(p), DEMOS * 2, gazetteer)
    prompt = extractor.prompt("drugs for type 2 diabetes")
    assert "Node types: disease, gene/protein, drug, effect/phenotype, anatomy" in prompt
    assert 'gene/protein names look like: "FBN1"' in prompt  # highest degree gene first
    assert "under $50" in prompt  # the template's escaped dollar
    assert prompt.count("\nQuery: ") == 5  # four demonstrations (of eight given) + the query
    assert prompt.endswith("Query: drugs for type 2 diabetes\nMentions:")
    assert f"Mentions: {mentions_to_json(DEMOS[0][1])}" in prompt


def test_extractor_links_llm_mentions_and_falls_back_per_query(skb, index, encoder, gazetteer):
    seen = []

    def generate(prompts):  # stands in for an LLM endpoint, which cannot run here
        seen.append(len(prompts))
        return [ANSWER, "no idea", '[{"text": "FBN1", "types": ["gene/protein"], "role": "anchor", "nested_in": null}]']

    extractor = LLMExtractor(skb, index, encoder, generate, DEMOS, gazetteer)
    queries = ["drugs for an aortic root aneurysm under $50", "genes behind Marfan syndrome", "FBN1 partners"]
    out = extractor.extract_detailed(queries)
    assert seen == [3]
    assert [(e.source, e.error) for e in out] == [
        ("llm", None),
        ("gazetteer", "no JSON list in the output"),
        ("llm", None),
    ]
    first = out[0].table
    assert [r.mention for r in first.rows] == ["Aortic root aneurysm", "aortic root", "drugs", "under $50"]
    assert first.rows[1].parent == 0 and first.rows[3].links == {}
    assert first.rows[0].links["effect/phenotype"][0].node_id == ids(skb, "Aortic root aneurysm")[0]
    assert out[1].table.to_json() == gazetteer.extract([queries[1]])[0].to_json()  # the fallback's table
    assert out[2].table.rows[0].links["gene/protein"][0].node_id == ids(skb, "FBN1")[0]
    assert [t.to_json() for t in extractor.extract(queries)] == [e.table.to_json() for e in out]


def test_extractor_rejects_a_generate_that_loses_answers(skb, index, encoder, gazetteer):
    extractor = LLMExtractor(skb, index, encoder, lambda p: [], DEMOS, gazetteer)
    with pytest.raises(ValueError, match="0 answers for 1 prompts"):
        extractor.extract(["FBN1"])


def test_demonstrations_come_from_training_queries_and_cover_types(skb, gazetteer):
    queries = pd.DataFrame(
        {
            "qid": range(7),
            "split": ["train", "train", "train", "train", "test", "train", "train"],
            "query": [
                "FBN1 and Marfan syndrome",
                "nothing here",
                "metformin for type 2 diabetes",
                "RHO in the retina",
                "aspirin and Night blindness",
                "Marfan syndrome with FBN1 variants",
                "only FBN1",
            ],
            "answer_ids": [[0]] * 7,
        }
    )
    skb_q = SKB(skb.schema, skb.nodes, skb.edges, queries)
    demos = gazetteer_demonstrations(skb_q, gazetteer, n=3)
    texts = {q for q, _ in demos}
    # never the test split, never a query with < 2 mentions, and not both FBN1+Marfan queries (no new type)
    assert len(texts) == 3 and {"metformin for type 2 diabetes", "RHO in the retina"} < texts
    assert len(texts & {"FBN1 and Marfan syndrome", "Marfan syndrome with FBN1 variants"}) == 1
    assert {t for _, mentions in demos for m in mentions for t in m.types} == {
        "gene/protein",
        "disease",
        "drug",
        "anatomy",
    }

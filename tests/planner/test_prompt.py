from __future__ import annotations

import json

import pytest
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast

from grasp_core.entities.table import EntityTable
from grasp_core.llm.chat import render_prompt
from grasp_core.plan.parse import parse_plan
from grasp_core.plan.validate import validate_plan
from grasp_core.planner.lm.grammar import PlanGrammar, ll_tokenizer, matcher
from grasp_core.planner.lm.prompt import build_planner_messages, canonical_plan_json, planner_system_prompt
from tests.llm.helpers import PLANS, QUERY, SCHEMA, TABLE


def test_messages_fill_the_schema_then_table_and_query():
    system, user = build_planner_messages(SCHEMA, TABLE, QUERY)
    assert system["role"] == "system" and user["role"] == "user"
    for name in [*SCHEMA.node_types, *SCHEMA.relation_names]:
        assert name in system["content"]
    assert "- (anatomy) -[expression present]- (gene/protein)" in system["content"]
    assert "$" not in system["content"]  # every slot filled
    assert user["content"] == f"Entity table:\n{TABLE.render()}\n\nQuery: {QUERY}"
    # the example plan in the prompt is itself a valid plan of this schema
    example = system["content"].split("Example", 1)[1].split("\n", 1)[1]
    validate_plan(parse_plan(example), SCHEMA, TABLE)
    other = build_planner_messages(SCHEMA, EntityTable(), "q")[1]["content"]
    assert "(no entities found)" in other


def test_compact_prompt_is_terse():
    full, compact = planner_system_prompt(SCHEMA), planner_system_prompt(SCHEMA, compact=True)
    assert "expression present: anatomy-gene/protein" in compact and "Example" not in compact
    assert len(compact) < len(full)
    # the prompt text outside the slots is the same unified template
    assert full.split("Node types:")[0] == compact.split("Node types:")[0]


def test_render_with_and_without_a_chat_template(tokenizer):
    messages = build_planner_messages(SCHEMA, TABLE, QUERY, compact=True)
    text = render_prompt(tokenizer, messages)
    assert text.startswith("<|bos|><|system|>\nYou are the retrieval planner") and text.endswith(
        f"Query: {QUERY}\n<|assistant|>\n"
    )
    bare = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()), bos_token="<s>", eos_token="</s>")
    assert bare.chat_template is None
    assert render_prompt(bare, messages) == text.replace("<|bos|>", "<s>")


def test_canonical_json_renames_orders_and_is_in_the_grammar(tokenizer):
    messy = {
        "relevance_text": 'said "hello"\nworld',
        "hops": [
            {"from": "g", "rel": "target", "to": "target"},
            {"from": "tissue", "rel": "expression present", "to": "g", "to_type": "gene/protein"},
            {"from": "dz", "rel": "indication", "to": "target", "to_type": "drug"},
        ],
        "anchors": [
            {"var": "tissue", "ref": "E1", "match_mode": "name"},
            {"var": "dz", "type": "disease", "text": "a rare eye disease", "match_mode": "doc"},
        ],
        "target": {"type": "drug"},
    }
    text = canonical_plan_json(messy, TABLE)
    assert text == (  # the plan model's key order; paths from the last anchor's to the first's
        '{"target":{"type":"drug"},"anchors":[{"var":"a1","type":"anatomy","ref":"E1","match_mode":"name"},'
        '{"var":"a2","type":"disease","text":"a rare eye disease","match_mode":"doc"}],'
        '"hops":[{"from":"a2","rel":"indication","to":"target"},'
        '{"from":"a1","rel":"expression present","to":"x1_1","to_type":"gene/protein"},'
        '{"from":"x1_1","rel":"target","to":"target"}],'
        '"relevance_text":"said \'hello\' world"}'
    )
    m = matcher(PlanGrammar(SCHEMA, TABLE), ll_tokenizer(tokenizer))
    assert m.consume_tokens(tokenizer(text, add_special_tokens=False)["input_ids"]) and m.is_accepting()
    # a parsed Plan serializes the same way, and the canonical form is a fixed point
    assert canonical_plan_json(parse_plan(json.dumps(messy)), TABLE) == text
    assert canonical_plan_json(parse_plan(text)) == text


@pytest.mark.parametrize("plan", PLANS)
def test_canonical_json_of_valid_plans_validates(plan):
    text = canonical_plan_json(plan)
    validate_plan(parse_plan(text), SCHEMA, TABLE)
    assert canonical_plan_json(parse_plan(text)) == text  # a fixed point


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from grasp_core.planner.lm.tokenizer import train_planner_tokenizer
    from tests.llm.helpers import corpus

    return train_planner_tokenizer(corpus(), 800, tmp_path_factory.mktemp("tok") / "tok", schema=SCHEMA)

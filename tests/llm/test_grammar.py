from __future__ import annotations

import random

import pytest
import torch

from grasp_core.errors import GraspError, PlanError
from grasp_core.llm.backends import TransformersLLM
from grasp_core.plan.parse import parse_plan
from grasp_core.plan.validate import validate_plan
from grasp_core.planner.grammar import PlanGrammar, PlanGrammarConfig, TokenVocab, token_strings
from grasp_core.planner.prompt import build_planner_messages, canonical_plan_json
from tests.llm.helpers import PLANS, QUERY, SCHEMA, TABLE, plan_text


def valid(text: str) -> bool:
    try:
        validate_plan(parse_plan(text), SCHEMA, TABLE)
    except PlanError:
        return False
    return True


@pytest.fixture(scope="module")
def llm(model_dir):
    return TransformersLLM(model_dir)


def test_grammar_accepts_canonical_plans_and_rejects_invalid_ones():
    g = PlanGrammar(SCHEMA, TABLE)
    for plan in PLANS:
        assert g.accepts(canonical_plan_json(plan))
    bad_hop = plan_text(PLANS[0]).replace('"rel":"target"', '"rel":"indication"')  # gene/protein -indication- drug
    unknown_ref = plan_text(PLANS[0]).replace("E1", "E7")
    attribute_ref = plan_text(PLANS[0]).replace('"ref":"E1","type":"anatomy"', '"ref":"E3","type":"anatomy"')
    wrong_row_type = plan_text(PLANS[0]).replace('"type":"anatomy"', '"type":"drug"')
    trailing = plan_text(PLANS[0]) + " "
    text_in_name_mode = plan_text(PLANS[1]).replace('migraine","match_mode":"doc"', 'migraine","match_mode":"name"')
    for text in (
        bad_hop,
        unknown_ref,
        attribute_ref,
        wrong_row_type,
        trailing,
        text_in_name_mode,
        plan_text(PLANS[0])[:-1],
    ):
        assert not g.accepts(text), text


def test_refs_only_grammar_and_no_table():
    no_text = PlanGrammar(SCHEMA, TABLE, PlanGrammarConfig(text_anchors=False))
    assert no_text.accepts(canonical_plan_json(PLANS[0]))
    assert not no_text.accepts(canonical_plan_json(PLANS[1]))
    no_table = PlanGrammar(SCHEMA, None)
    assert not no_table.accepts(canonical_plan_json(PLANS[0]))
    assert no_table.accepts(canonical_plan_json(PLANS[2]))


def test_random_character_walks_never_dead_end_and_always_validate():
    """Walk the automaton choosing uniformly among the allowed next characters: every walk ends in a valid plan."""
    rng = random.Random(0)
    alphabet = sorted(
        {c for p in PLANS for c in plan_text(p)} | set('"{}[],:abcdefghijklmnopqrstuvwxyz/-_ 0123456789E')
    )
    g = PlanGrammar(SCHEMA, TABLE, PlanGrammarConfig(max_text_chars=12, max_relevance_chars=12))
    n_hops = set()
    for _ in range(150):
        state, text = g.start, ""
        while not g.is_final(state):
            options = [(c, s) for c in alphabet if (s := g.step(state, c)) is not None]
            assert options, f"dead end after {text!r}"
            c, state = rng.choice(options)
            text += c
        assert len(text) >= g.min_chars(g.start)
        assert valid(text), text
        n_hops.add(len(parse_plan(text).hops))
    assert {0, 1, 2, 3} <= n_hops


def test_token_strings_concatenate_to_the_text(tokenizer):
    strings = token_strings(tokenizer)
    text = plan_text(PLANS[0]) + " with  spaces\tand tabs"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert "".join(strings[i] for i in ids) == text
    # a character the BPE splits into bytes has no string per token: the grammar never offers half a character
    assert None in [strings[i] for i in tokenizer("血", add_special_tokens=False)["input_ids"]]
    assert strings[tokenizer.eos_token_id] is None and strings[tokenizer.pad_token_id] is None


def test_masks_are_cached_and_allow_exactly_the_valid_tokens(tokenizer):
    vocab = TokenVocab(tokenizer)
    g = PlanGrammar(SCHEMA, TABLE)
    state = g.advance(g.start, '{"target":{"type":"drug"},"anchors":[{"var":"a1","ref":"')
    ids, minc = g.allowed(state, vocab)
    assert g.allowed(state, vocab)[0] is ids  # cached
    allowed = {vocab.strings[i] for i in ids}
    assert {"E1", "E2", "E4"} <= allowed and "E3" not in allowed  # E3 is an attribute row
    brute = {i for i, s in enumerate(vocab.strings) if s is not None and g.advance(state, s) is not None}
    assert set(ids.tolist()) == brute
    for i, m in zip(ids.tolist(), minc.tolist()):
        assert m == g.min_chars(g.advance(state, vocab.strings[i]))
    free = g.advance(g.start, '{"target":{"type":"pathway"},"anchors":[],"hops":[],"relevance_text":"ab')
    ids, _ = g.allowed(free, vocab)
    brute = {i for i, s in enumerate(vocab.strings) if s is not None and g.advance(free, s) is not None}
    assert set(ids.tolist()) == brute


def test_every_constrained_sample_of_an_untrained_model_is_a_valid_plan(llm):
    torch.manual_seed(0)
    prompts = [build_planner_messages(SCHEMA, TABLE, QUERY, compact=True)] * 4
    grammars = [PlanGrammar(SCHEMA, TABLE)] * 4
    outs = llm.generate(prompts, n=16, temperature=1.0, max_new_tokens=300, constraint=grammars)
    samples = [s for group in outs for s in group]
    assert len(samples) == 64
    assert all(valid(s) for s in samples), [s for s in samples if not valid(s)][:3]
    assert len(set(samples)) > 32  # sampling, not one plan repeated
    unconstrained = [s for group in llm.generate(prompts[:1], n=16, temperature=1.0, max_new_tokens=100) for s in group]
    assert sum(valid(s) for s in unconstrained) == 0


def test_a_short_budget_still_ends_in_a_complete_plan(llm):
    torch.manual_seed(1)
    g = PlanGrammar(SCHEMA, TABLE)
    budget = g.min_chars(g.start) + 5
    outs = llm.generate(
        [build_planner_messages(SCHEMA, TABLE, QUERY, compact=True)],
        n=8,
        temperature=1.0,
        max_new_tokens=budget,
        constraint=[g],
    )
    assert all(valid(s) for s in outs[0]), outs


def test_decomposed_minimum_equals_the_full_recursion():
    """The fast minimum completion length inside the hops equals the plain recursion over all alternatives."""
    g = PlanGrammar(SCHEMA, TABLE, PlanGrammarConfig(max_anchors=2, max_hops=3))
    memo: dict = {}

    def full(ctx):
        if ctx not in memo:
            alts = g._alts(ctx)
            memo[ctx] = (
                (alts.lo + 1 + full(alts.next))
                if hasattr(alts, "lo")
                else min((len(s) + full(n) for s, n in alts), default=0)
            )
        return memo[ctx]

    assert full(g.start[0]) == g.min_chars(g.start)
    hop_contexts = [c for c in memo if c[0] in ("to", "chain_end", "next_anchor")]
    assert len(hop_contexts) > 100
    assert all(g._min_ctx(c) == memo[c] for c in hop_contexts)


def test_config_limits():
    with pytest.raises(GraspError, match="at most 9"):
        PlanGrammar(SCHEMA, TABLE, PlanGrammarConfig(max_anchors=4, max_hops=4))

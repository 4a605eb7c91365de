from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from grasp_core.errors import PlanError
from grasp_core.llm.backends import TransformersLLM
from grasp_core.plan.parse import parse_plan
from grasp_core.plan.validate import validate_plan
from grasp_core.planner.config import PlanGrammarConfig
from grasp_core.planner.lm.grammar import PlanGrammar, ll_tokenizer, matcher
from grasp_core.planner.lm.prompt import build_planner_messages, canonical_plan_json
from grasp_core.sources.synth import build_synth_skb
from tests.llm.helpers import PLANS, QUERY, SCHEMA, TABLE, plan_text


def valid(text: str, schema=SCHEMA, table=TABLE) -> bool:
    try:
        validate_plan(parse_plan(text), schema, table)
    except PlanError:
        return False
    return True


@pytest.fixture(scope="module")
def llm(model_dir):
    return TransformersLLM(model_dir)


@pytest.fixture(scope="module")
def lltok(tokenizer):
    return ll_tokenizer(tokenizer)


def accepts(grammar: PlanGrammar, lltok, text: str) -> bool:
    """llguidance's verdict: ``text`` (tokenized) is a complete sentence of ``grammar``."""
    m = matcher(grammar, lltok)
    return m.consume_tokens(lltok.tokenize_str(text)) and m.is_accepting()


def sentences(grammar: PlanGrammar, rule: str = "start") -> list[str]:
    """Every sentence of a grammar without free text, by expanding its rules."""
    expansions: list[str] = []
    for alt in grammar.rules[rule]:
        partial = [""]
        for item in alt:
            optional = item.endswith("?") and item[:-1] in grammar.rules  # a rule that may be left out
            parts = ["", *sentences(grammar, item[:-1])] if optional else None
            parts = parts or (sentences(grammar, item) if item in grammar.rules else [item])
            partial = [p + q for p in partial for q in parts]
        expansions += partial
    return expansions


def test_grammar_accepts_canonical_plans_and_rejects_invalid_ones(lltok):
    g = PlanGrammar(SCHEMA, TABLE)
    for plan in PLANS:
        assert accepts(g, lltok, canonical_plan_json(plan))
    text = canonical_plan_json(PLANS[0])
    bad_hop = text.replace('"rel":"target"', '"rel":"indication"')  # gene/protein -indication- drug
    unknown_ref = text.replace("E1", "E7")
    attribute_ref = text.replace('"type":"anatomy","ref":"E1"', '"type":"anatomy","ref":"E3"')
    wrong_row_type = text.replace('"type":"anatomy"', '"type":"drug"')
    text_in_name_mode = canonical_plan_json(PLANS[1]).replace(
        'migraine","match_mode":"doc"', 'migraine","match_mode":"name"'
    )
    blank_text = canonical_plan_json(PLANS[1]).replace("a painkiller for migraine", "  ")
    forward_paths = plan_text(parse_plan(canonical_plan_json(PLANS[1])).to_json() | {"hops": PLANS[1]["hops"]})
    for bad in (
        bad_hop,
        unknown_ref,
        attribute_ref,
        wrong_row_type,
        text + " ",
        text_in_name_mode,
        blank_text,
        text[:-1],
    ):
        assert not accepts(g, lltok, bad), bad
    assert not accepts(g, lltok, forward_paths)  # paths are listed last anchor first


def test_refs_only_grammar_and_no_table(lltok):
    no_text = PlanGrammar(SCHEMA, TABLE, PlanGrammarConfig(text_anchors=False))
    assert accepts(no_text, lltok, canonical_plan_json(PLANS[0]))
    assert not accepts(no_text, lltok, canonical_plan_json(PLANS[1]))
    no_table = PlanGrammar(SCHEMA, None)
    assert not accepts(no_table, lltok, canonical_plan_json(PLANS[0]))
    assert accepts(no_table, lltok, canonical_plan_json(PLANS[2]))


def test_every_sentence_of_a_small_grammar_validates_and_is_canonical():
    """Enumerate the whole grammar (refs only, no free text): every sentence is a valid canonical plan, and
    the sentences are exactly the canonical plans of up to 2 ref anchors with paths of up to 2 hops."""
    cfg = PlanGrammarConfig(max_anchors=2, max_hops=2, text_anchors=False, max_relevance_chars=0)
    g = PlanGrammar(SCHEMA, TABLE, cfg)
    all_plans = sentences(g)
    assert len(all_plans) == len(set(all_plans)) > 1000
    for text in all_plans:
        plan = parse_plan(text)
        assert valid(text), text
        assert canonical_plan_json(plan, TABLE) == text
        refs = [a.ref for a in plan.anchors]
        assert len(refs) == len(set(refs))
        assert len(plan.anchors) <= 2 and len(plan.hops) <= 2 * len(plan.anchors)
    assert {len(parse_plan(t).hops) for t in all_plans} == {0, 1, 2, 3, 4}
    assert {parse_plan(t).match for t in all_plans} == {None, "most"}  # partial matching is expressible
    assert g.max_bytes == max(len(t.encode()) for t in all_plans)


def test_random_token_walks_never_dead_end_and_always_validate(tokenizer, lltok):
    """Walk the grammar through llguidance's masks, choosing uniformly among the allowed tokens: every walk ends
    in a valid plan, within the grammar's byte bound."""
    rng = random.Random(0)
    g = PlanGrammar(SCHEMA, TABLE, PlanGrammarConfig(max_text_chars=12, max_relevance_chars=12))
    eos = tokenizer.eos_token_id
    n_hops, n_anchor_kinds = set(), set()
    for _ in range(80):
        m, ids = matcher(g, lltok), []
        while not m.is_stopped():
            bits = np.unpackbits(np.frombuffer(m.compute_bitmask(), dtype=np.uint8), bitorder="little")
            allowed = np.flatnonzero(bits[: lltok.vocab_size]).tolist()
            assert allowed, f"dead end after {tokenizer.decode(ids)!r}"
            tok = rng.choice(allowed)
            assert m.consume_token(tok)
            if tok != eos:
                ids.append(tok)
        text = tokenizer.decode(ids)
        assert valid(text), text
        assert len(text.encode()) <= g.max_bytes
        plan = parse_plan(text)
        n_hops.add(len(plan.hops))
        n_anchor_kinds |= {"ref" if a.ref else "text" for a in plan.anchors}
    assert {0, 1, 2, 3, 4} <= n_hops and n_anchor_kinds == {"ref", "text"}


def test_every_constrained_sample_of_an_untrained_model_is_a_valid_plan(llm):
    torch.manual_seed(0)
    prompts = [build_planner_messages(SCHEMA, TABLE, QUERY, compact=True)] * 4
    cfg = PlanGrammarConfig(max_anchors=2, max_hops=2, max_relevance_chars=16, max_text_chars=8)
    grammars = [PlanGrammar(SCHEMA, TABLE, cfg)] * 4
    budget = grammars[0].max_bytes + 1  # every token is at least one byte: the budget can never cut a plan
    outs = llm.generate(prompts, n=16, temperature=1.0, max_new_tokens=budget, constraint=grammars)
    samples = [s for group in outs for s in group]
    assert len(samples) == 64
    assert all(valid(s) for s in samples), [s for s in samples if not valid(s)][:3]
    assert len(set(samples)) > 32  # sampling, not one plan repeated
    unconstrained = [s for group in llm.generate(prompts[:1], n=16, temperature=1.0, max_new_tokens=100) for s in group]
    assert sum(valid(s) for s in unconstrained) == 0


def test_greedy_decoding_follows_the_grammar_too(llm):
    out = llm.generate(
        [build_planner_messages(SCHEMA, TABLE, QUERY, compact=True)], constraint=[PlanGrammar(SCHEMA, TABLE)]
    )
    assert valid(out[0][0]), out


def test_grammar_size_on_the_synthetic_prime_schema(lltok):
    """The grammar of the synthetic Prime schema compiles and stays small (its time per query is measured in
    ``benchmarks/constrained_decoding.py``, not here: a timed assertion fails on a busy machine)."""
    schema = build_synth_skb("prime", "tiny").schema
    g = PlanGrammar(schema, TABLE)
    assert matcher(g, lltok) is not None
    assert len(g.rules) < 5000


def test_a_hop_within_one_type_may_carry_a_direction_and_no_other_hop_may(lltok):
    g = PlanGrammar(SCHEMA, TABLE)
    anchor = {"var": "a1", "ref": "E2", "type": "gene/protein", "match_mode": "name"}
    ppi = {
        "target": {"type": "gene/protein"},
        "anchors": [anchor],
        "hops": [{"from": "a1", "rel": "ppi", "to": "target", "dir": "in"}],
        "relevance_text": "",
    }
    assert accepts(g, lltok, canonical_plan_json(ppi))
    assert '"dir":"in"' in canonical_plan_json(ppi)
    disease = {**ppi, "target": {"type": "disease"}, "hops": [{"from": "a1", "rel": "associated with", "to": "target"}]}
    undirected = canonical_plan_json(disease)
    assert accepts(g, lltok, undirected)
    assert not accepts(g, lltok, undirected.replace('"to":"target"}', '"to":"target","dir":"in"}'))

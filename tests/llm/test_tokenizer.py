from __future__ import annotations

import json

from transformers import AutoTokenizer

from grasp_core.io import is_complete
from grasp_core.planner.lm.tokenizer import schema_tokens, train_planner_tokenizer
from tests.llm.helpers import PLANS, SCHEMA, corpus, plan_text


def test_round_trip_is_exact(tokenizer):
    texts = [plan_text(p) for p in PLANS] + [
        "  two  spaces, tabs\tand\nnewlines",
        "Ünïcödé — 血管 ✓",
        "gene/proteins targeted",
    ]
    for text in texts:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids) == text


def test_schema_names_and_refs_are_single_tokens(tokenizer):
    for name in [*SCHEMA.node_types, *SCHEMA.relation_names, "E1", "E9", "E20"]:
        ids = tokenizer(name, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1, (name, tokenizer.convert_ids_to_tokens(ids))
    # inside a plan too, and the JSON punctuation between them is merged
    pieces = tokenizer.tokenize(plan_text(PLANS[0]))
    assert {"expression present", "gene/protein", "anatomy", "E1", '":"', '","'} <= set(pieces)
    # a whole-word token does not split a longer word
    assert "target" not in tokenizer.tokenize("targeted")


def test_saved_atomically_and_reloads_with_specials_and_template(tokenizer, tmp_path):
    out = tmp_path / "tok"
    train_planner_tokenizer(corpus(), 800, out, schema=SCHEMA)
    assert is_complete(out)
    loaded = AutoTokenizer.from_pretrained(out)
    assert (loaded.bos_token, loaded.eos_token, loaded.pad_token) == ("<|bos|>", "<|eos|>", "<|pad|>")
    assert loaded.padding_side == "left"
    chat = loaded.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert chat == "<|bos|><|user|>\nhi\n<|assistant|>\n"
    assert loaded(plan_text(PLANS[1]))["input_ids"] == tokenizer(plan_text(PLANS[1]))["input_ids"]


def test_training_is_deterministic(tmp_path):
    a = train_planner_tokenizer(corpus(), 800, tmp_path / "a", schema=SCHEMA)
    b = train_planner_tokenizer(corpus(), 800, tmp_path / "b", schema=SCHEMA)
    assert json.loads((tmp_path / "a" / "tokenizer.json").read_text()) == json.loads(
        (tmp_path / "b" / "tokenizer.json").read_text()
    )
    assert len(a) == len(b) <= 800 + len(schema_tokens(SCHEMA))  # a small corpus runs out of merges

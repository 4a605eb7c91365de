"""Schema-generic query synthesis: every relation of the three STaRK schemas asked about, gold checked by the
independent traversal of test_querygen, wording from names and from a user's wording.json."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from grasp_core.errors import GraspError, SKBFormatError
from grasp_core.questions.config import GenericConfig
from grasp_core.questions.generic_queries import (
    generic_queries,
    metapaths,
    synthesis_mix,
    synthesize_generic,
    templates_by_kind,
)
from grasp_core.questions.wording import default_hop_phrases, default_wording, load_wording, type_noun
from grasp_core.skb.format import SKB, validate
from grasp_core.skb.schema import Relation, Schema
from grasp_core.sources.synth import build_synth_skb
from tests.questions.test_querygen import _bad_property, _expected_answers


@pytest.fixture(scope="module", params=["amazon", "mag", "prime"])
def stark_schema_skb(request):
    return build_synth_skb(request.param, "tiny", seed=0)


@pytest.fixture(scope="module")
def made(stark_schema_skb):
    return generic_queries(stark_schema_skb, 400, seed=0)


def test_every_relation_of_the_stark_schemas_gets_questions(stark_schema_skb, made):
    asked = {r.split("|")[0] for q, _ in made for p in q.template.split(" & ") for r in p.split(">")[1::2]}
    assert asked == set(stark_schema_skb.schema.relation_names)
    kinds = Counter("intersection" if " & " in q.template else q.template.count(">") // 2 for q, _ in made)
    assert set(kinds) == {1, 2, 3, "intersection"} and all(n >= 15 for n in kinds.values())
    assert set(Counter(w.register for _, w in made)) == {"question", "request", "conversational", "terse"}


def test_gold_is_exactly_relation_and_property(stark_schema_skb, made):
    with_property = 0
    for q, _ in made:
        assert set(q.answer_ids) == _expected_answers(stark_schema_skb, q.template, q.anchors, q.property), q.text
        assert 1 <= len(q.answer_ids) <= 20 and not set(q.anchors) & set(q.answer_ids)
        if q.property is not None:
            with_property += 1
            assert not _bad_property(q.property.phrase) and q.property.phrase.lower() in q.text.lower()
    assert with_property >= len(made) // 3


def test_frame_splits_are_disjoint_and_deterministic(stark_schema_skb):
    df = synthesize_generic(stark_schema_skb, 150, seed=3)
    assert list(df.columns) == ["qid", "split", "query", "answer_ids", "template", "register"]
    assert dict(df["split"].value_counts()) == {"train": 90, "val": 30, "test": 30}
    texts = {s: set(df.loc[df["split"] == s, "query"]) for s in ("train", "val", "test")}
    assert not (texts["train"] & texts["val"]) and not (texts["train"] & texts["test"]) and df["query"].is_unique
    validate(SKB(stark_schema_skb.schema, stark_schema_skb.nodes, stark_schema_skb.edges, df))
    assert df.equals(synthesize_generic(stark_schema_skb, 150, seed=3))
    mix = synthesis_mix(df)
    assert sum(mix["register"].values()) == sum(mix["template kind"].values()) == 150


def test_metapaths_of_a_small_schema():
    schema = Schema("s", {"a": (), "b": ()}, (Relation("r", "a", "b"), Relation("s", "b", "b")))
    one = {p for p in metapaths(schema, 1)}
    assert one == {("a", "r", "b"), ("b", "r", "a"), ("b", "s", "b")}
    three = metapaths(schema, 3)
    assert ("a", "r", "b", "s", "b", "r", "a") in three
    assert ("b", "s", "b", "s", "b", "s", "b") not in three  # never straight back twice in a row
    kinds = templates_by_kind(schema, 3)
    assert {len(t.paths) for t in kinds["intersection"]} == {2}
    assert all(t.paths[0][-1] == t.paths[1][-1] for t in kinds["intersection"])


def test_default_wording_reads_the_names():
    nouns = {"brand": type_noun("brand"), "product": type_noun("product")}
    assert "with brand {x}" in default_hop_phrases(Relation("has_brand", "product", "brand"), "brand", "product", nouns)
    assert default_hop_phrases(Relation("author___writes___paper", "author", "paper"), "author", "paper", {}) == [
        "that {x} writes"
    ]
    assert default_hop_phrases(Relation("author___writes___paper", "author", "paper"), "paper", "author", {}) == [
        "writing {x}"
    ]
    rel = Relation("phenotype present", "disease", "effect/phenotype")
    assert "with a phenotype present relation to {x}" in default_hop_phrases(rel, "disease", "effect/phenotype", {})
    assert type_noun("field_of_study") == ("field of study", "fields of study")
    assert type_noun("gene/protein") == ("gene or protein", "genes or proteins")


def test_a_wording_file_replaces_defaults_and_bad_ones_fail_in_one_line(tmp_path):
    skb = build_synth_skb("mag", "tiny", seed=0)
    (tmp_path / "wording.json").write_text(
        json.dumps(
            {
                "types": {"paper": [["article", "articles"]]},
                "hops": [
                    {
                        "relation": "author___writes___paper",
                        "from": "author",
                        "to": "paper",
                        "phrases": ["penned by {x}"],
                    }
                ],
            }
        )
    )
    wording = load_wording(tmp_path, skb.schema)
    assert wording.hops[("author___writes___paper", "author", "paper")] == ["penned by {x}"]
    assert (
        wording.hops[("author___writes___paper", "paper", "author")]
        == default_wording(skb.schema).hops[("author___writes___paper", "paper", "author")]
    )
    df = synthesize_generic(skb, 200, seed=0, skb_dir=tmp_path)
    one_hop = df[df["template"] == "author>author___writes___paper>paper"]
    assert len(one_hop) and all("penned by" in q and "article" in q.lower() for q in one_hop["query"])
    (tmp_path / "wording.json").write_text(
        json.dumps({"hops": [{"relation": "cites", "from": "paper", "to": "paper", "phrases": ["x"]}]})
    )
    with pytest.raises(SKBFormatError, match=r"wording.json, row 0: hops: no relation \(.cites., .paper., .paper.\)"):
        load_wording(tmp_path, skb.schema)
    (tmp_path / "wording.json").write_text(json.dumps({"fields": {"abstract": ["no placeholder"]}}))
    with pytest.raises(SKBFormatError, match=r"has no \{p\} placeholder"):
        load_wording(tmp_path, skb.schema)


def test_a_small_skb_gives_what_it_holds_and_a_bare_one_fails():
    import pandas as pd

    from grasp_core.sources.importer import build_skb
    from tests.sources.test_import import EDGES, NODES

    skb = build_skb(pd.DataFrame(NODES), pd.DataFrame(EDGES, columns=["src", "rel", "dst"]), "books")
    few = generic_queries(skb, 10_000, seed=0, gcfg=GenericConfig(stale_attempts=300, min_queries=5))
    assert 5 <= len(few) < 10_000 and len({q.text for q, _ in few}) == len(few)
    with pytest.raises(GraspError, match="too small or too sparse"):
        generic_queries(skb, 10_000, seed=0, gcfg=GenericConfig(stale_attempts=300, min_queries=len(few) + 1))
    bare = SKB(Schema("bare", {"a": ()}, ()), skb.nodes.iloc[:3].assign(type="a"), skb.edges.iloc[:0], skb.queries)
    with pytest.raises(GraspError, match="no relations"):
        generic_queries(bare, 10, seed=0)


def test_paraphrase_through_a_local_endpoint_keeps_only_rewrites_that_keep_the_names(stark_schema_skb):
    import re

    from tests.llm.openai_server import OpenAIServer

    def answer(messages):
        prompt = messages[-1]["content"]
        question = prompt.split("Question: ", 1)[1]
        keep = re.findall(r'"([^"]+)"', prompt.split("Answer with", 1)[0])
        if len(question) % 2:  # drops a phrase it had to keep: refused, the template's wording stays
            return question.replace(keep[0], "that thing")
        return f"Quick one - {question.rstrip('?.')}, please?"

    plain = synthesize_generic(stark_schema_skb, 60, seed=1)
    with OpenAIServer(answer) as server:
        worded = synthesize_generic(stark_schema_skb, 60, seed=1, paraphrase_url=server.url, paraphrase_model="m")
    assert len(server.requests) == 60 and server.requests[0]["model"] == "m"
    rewritten = worded["query"] != plain["query"]
    assert 0 < rewritten.sum() < 60
    assert all(q.startswith("Quick one - ") for q in worded.loc[rewritten, "query"])
    assert all(len(q) % 2 for q in plain.loc[~rewritten, "query"])  # exactly the refused ones kept their wording
    assert worded.drop(columns="query").equals(plain.drop(columns="query"))  # same gold, splits, templates

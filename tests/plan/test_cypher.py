import numpy as np
import pytest

from grasp_core.errors import PlanError
from grasp_core.graph.config import GraphStoreConfig
from grasp_core.graph.open import open_graph_store
from grasp_core.plan.cypher import compile_plan
from grasp_core.plan.parse import parse_plan
from grasp_core.plan.validate import validate_plan
from grasp_core.sources.synth import build_synth_skb
from tests.plan.oracle import (
    PRIME_LIKE,
    adjacency,
    oracle,
    random_bindings,
    random_plan,
    random_skb,
)

PLAN = parse_plan("""{"target": {"type": "drug"},
  "anchors": [{"var": "a1", "type": "anatomy", "text": "retina"}],
  "hops": [{"from": "a1", "rel": "expression present", "to": "x1"},
           {"from": "x1", "rel": "target", "to": "target"}]}""")


@pytest.fixture(scope="module", params=["random", "synth-prime-tiny"])
def skb(request):
    return random_skb(seed=1) if request.param == "random" else build_synth_skb("prime", "tiny", seed=0)


@pytest.fixture(scope="module")
def store(skb, tmp_path_factory):
    yield from _store(skb, tmp_path_factory)


@pytest.fixture(scope="module")
def prime_like_store(tmp_path_factory):
    yield from _store(random_skb(seed=1), tmp_path_factory)


def _store(skb, tmp_path_factory):
    store = open_graph_store(GraphStoreConfig(), tmp_path_factory.mktemp("graph") / "store")
    store.load(skb)
    yield store
    store.close()


def test_both_dialect_texts():
    bindings = {"a1": [(3, 0.9), (4, 0.5)]}
    neo4j = compile_plan(PLAN, PRIME_LIKE, bindings, dialect="neo4j")
    assert neo4j.text == (
        "UNWIND $b0 AS w\n"
        "MATCH (v0:`N_anatomy` {id: w.id})\n"
        "WITH v0, w.score AS s\n"
        "MATCH (v0)-[e0:`R_expression_present`]-(v1:`N_gene_protein`)\n"
        "WITH v1, max(s) AS s\n"
        "MATCH (v1)-[e1:`R_target`]-(t:`N_drug`)\n"
        "WITH t, max(s) AS s\n"
        "RETURN t.id AS node_id, s AS score"
    )
    assert neo4j.params == {"b0": [{"id": 3, "score": 0.9}, {"id": 4, "score": 0.5}]}
    ladybug = compile_plan(PLAN, PRIME_LIKE, bindings, dialect="ladybug")
    assert ladybug.text == (
        "MATCH (v0:`N_anatomy`) WHERE v0.id IN $ids0\n"
        "UNWIND $b0 AS w\n"
        "WITH v0, w WHERE w.id = v0.id\n"
        "WITH v0, w.score AS s\n"
        "MATCH (v0)-[e0:`R_expression_present`]-(v1:`N_gene_protein`) HINT (v0 JOIN e0) JOIN v1\n"
        "WITH v1, max(s) AS s\n"
        "MATCH (v1)-[e1:`R_target`]-(t:`N_drug`) HINT (v1 JOIN e1) JOIN t\n"
        "WITH t, max(s) AS s\n"
        "RETURN t.id AS node_id, s AS score"
    )
    assert ladybug.params == {"ids0": [3, 4], **neo4j.params}


def test_zero_hop_plans_are_not_compiled():
    with pytest.raises(PlanError) as err:
        compile_plan(parse_plan('{"target": {"type": "drug"}}'), PRIME_LIKE)
    assert err.value.reason == "zero_hops"


def test_random_plans_equal_the_oracle(skb, store):
    """The embedded store returns exactly the reference scores (the neo4j text runs in tests/graph/test_neo4j_store.py)."""
    rng = np.random.default_rng(7)
    adj = adjacency(skb)
    reached = multi_anchor = 0
    for _ in range(60):
        plan = validate_plan(random_plan(skb.schema, rng), skb.schema)
        bindings = random_bindings(skb, plan, rng)
        compiled = compile_plan(plan, skb.schema, bindings, dialect="ladybug")
        got = {int(i): s for i, s in store.run(compiled.text, compiled.params)}
        want = oracle(skb, adj, plan, bindings)
        assert got.keys() == want.keys(), compiled.text
        for i in want:
            assert got[i] == pytest.approx(want[i], abs=1e-9)
        reached += bool(want)
        multi_anchor += bool(want) and len(plan.anchors) > 1
    assert reached >= 30 and multi_anchor >= 5  # the sample really exercises traversal and intersections


def test_the_frontier_cap_keeps_the_best_nodes_of_every_main_chain_hop(skb, store):
    """With a small cap the store equals an oracle applying the same cap, and the cap really changes results."""
    rng = np.random.default_rng(11)
    adj = adjacency(skb)
    changed = 0
    for _ in range(40):
        plan = validate_plan(random_plan(skb.schema, rng), skb.schema)
        bindings = random_bindings(skb, plan, rng)
        compiled = compile_plan(plan, skb.schema, bindings, dialect="ladybug", max_frontier=3)
        got = {int(i): s for i, s in store.run(compiled.text, compiled.params)}
        want = oracle(skb, adj, plan, bindings, max_frontier=3)
        assert got.keys() == want.keys(), compiled.text
        assert all(got[i] == pytest.approx(want[i], abs=1e-9) for i in want)
        assert len(got) <= 3
        changed += want != oracle(skb, adj, plan, bindings)
    assert changed >= 10


def test_the_cap_is_one_order_by_limit_line_per_main_chain_hop_in_both_dialects():
    for dialect in ("neo4j", "ladybug"):
        text = compile_plan(PLAN, PRIME_LIKE, {"a1": [(3, 0.9)]}, dialect=dialect, max_frontier=500).text
        assert text.endswith(
            "WITH t, max(s) AS s\nWITH t, s ORDER BY s DESC, t.id LIMIT 500\nRETURN t.id AS node_id, s AS score"
        )
        assert "WITH v1, max(s) AS s\nWITH v1, s ORDER BY s DESC, v1.id LIMIT 500\n" in text
    with pytest.raises(ValueError, match="max_frontier"):
        compile_plan(PLAN, PRIME_LIKE, max_frontier=0)


EVIL = 'x"}) MATCH (n) DETACH DELETE n //`) DETACH DELETE n; CREATE NODE TABLE Evil(id INT64, PRIMARY KEY(id))'


def test_injection_through_anchor_and_relevance_text_never_reaches_the_query_text(prime_like_store):
    store = prime_like_store
    evil = PLAN.model_copy(
        update={"relevance_text": EVIL, "anchors": (PLAN.anchors[0].model_copy(update={"text": EVIL}),)}
    )
    bindings = {"a1": [(int(random_skb(seed=1).ids_of_type("anatomy")[0]), 1.0)]}
    before = store.counts()
    for dialect in ("neo4j", "ladybug"):
        compiled = compile_plan(evil, PRIME_LIKE, bindings, dialect=dialect)
        assert compiled == compile_plan(PLAN, PRIME_LIKE, bindings, dialect=dialect)  # text is independent of it
        assert "DELETE" not in compiled.text and EVIL not in str(compiled.params)
    store.run(compiled.text, compiled.params)  # the ladybug text
    assert store.counts() == before

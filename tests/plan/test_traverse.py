"""The in-process traversal returns exactly what the plan's Cypher query returns from the embedded store."""

import numpy as np
import pandas as pd
import pytest

from grasp_core.graph.adjacency import Adjacency
from grasp_core.graph.config import GraphStoreConfig
from grasp_core.graph.open import open_graph_store
from grasp_core.plan import traverse as traverse_module
from grasp_core.plan.cypher import compile_plan
from grasp_core.plan.model import TARGET, Anchor, Hop, Plan, Target
from grasp_core.plan.traverse import traverse
from grasp_core.plan.validate import validate_plan
from grasp_core.skb.format import SKB
from grasp_core.skb.schema import Relation, Schema
from grasp_core.sources.synth import build_synth_skb
from tests.plan.oracle import adjacency, oracle, random_bindings, random_plan, random_skb


@pytest.fixture(scope="module", params=["random", "synth-prime-tiny"])
def env(request, tmp_path_factory):
    skb = random_skb(seed=3) if request.param == "random" else build_synth_skb("prime", "tiny", seed=0)
    store = open_graph_store(GraphStoreConfig(), tmp_path_factory.mktemp("graph") / "store")
    store.load(skb)
    yield skb, Adjacency.build(skb), store
    store.close()


@pytest.mark.parametrize("hop", ["either", "push", "pull"])
@pytest.mark.parametrize("cap", [None, 3])
def test_random_plans_equal_the_store_and_the_oracle(env, hop, cap, monkeypatch):
    """Pushing, pulling or either (by work), with or without a cap, hops undirected or directed: the same rows as
    the store and the oracle."""
    skb, adj, store = env
    monkeypatch.setattr(
        traverse_module, "PULL_PER_PUSH", {"either": traverse_module.PULL_PER_PUSH, "push": 0, "pull": 10**9}[hop]
    )
    rng, ref = np.random.default_rng(5), adjacency(skb)
    reached = multi_anchor = capped = directed = 0
    for _ in range(80):
        plan = validate_plan(random_plan(skb.schema, rng), skb.schema)
        bindings = random_bindings(skb, plan, rng)
        ids, scores = traverse(plan, adj, bindings, cap)
        compiled = compile_plan(plan, skb.schema, bindings, dialect="ladybug", max_frontier=cap)
        rows = dict(store.run(compiled.text, compiled.params))
        want = oracle(skb, ref, plan, bindings, max_frontier=cap)
        assert ids.tolist() == sorted(want) == sorted(rows), compiled.text
        np.testing.assert_allclose(scores, [rows[i] for i in ids.tolist()], rtol=0, atol=1e-12)
        np.testing.assert_allclose(scores, [want[i] for i in ids.tolist()], rtol=0, atol=1e-12)
        reached += bool(want)
        multi_anchor += bool(want) and len(plan.anchors) > 1
        capped += cap is not None and want != oracle(skb, ref, plan, bindings)
        directed += bool(want) and any(h.dir is not None for h in plan.hops)
    assert reached >= 25 and multi_anchor >= 5 and directed >= 3 and (cap is None or capped >= 5)


def test_edges_outside_the_declared_type_pairs_are_not_walked():
    """Like the stores (``edge_groups``): an edge whose endpoint types fit no declared pair is not in the graph."""
    skb = random_skb(seed=3)
    genes, drugs = skb.ids_of_type("gene/protein"), skb.ids_of_type("drug")
    odd = pd.DataFrame({"src": [drugs[0]], "rel": ["ppi"], "dst": [genes[0]]})  # ppi is gene-gene only
    plus = SKB(skb.schema, skb.nodes, pd.concat([skb.edges, odd], ignore_index=True), skb.queries)
    assert Adjacency.build(plus).relations["ppi"].nbr.tolist() == Adjacency.build(skb).relations["ppi"].nbr.tolist()


def test_a_hop_into_a_type_without_nodes_reaches_nothing():
    skb = random_skb(seed=3)
    schema = Schema(
        "with-pathways",
        {**skb.schema.node_types, "pathway": ()},
        (*skb.schema.relations, Relation("involved in", "gene/protein", "pathway")),
    )
    skb = SKB(schema, skb.nodes, skb.edges, skb.queries)
    plan = validate_plan(
        Plan(
            target=Target(type="pathway"),
            anchors=(Anchor(var="a", type="gene/protein", text="x"),),
            hops=(Hop(**{"from": "a", "rel": "involved in", "to": TARGET}),),
        ),
        schema,
    )
    ids, scores = traverse(plan, Adjacency.build(skb), {"a": [(int(skb.ids_of_type("gene/protein")[0]), 0.5)]})
    assert len(ids) == len(scores) == 0


def test_partial_plans_equal_the_store_and_the_oracle_path_by_path(env):
    """A "most" plan: every node some path reaches, scored by the sum over the paths reaching it; the store runs
    one query per path and adds them the same way."""
    from grasp_core.errors import PlanError
    from grasp_core.plan.traverse import add_branches

    skb, adj, store = env
    rng, ref = np.random.default_rng(11), adjacency(skb)
    partial = refused = 0
    for _ in range(80):
        plan = random_plan(skb.schema, rng).model_copy(update={"match": "most"})
        try:
            plan = validate_plan(plan, skb.schema)
        except PlanError as err:  # paths that meet before the target
            assert err.reason == "bad_match"
            refused += 1
            continue
        bindings = random_bindings(skb, plan, rng)
        ids, scores = traverse(plan, adj, bindings)
        want: dict[int, float] = {}
        for branch in plan.branches():
            for node, score in oracle(skb, ref, branch, bindings).items():
                want[node] = want.get(node, 0.0) + score
        compiled = [compile_plan(b, skb.schema, bindings, dialect="ladybug") for b in plan.branches()]
        parts = [store.run(c.text, c.params) for c in compiled]
        got_ids, got = add_branches(
            [(np.array([r[0] for r in p], np.int64), np.array([r[1] for r in p])) for p in parts]
        )
        assert ids.tolist() == sorted(want) == got_ids.tolist()
        np.testing.assert_allclose(scores, [want[i] for i in ids.tolist()], rtol=0, atol=1e-12)
        np.testing.assert_allclose(got, scores, rtol=0, atol=1e-12)
        partial += plan.partial and len(want) > 0
    assert partial >= 10 and refused >= 5


def test_a_partial_plan_ranks_nodes_on_more_paths_higher():
    """Findings f0, f1, f2: a disease with all three scores above one with two, above one with one; "all" keeps
    only the first."""
    schema = Schema(
        "findings", {"disease": (), "phenotype": ()}, (Relation("phenotype present", "disease", "phenotype"),)
    )
    nodes = pd.DataFrame(
        {
            "node_id": range(6),
            "key": [f"K{i}" for i in range(6)],
            "type": ["phenotype"] * 3 + ["disease"] * 3,
            "name": ["f0", "f1", "f2", "all three", "two", "one"],
        }
    )
    edges = pd.DataFrame([(3, 0), (3, 1), (3, 2), (4, 0), (4, 1), (5, 2)], columns=["src", "dst"]).assign(
        rel="phenotype present"
    )[["src", "rel", "dst"]]
    skb = SKB(schema, nodes, edges, pd.DataFrame({"qid": [], "split": [], "query": [], "answer_ids": []}))
    anchors = tuple(Anchor(var=f"a{i}", type="phenotype", text=f"f{i}") for i in range(3))
    hops = tuple(Hop(**{"from": f"a{i}", "rel": "phenotype present", "to": TARGET}) for i in range(3))
    bindings = {f"a{i}": [(i, 0.9)] for i in range(3)}
    adj = Adjacency.build(skb)
    most = validate_plan(Plan(target=Target(type="disease"), anchors=anchors, hops=hops, match="most"), schema)
    ids, scores = traverse(most, adj, bindings)
    assert [int(i) for i in ids[np.argsort(-scores)]] == [3, 4, 5]
    np.testing.assert_allclose(np.sort(scores)[::-1], [2.7, 1.8, 0.9])
    every = validate_plan(Plan(target=Target(type="disease"), anchors=anchors, hops=hops), schema)
    assert traverse(every, adj, bindings)[0].tolist() == [3]

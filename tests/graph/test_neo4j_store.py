"""The Neo4j backend against a real Bolt server: the session's ``bolt_server`` (ArcadeDB from the arcadedb-embedded
wheel, or the Neo4j 5 named by NEO4J_URI / NEO4J_USER / NEO4J_PASSWORD)."""

import numpy as np
import pandas as pd
import pytest

from grasp_core.errors import GraphStoreError
from grasp_core.graph.config import GraphStoreConfig
from grasp_core.graph.open import open_graph_store
from grasp_core.plan.cypher import compile_plan
from grasp_core.plan.validate import validate_plan
from grasp_core.skb.format import SKB
from grasp_core.skb.schema import Relation, Schema
from tests.plan.oracle import (
    PRIME_LIKE,
    adjacency,
    oracle,
    random_bindings,
    random_plan,
    random_skb,
)


def test_missing_server_settings_raise_a_clear_error(monkeypatch):
    monkeypatch.delenv("NEO4J_URI", raising=False)
    with pytest.raises(GraphStoreError, match="NEO4J_URI"):
        open_graph_store(GraphStoreConfig(backend="neo4j"))


@pytest.mark.neo4j
def test_neo4j_loads_and_equals_the_oracle_and_the_embedded_store(tmp_path, bolt_env):
    skb = random_skb(seed=1)
    neo = open_graph_store(GraphStoreConfig(backend="neo4j", batch_size=50, database=bolt_env.database))
    neo.load(skb)
    embedded = open_graph_store(GraphStoreConfig(), tmp_path / "store")
    embedded.load(skb)
    assert neo.counts() == embedded.counts()
    rng, adj = np.random.default_rng(3), adjacency(skb)
    for _ in range(30):
        plan = validate_plan(random_plan(PRIME_LIKE, rng), PRIME_LIKE)
        bindings = random_bindings(skb, plan, rng)
        for cap in (None, 3):  # exact, and with a frontier cap small enough to bite
            want = oracle(skb, adj, plan, bindings, max_frontier=cap)
            for store in (neo, embedded):
                compiled = compile_plan(plan, PRIME_LIKE, bindings, dialect=store.dialect, max_frontier=cap)
                got = dict(store.run(compiled.text, compiled.params))
                assert got.keys() == want.keys()
                assert all(got[i] == pytest.approx(want[i], abs=1e-9) for i in want)
    neo.close()
    embedded.close()


@pytest.mark.neo4j
def test_a_load_replaces_the_graph_loaded_before(bolt_env):
    """The tests share one server: a graph loaded before (the tiny pipeline's Prime-like one) with a node type the
    next schema lacks must not leave its nodes, nor their edges of a relation both have (they would count)."""
    schema = Schema("earlier", {"disease": (), "pathway": ()}, (Relation("parent-child", "pathway", "pathway"),))
    nodes = pd.DataFrame({"node_id": [0, 1, 2], "key": ["d", "p", "q"], "type": ["disease", "pathway", "pathway"]})
    nodes["name"] = nodes["key"]
    no_queries = pd.DataFrame({"qid": [], "split": [], "query": [], "answer_ids": []})
    earlier = SKB(schema, nodes, pd.DataFrame({"src": [1], "rel": ["parent-child"], "dst": [2]}), no_queries)
    neo = open_graph_store(GraphStoreConfig(backend="neo4j", database=bolt_env.database))
    neo.load(earlier)
    assert neo.counts() == {"nodes": {"disease": 1, "pathway": 2}, "edges": {"parent-child": 1}}
    skb = random_skb(seed=2, nodes_per_type=3, edges_per_relation=2)
    neo.load(skb)
    want_edges = {r: int(n) for r, n in skb.edges["rel"].value_counts().items()}
    assert neo.counts() == {"nodes": {t: 3 for t in PRIME_LIKE.node_types}, "edges": want_edges}
    assert neo.run("MATCH (n:N_pathway) RETURN count(n)") == [(0,)]
    neo.close()


@pytest.mark.neo4j
def test_a_refused_login_names_the_server_but_never_the_password(bolt_env, monkeypatch):
    monkeypatch.setenv("NEO4J_PASSWORD", "wrong-Secret-42")
    with pytest.raises(GraphStoreError) as err:
        open_graph_store(GraphStoreConfig(backend="neo4j", database=bolt_env.database))
    assert bolt_env.uri in str(err.value) and "wrong-Secret-42" not in str(err.value)
    host = bolt_env.uri.split("://", 1)[1]
    monkeypatch.setenv("NEO4J_URI", f"bolt://{bolt_env.user}:{bolt_env.password}@{host}")  # a password in the URI
    with pytest.raises(GraphStoreError) as err:
        open_graph_store(GraphStoreConfig(backend="neo4j", database=bolt_env.database))
    assert bolt_env.password not in str(err.value) and "***" in str(err.value)

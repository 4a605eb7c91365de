"""Neo4j integration: runs only against a real server (set NEO4J_URI, NEO4J_USER, NEO4J_PASSWORD)."""

import os

import numpy as np
import pytest

from grasp_core.errors import GraphStoreError
from grasp_core.graph.open import open_graph_store
from grasp_core.graph.store import GraphStoreConfig
from grasp_core.plan.cypher import compile_plan
from grasp_core.plan.validate import validate_plan
from tests.plan.oracle import (
    PRIME_LIKE,
    adjacency,
    oracle,
    random_bindings,
    random_plan,
    random_skb,
)

needs_server = pytest.mark.skipif(not os.environ.get("NEO4J_URI"), reason="NEO4J_URI is not set (no Neo4j server)")


def test_missing_server_settings_raise_a_clear_error(monkeypatch):
    monkeypatch.delenv("NEO4J_URI", raising=False)
    with pytest.raises(GraphStoreError, match="NEO4J_URI"):
        open_graph_store(GraphStoreConfig(backend="neo4j"))


@pytest.mark.neo4j
@needs_server
def test_neo4j_loads_and_equals_the_oracle_and_the_embedded_store(tmp_path):
    skb = random_skb(seed=1)
    neo = open_graph_store(GraphStoreConfig(backend="neo4j", batch_size=50))
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

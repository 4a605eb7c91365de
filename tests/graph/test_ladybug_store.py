import pytest

from grasp_core.errors import GraphStoreError
from grasp_core.graph import ladybug_store
from grasp_core.graph.config import GraphStoreConfig
from grasp_core.graph.open import open_graph_store
from grasp_core.graph.store import quote, table_names
from grasp_core.io import is_complete
from grasp_core.skb.schema import Relation, Schema
from grasp_core.sources.synth import build_synth_skb
from tests.plan.oracle import random_skb


def test_table_names_are_safe_injective_and_deterministic():
    schema = Schema(
        "s",
        {"gene/protein": (), "gene protein": (), "effect/phenotype": ()},
        (
            Relation("off-label use", "gene/protein", "gene protein"),
            Relation("off_label use", "gene/protein", "effect/phenotype"),
        ),
    )
    names = table_names(schema)
    assert names.node == {
        "gene/protein": "N_gene_protein",
        "gene protein": "N_gene_protein_1",
        "effect/phenotype": "N_effect_phenotype",
    }
    assert names.rel == {"off-label use": "R_off_label_use", "off_label use": "R_off_label_use_1"}
    assert table_names(schema) == names
    with pytest.raises(ValueError):
        quote("a`) DETACH DELETE n //")


def test_load_counts_and_reopen_read_only(tmp_path):
    skb = build_synth_skb("prime", "tiny", seed=0)
    path = tmp_path / "store"
    store = open_graph_store(GraphStoreConfig(), path)
    store.load(skb)
    want = {
        "nodes": {t: skb.node_type_counts().get(t, 0) for t in skb.schema.node_types},
        "edges": {r: skb.edge_counts().get(r, 0) for r in skb.schema.relation_names},
    }
    assert store.counts() == want and sum(want["edges"].values()) == len(skb.edges) > 0
    # every edge is there, undirected, with its relation: compare neighbour sets of a few nodes
    for node in skb.edges["src"].unique()[:5]:
        t = skb.nodes.at[node, "type"]
        got = sorted(
            store.run(
                f"MATCH (a:{quote(table_names(skb.schema).node[t])})-[]-(b) WHERE a.id = $i RETURN b.id",
                {"i": int(node)},
            )
        )
        e = skb.edges
        want_n = sorted(
            [(int(d),) for d in e.loc[e["src"] == node, "dst"]] + [(int(s),) for s in e.loc[e["dst"] == node, "src"]]
        )
        assert got == want_n
    store.close()
    assert is_complete(path)
    reader = open_graph_store(GraphStoreConfig(read_only=True), path)
    assert reader.counts() == want
    with pytest.raises(GraphStoreError, match="read-only"):
        reader.load(skb)
    with pytest.raises(GraphStoreError):
        reader.run("CREATE (n:`N_drug` {id: -1, name: 'x'})")
    reader.close()


def test_a_failed_load_leaves_the_previous_store_intact(tmp_path, monkeypatch):
    path = tmp_path / "store"
    store = open_graph_store(GraphStoreConfig(), path)
    store.load(random_skb(seed=0))
    before = store.counts()

    def crash(*args):
        raise RuntimeError("disk full")

    monkeypatch.setattr(ladybug_store, "_bulk_load", crash)
    with pytest.raises(RuntimeError):
        store.load(random_skb(seed=1, nodes_per_type=3))
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["store"]
    assert open_graph_store(GraphStoreConfig(read_only=True), path).counts() == before


def test_empty_store_and_bad_queries_raise_clear_errors(tmp_path):
    store = open_graph_store(GraphStoreConfig(), tmp_path / "none")
    with pytest.raises(GraphStoreError, match="load an SKB first"):
        store.run("MATCH (n) RETURN n")
    store.load(random_skb())
    with pytest.raises(GraphStoreError, match="query failed"):
        store.run("MATCH (n:NoSuchTable) RETURN n")
    with pytest.raises(ValueError, match="backend"):
        open_graph_store(GraphStoreConfig(backend="sqlite"), tmp_path / "x")


def test_many_distinct_queries_do_not_fill_a_small_buffer_pool(tmp_path):
    """LadybugDB's execute(text, params) keeps every distinct statement with its operators' state; through it a
    30 MiB pool was full after 8 queries like these (one text per plan at serving time). run() must not."""
    skb = random_skb()
    store = open_graph_store(GraphStoreConfig(buffer_pool_gib=0.03), tmp_path / "store")
    store.load(skb)
    drugs = [30, 31, 32]
    e = skb.edges
    neighbours = set(e.loc[e["src"].isin(drugs), "dst"]) | set(e.loc[e["dst"].isin(drugs), "src"])
    for i in range(60):
        rows = store.run(
            f"MATCH (a:`N_drug`)-[]-(b) WHERE a.id IN $ids WITH DISTINCT b ORDER BY b.id LIMIT {i + 1} RETURN b.id",
            {"ids": drugs},
        )
        assert [r[0] for r in rows] == sorted(neighbours)[: i + 1]
    store.close()

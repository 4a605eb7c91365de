import numpy as np

from grasp_core.text.dense import DenseRetriever


def test_finds_the_node_whose_document_matches(skb, node_index, encoder):
    targets = [skb.nodes.index[skb.nodes["name"] == name][0] for name in ("Item 012", "Item 047", "Zentro")]
    queries = [skb.document(t) for t in targets]
    rankings = DenseRetriever(node_index, encoder).rank(queries, k=5)
    assert [int(r.node_ids[0]) for r in rankings] == targets
    for r in rankings:
        assert len(r) == 5 and np.all(np.diff(r.scores) <= 0)
        assert r.scores[0] > 0.99  # the query is the document: cosine 1 up to float16 storage


def test_searches_every_node_type_and_caps_k(skb, node_index, encoder):
    retriever = DenseRetriever(node_index, encoder)
    everything = retriever.rank(["red"], k=skb.num_nodes + 10)[0]
    assert len(everything) == skb.num_nodes
    assert set(skb.nodes["type"].iloc[everything.node_ids[:3]]) & {"color"}
    assert retriever.rank([], k=5) == []

"""Synthetic SKBs: exact STaRK schemas, heavy-tailed degrees, domain text, determinism, round trip."""

from __future__ import annotations

import re

import numpy as np
import pytest

from grasp_core.errors import GraspError
from grasp_core.skb.format import read_skb, validate, write_skb
from grasp_core.sources.synth import build_synth_skb
from grasp_core.sources.synth_specs import SPECS, resolve_scale

PRIME_RELATIONS = {
    "ppi",
    "carrier",
    "enzyme",
    "target",
    "transporter",
    "contraindication",
    "indication",
    "off-label use",
    "synergistic interaction",
    "associated with",
    "parent-child",
    "phenotype absent",
    "phenotype present",
    "side effect",
    "interacts with",
    "linked to",
    "expression present",
    "expression absent",
}


@pytest.fixture(scope="module", params=["amazon", "mag", "prime"])
def tiny(request):
    return build_synth_skb(request.param, "tiny", seed=0)


def test_schemas_are_starks():
    prime = SPECS["prime"].schema
    assert prime.name == "synth-prime"
    assert set(prime.node_types) == {
        "disease",
        "gene/protein",
        "molecular_function",
        "drug",
        "pathway",
        "anatomy",
        "effect/phenotype",
        "biological_process",
        "cellular_component",
        "exposure",
    }
    assert set(prime.relation_names) == PRIME_RELATIONS
    assert prime.connects("expression present", "gene/protein", "anatomy")
    assert prime.connects("target", "drug", "gene/protein") and not prime.connects("target", "drug", "disease")
    assert prime.neighbour_types("parent-child", "pathway") == ["pathway"]
    assert prime.neighbour_types("interacts with", "exposure") == [
        "biological_process",
        "cellular_component",
        "gene/protein",
        "molecular_function",
    ]
    amazon = SPECS["amazon"].schema
    assert set(amazon.node_types) == {"product", "brand", "category", "color"}
    assert set(amazon.relation_names) == {"also_buy", "also_view", "has_brand", "has_category", "has_color"}
    mag = SPECS["mag"].schema
    assert set(mag.relation_names) == {
        "author___writes___paper",
        "paper___cites___paper",
        "paper___has_topic___field_of_study",
        "author___affiliated_with___institution",
    }
    assert mag.node_types["paper"][0] == "abstract"
    assert sum(SPECS["prime"].full_nodes.values()) == 129_375
    assert sum(r.full_edges for r in SPECS["prime"].relations) == 8_100_498
    assert sum(SPECS["mag"].full_nodes.values()) == 1_872_968
    assert sum(SPECS["amazon"].full_nodes.values()) == 1_035_542


def test_tiny_is_a_valid_few_hundred_node_graph(tiny):
    validate(tiny)
    assert 250 <= tiny.num_nodes <= 600
    assert set(tiny.nodes["type"]) == set(tiny.schema.node_types)
    assert set(tiny.edges["rel"]) == set(tiny.schema.relation_names)  # every relation is populated
    src, dst = tiny.edges["src"].to_numpy(), tiny.edges["dst"].to_numpy()
    assert (src != dst).all()
    pairs = set(zip(np.minimum(src, dst), np.maximum(src, dst), tiny.edges["rel"]))
    assert len(pairs) == len(tiny.edges)  # no duplicate edge, in either direction
    assert tiny.nodes["name"].str.len().min() > 0
    assert len(tiny.queries) == 0


def test_deterministic_given_seed():
    a, b, c = (build_synth_skb("prime", "tiny", seed=s) for s in (3, 3, 4))
    assert a.nodes.equals(b.nodes) and a.edges.equals(b.edges)
    assert not a.edges.equals(c.edges)
    assert not a.nodes["name"].equals(c.nodes["name"])


def test_small_prime_has_heavy_tailed_degrees_and_real_proportions():
    skb = build_synth_skb("prime", "small", seed=0)
    assert 5_000 <= skb.num_nodes <= 10_000
    deg = skb.degrees
    assert deg.max() > 15 * deg.mean()
    top = np.sort(deg)[::-1][: len(deg) // 100]
    assert top.sum() > 0.08 * deg.sum()  # the top 1% of nodes hold a large share of edge endpoints
    counts = skb.edge_counts()
    assert counts["expression present"] > counts["ppi"] > counts["target"] > counts["carrier"]
    assert (deg == 0).mean() < 0.05


def test_text_looks_like_the_domain_and_shares_vocabulary():
    prime = build_synth_skb("prime", "small", seed=0)
    docs = " ".join(prime.documents()).lower()
    for word in ("kidney", "renal", "syndrome", "inhibits", "expressed", "pathway"):
        assert word in docs
    drugs = prime.ids_of_type("drug")
    assert all(prime.text_fields_of(int(i)).keys() >= {"description", "indication"} for i in drugs[:20])
    vocab: dict[str, int] = {}
    for d in prime.documents():
        for t in set(re.findall(r"[a-z0-9]+", d.lower())):
            vocab[t] = vocab.get(t, 0) + 1
    assert len(vocab) > 1000
    counts = np.array(list(vocab.values()))
    assert counts[counts >= 10].sum() > 0.8 * counts.sum()  # most words recur across many nodes (not trivial)
    assert prime.nodes.groupby("type")["name"].nunique().sum() == prime.num_nodes  # names unique per type


def test_amazon_and_mag_fields_agree_with_the_graph():
    amazon = build_synth_skb("amazon", "tiny", seed=1)
    e = amazon.edges[amazon.edges["rel"] == "has_brand"]
    assert e["src"].is_unique  # a product has one brand
    for src, dst in zip(e["src"].head(30), e["dst"].head(30)):
        brand = amazon.nodes["name"].iat[dst]
        assert amazon.nodes["brand"].iat[src] == brand and amazon.nodes["name"].iat[src].startswith(brand)
    assert "reviews" in amazon.text_fields_of(int(amazon.ids_of_type("product")[0]))
    mag = build_synth_skb("mag", "tiny", seed=1)
    writes = mag.edges[mag.edges["rel"] == "author___writes___paper"]
    per_author = writes["src"].value_counts()
    for author in mag.ids_of_type("author")[:30]:
        assert int(mag.nodes["paper_count"].iat[author]) == per_author.get(author, 0)
    paper = mag.text_fields_of(int(mag.ids_of_type("paper")[0]))
    assert len(paper["abstract"].split()) > 20 and re.fullmatch(r"\d{4}-\d\d-01", paper["publication_date"])


def test_write_read_round_trip(tmp_path, tiny):
    back = read_skb(write_skb(tiny, tmp_path / "skb"))
    assert back.schema == tiny.schema
    assert back.nodes["name"].tolist() == tiny.nodes["name"].tolist()
    assert back.edges[["src", "dst"]].to_numpy().tolist() == tiny.edges[["src", "dst"]].to_numpy().tolist()


def test_scales_and_bad_input():
    assert resolve_scale("prime", "full") == 1.0
    assert resolve_scale("prime", 0.01) == 0.01
    assert resolve_scale("mag", "0.5") == 0.5
    n = build_synth_skb("amazon", 0.0005, seed=0).num_nodes
    assert n > build_synth_skb("amazon", "tiny", seed=0).num_nodes
    with pytest.raises(GraspError, match="unknown synthetic SKB kind"):
        build_synth_skb("wikidata")
    with pytest.raises(GraspError, match="unknown scale"):
        build_synth_skb("prime", "huge")
    with pytest.raises(GraspError, match="fraction"):
        build_synth_skb("prime", 2.0)

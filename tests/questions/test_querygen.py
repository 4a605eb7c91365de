"""STaRK-protocol query synthesis: gold answers checked by an independent scipy.sparse traversal."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from grasp_core.errors import GraspError
from grasp_core.questions.config import QueryGenConfig
from grasp_core.questions.properties import STOPWORDS, is_meaningful, noun_phrases
from grasp_core.questions.querygen import TEMPLATES, grounded_queries, synthesize_queries, templates_for, with_queries
from grasp_core.skb.format import read_skb, validate, write_skb
from grasp_core.sources.synth import build_synth_skb


def _adjacency(skb, rel: str) -> sp.csr_matrix:
    """A template hop's adjacency: ``rel`` undirected, ``rel|down`` stored src -> dst, ``rel|up`` dst -> src."""
    n = skb.num_nodes
    name, _, way = rel.partition("|")
    e = skb.edges[skb.edges["rel"] == name]
    a = sp.coo_matrix((np.ones(len(e)), (e["src"], e["dst"])), shape=(n, n)).tocsr()
    return {"": a + a.T, "down": a, "up": a.T}[way]


def _has_phrase(text: str, phrase: str) -> bool:
    """The phrase's tokens occur contiguously inside one clause of ``text``."""
    needle = re.findall(r"[a-z0-9]+", phrase.lower())
    for clause in re.split(r"[.;:,|!?\n()\[\]]+", text):
        toks = re.findall(r"[a-z0-9]+", clause.lower())
        if any(toks[i : i + len(needle)] == needle for i in range(len(toks) - len(needle) + 1)):
            return True
    return False


def _expected_answers(skb, template: str, anchors: list[int], prop) -> set[int]:
    """Reference: walk each path from its anchor with sparse mat-vec products, intersect, filter by property."""
    types = skb.nodes["type"].to_numpy()
    reached = None
    for path_text, anchor in zip(template.split(" & "), anchors):
        path = path_text.split(">")
        assert types[anchor] == path[0]
        x = np.zeros(skb.num_nodes)
        x[anchor] = 1
        for i in range(1, len(path), 2):
            x = ((_adjacency(skb, path[i]).T @ x > 0) & (types == path[i + 1])).astype(float)
        hit = set(np.flatnonzero(x).tolist())
        reached = hit if reached is None else reached & hit
    reached -= set(anchors)
    if prop is None:
        return reached
    field = skb.nodes[prop.field].to_numpy(dtype=object)
    return {n for n in reached if isinstance(field[n], str) and _has_phrase(field[n], prop.phrase)}


def _bad_property(phrase: str) -> bool:
    """A number anywhere, or nothing but stopwords."""
    toks = re.findall(r"[a-z0-9]+", phrase.lower())
    return not toks or any(re.search(r"\d", t) for t in toks) or all(t in STOPWORDS for t in toks)


@pytest.fixture(scope="module", params=["amazon", "mag", "prime"])
def synth(request):
    return build_synth_skb(request.param, "tiny", seed=0)


def test_gold_is_exactly_relation_and_property(synth):
    queries = grounded_queries(synth, 120, seed=0)
    assert len({q.template for q in queries}) >= min(5, len(templates_for(synth)))
    for q in queries:
        assert 1 <= len(q.answer_ids) <= 20
        assert set(q.answer_ids) == _expected_answers(synth, q.template, q.anchors, q.property), q.text
    with_prop = [q for q in queries if q.property is not None]
    assert len(with_prop) > 0.5 * len(queries)
    assert not [q.property for q in with_prop if _bad_property(q.property.phrase)]


def test_dataframe_splits_wording_and_validation(synth, tmp_path):
    df = synthesize_queries(synth, 150, seed=2, split_fractions=(0.6, 0.2, 0.2))
    assert list(df.columns) == ["qid", "split", "query", "answer_ids", "template"]
    assert df["split"].value_counts().to_dict() == {"train": 90, "val": 30, "test": 30}
    assert df["qid"].is_unique and df["query"].is_unique  # splits are disjoint by query
    by_split = [set(df[df["split"] == s]["query"]) for s in ("train", "val", "test")]
    assert not (by_split[0] & by_split[1]) and not (by_split[0] & by_split[2]) and not (by_split[1] & by_split[2])
    for text, tpl in zip(df["query"], df["template"]):
        assert tpl not in text and ">" not in text
        assert all(p not in text for p in tpl.split(" & "))
    openings = df["query"].str.split().str[:2].str.join(" ")
    assert openings.nunique() >= 12  # frames, word orders and distractor prefixes vary
    skb = with_queries(synth, df)
    validate(skb)
    back = read_skb(write_skb(skb, tmp_path / "skb"))
    assert back.queries["answer_ids"].map(list).tolist() == df["answer_ids"].tolist()


def test_each_template_has_several_surface_forms():
    skb = build_synth_skb("prime", "small", seed=0)
    df = synthesize_queries(skb, 400, seed=0)
    tpl = df["template"].value_counts().index[0]
    texts = df[df["template"] == tpl]["query"]
    frames = {
        re.sub(
            r"^(I'm a clinician looking into a case\.|For a pharmacology review:|Working on a drug "
            r"repurposing project\.|A colleague in the lab asked me this\.) ",
            "",
            t,
        ).split()[0]
        for t in texts
    }
    assert len(frames) >= 4
    assert df["template"].nunique() >= 20


def test_deterministic_given_seed(synth):
    a = synthesize_queries(synth, 60, seed=5)
    b = synthesize_queries(synth, 60, seed=5)
    c = synthesize_queries(synth, 60, seed=6)
    pd.testing.assert_frame_equal(a, b)
    assert a["query"].tolist() != c["query"].tolist()


def test_templates_fit_their_schemas():
    for kind in ("amazon", "mag", "prime"):
        skb = build_synth_skb(kind, "tiny", seed=0)
        assert len(templates_for(skb)) == len(TEMPLATES[kind])
    assert len(TEMPLATES["prime"]) >= 28
    assert any(len(t.paths) == 2 for t in TEMPLATES["mag"])


def test_bad_input_is_a_grasp_error(synth):
    with pytest.raises(GraspError, match="split_fractions"):
        synthesize_queries(synth, 10, split_fractions=(0.5, 0.2, 0.2))
    with pytest.raises(GraspError, match="found only"):
        synthesize_queries(synth, 5_000, cfg=QueryGenConfig(max_attempts_per_query=1))
    from grasp_core.skb.schema import Schema
    from grasp_core.sources.synth_specs import SPECS

    other = with_queries(synth, synth.queries)
    other.schema = Schema("wikidata", synth.schema.node_types, synth.schema.relations)
    with pytest.raises(GraspError, match="no query templates"):
        synthesize_queries(other, 5)
    assert SPECS  # the synth module is importable alongside


@pytest.fixture(scope="module")
def hpo():
    from grasp_core.sources.hpo import build_hpo_skb, hpo_aliases

    skb = build_hpo_skb()
    return skb, hpo_aliases(skb)


@pytest.fixture(scope="module")
def hpo_queries(hpo):
    """The whole generated hpo set (3,000 queries, as `grasp data build hpo` makes it)."""
    skb, aliases = hpo
    return grounded_queries(skb, 3000, seed=0, aliases=aliases)


def test_hpo_gold_is_exactly_relation_and_property(hpo, hpo_queries):
    skb, _ = hpo
    by_template: dict[str, list] = {}
    for q in hpo_queries:
        by_template.setdefault(q.template, []).append(q)
    assert set(by_template) == {t.id for t in TEMPLATES["hpo"]}  # every template grounds
    for qs in by_template.values():
        for q in qs[:4]:
            assert 1 <= len(q.answer_ids) <= 20
            assert set(q.answer_ids) == _expected_answers(skb, q.template, q.anchors, q.property), q.text


def test_hpo_hierarchy_hops_are_directed(hpo, hpo_queries):
    skb, _ = hpo
    e = skb.edges[skb.edges["rel"] == "parent-child"]
    children = e.groupby("src")["dst"].apply(set)
    for q in hpo_queries:
        if q.template == "phenotype>parent-child|down>phenotype" and q.property is None:
            assert set(q.answer_ids) == children[q.anchors[0]], q.text  # all children, no parent
        if q.template == "phenotype>parent-child|up>phenotype":
            assert all(q.anchors[0] in children[a] for a in q.answer_ids), q.text


def test_hpo_target_mix_and_properties(hpo, hpo_queries):
    skb, _ = hpo
    df = with_queries(skb, synthesize_queries(skb, 300, seed=0)).query_target_types()
    assert set(df) == {"gene", "disease", "phenotype"}
    types = skb.nodes["type"].to_numpy()
    mix = pd.Series([types[q.answer_ids[0]] for q in hpo_queries]).value_counts(normalize=True)
    assert set(mix.index) == {"gene", "disease", "phenotype"} and mix.min() >= 0.2, mix
    props = [q.property for q in hpo_queries if q.property is not None]
    assert len(props) > 0.3 * len(hpo_queries)
    bad = [p for p in props if _bad_property(p.phrase)]
    assert not bad, bad[:5]  # never a number or a lone stopword, over the whole set
    fields = {p.field for p in props}
    assert {"name", "definition", "synonyms", "inheritance", "clinical_course"} <= fields


def test_hpo_wording_uses_synonyms_and_registers(hpo, hpo_queries):
    skb, aliases = hpo
    texts = [q.text for q in hpo_queries]
    lay = {t.lower() for pairs in aliases.values() for t, kind in pairs if kind == "layperson" and len(t) > 10}
    assert sum(any(s in t.lower() for s in lay) for t in texts[:600]) >= 20  # anchors named by lay synonyms
    terse = [t for t in texts if t[0].islower() and not t.endswith(("?", "."))]
    assert 0.15 < len(terse) / len(texts) < 0.4  # search-box queries ("genes behind ...")
    assert any(t.startswith("My ") or t.startswith("Our ") for t in texts)  # a patient's family asking
    assert any("HPO" in t for t in texts)  # a researcher asking
    gene_questions = [q.text for q in hpo_queries if q.template == "disease>associated with>gene"]
    assert all("gene" in t.lower() for t in gene_questions)
    assert len(set(texts)) == len(texts)


def test_hpo_is_deterministic_given_seed(hpo):
    skb, aliases = hpo
    a = synthesize_queries(skb, 200, seed=3, aliases=aliases)
    pd.testing.assert_frame_equal(a, synthesize_queries(skb, 200, seed=3, aliases=aliases))
    assert a["split"].value_counts().to_dict() == {"train": 120, "val": 40, "test": 40}


def test_every_hpo_template_has_patterns_in_every_register():
    from grasp_core.questions import hpo_questions as HQ

    assert set(HQ.PATTERNS) == {t.id for t in TEMPLATES["hpo"]}
    for tpl in TEMPLATES["hpo"]:
        for register in HQ.REGISTERS:
            patterns = HQ.PATTERNS[tpl.id][register]
            assert patterns, (tpl.id, register)
            for p in patterns:
                assert "{a}" in p and ("{b}" in p) == (len(tpl.paths) == 2), p
                assert ("{P}" in p) == (tpl.target != "gene"), p  # genes have no property


def test_properties_are_phrases():
    assert noun_phrases("A seizure is an intermittent abnormality of nervous system physiology, 4 mm wide.") == [
        "seizure",
        "intermittent abnormality",
        "nervous system physiology",
    ]
    for phrase in ("4", "of the", "mm 4", "involving", "characterized", "abnormality", "in 2 cases"):
        assert not is_meaningful(phrase), phrase
    for phrase in ("Autosomal recessive inheritance", "Infantile onset", "muscular dystrophy", "thrombosis"):
        assert is_meaningful(phrase), phrase

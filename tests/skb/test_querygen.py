"""STaRK-protocol query synthesis: gold answers checked by an independent scipy.sparse traversal."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from grasp_core.errors import GraspError
from grasp_core.skb.format import read_skb, validate, write_skb
from grasp_core.skb.querygen import (
    STOPWORDS,
    TEMPLATES,
    QueryGenConfig,
    grounded_queries,
    synthesize_queries,
    templates_for,
    with_queries,
)
from grasp_core.skb.synth import build_synth_skb


def _expected_answers(skb, template: str, anchors: list[int], phrase: str | None) -> set[int]:
    """Reference: walk each path from its anchor with sparse mat-vec products, intersect, filter by property."""
    n = skb.num_nodes
    types = skb.nodes["type"].to_numpy()
    reached = None
    for path_text, anchor in zip(template.split(" & "), anchors):
        path = path_text.split(">")
        assert types[anchor] == path[0]
        x = np.zeros(n)
        x[anchor] = 1
        for i in range(1, len(path), 2):
            e = skb.edges[skb.edges["rel"] == path[i]]
            a = sp.coo_matrix((np.ones(len(e)), (e["src"], e["dst"])), shape=(n, n)).tocsr()
            x = ((a + a.T) @ x > 0) & (types == path[i + 1])
            x = x.astype(float)
        hit = set(np.flatnonzero(x).tolist())
        reached = hit if reached is None else reached & hit
    reached -= set(anchors)
    if phrase is None:
        return reached
    terms = {t for t in re.findall(r"[a-z0-9]+", phrase.lower()) if t not in STOPWORDS}
    out = set()
    for node in reached:
        text = " ".join([skb.nodes["name"].iat[node], *skb.text_fields_of(node).values()]).lower()
        if terms <= set(re.findall(r"[a-z0-9]+", text)):
            out.add(node)
    return out


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
    from grasp_core.skb.synth import SPECS

    other = with_queries(synth, synth.queries)
    other.schema = Schema("wikidata", synth.schema.node_types, synth.schema.relations)
    with pytest.raises(GraspError, match="no query templates"):
        synthesize_queries(other, 5)
    assert SPECS  # the synth module is importable alongside


@pytest.fixture(scope="module")
def hpo():
    from grasp_core.skb.hpo import build_hpo_skb

    return build_hpo_skb()


def test_hpo_queries(hpo):
    queries = grounded_queries(hpo, 150, seed=0)
    assert len({q.template for q in queries}) >= 7
    for q in queries[:60]:
        assert set(q.answer_ids) == _expected_answers(hpo, q.template, q.anchors, q.property), q.text
    df = synthesize_queries(hpo, 300, seed=0)
    validate(with_queries(hpo, df))
    synonyms = {s.strip().lower() for v in hpo.nodes["synonyms"].dropna() for s in re.split(r"[;|]", v)}
    assert any(s in t.lower() for t in df["query"] for s in synonyms if len(s) > 12)  # anchors named by synonym

import numpy as np
import pytest

from grasp_core.entities.config import LinkingConfig
from grasp_core.entities.linking import Mention, link_many, link_mentions
from tests.entities.conftest import CountingEncoder, ids


def test_two_names_link_to_exactly_those_nodes(skb, index, encoder):
    table = link_mentions(
        [Mention("Marfan syndrome", ("disease",), "anchor"), Mention("FBN1", ("gene/protein",), "anchor")],
        skb,
        index,
        encoder,
    )
    assert [r.ref for r in table.rows] == ["E1", "E2"]
    marfan, fbn1 = ids(skb, "Marfan syndrome", "FBN1")
    for row, node, node_type in ((table.rows[0], marfan, "disease"), (table.rows[1], fbn1, "gene/protein")):
        assert row.role == "anchor" and row.types == (node_type,)
        top = row.links[node_type][0]
        assert top.node_id == node and top.score == pytest.approx(1.0, abs=1e-3)
        assert top.degree == int(skb.degrees[node]) == 3
        assert len(row.links[node_type]) == 3  # three nodes of the type exist
        scores = [link.score for link in row.links[node_type]]
        assert scores == sorted(scores, reverse=True)


def test_near_exact_match_in_another_type_adds_that_type(skb, index, encoder):
    # the extractor mislabelled a phenotype as a disease: the phenotype's exact name (cos 1 >= 0.99) is added
    row = link_mentions([Mention("Aortic root aneurysm", ("disease",), "anchor")], skb, index, encoder).rows[0]
    assert row.types == ("disease", "effect/phenotype")
    assert row.links["effect/phenotype"][0].node_id == ids(skb, "Aortic root aneurysm")[0]
    assert row.links["disease"][0].score < 0.9


def _best(index, encoder, text, node_type):
    return float(index.search(node_type, "name", encoder.encode([text], 64), 1)[0][0, 0])


def test_extra_type_rule_follows_the_margin(skb, index, encoder):
    """Recompute the rule from raw cosines: the best other type is added iff it beats the predicted best by 0.02."""
    text = "aortic root aneurysms in tall people"
    best = {t: _best(index, encoder, text, t) for t in skb.schema.node_types}
    other = max((t for t in best if t != "drug"), key=best.get)
    assert best[other] < 0.99 and best[other] >= best["drug"] + 0.02  # the case exercises the margin branch
    row = link_mentions([Mention(text, ("drug",), "anchor")], skb, index, encoder).rows[0]
    assert row.types == ("drug", other)
    # with the predicted type being that best type, nothing is added (no other type is within reach)
    row = link_mentions([Mention(text, (other,), "anchor")], skb, index, encoder).rows[0]
    runner_up = max(v for t, v in best.items() if t != other)
    assert runner_up < best[other] + 0.02 and runner_up < 0.99
    assert row.types == (other,)
    # a huge margin switches the rule off for non-exact matches
    strict = LinkingConfig(extra_type_margin=1.0)
    assert link_mentions([Mention(text, ("drug",), "anchor")], skb, index, encoder, strict).rows[0].types == ("drug",)


def test_unknown_predicted_type_is_dropped_and_best_type_added(skb, index, encoder):
    row = link_mentions([Mention("metformin", ("medication",), "target")], skb, index, encoder).rows[0]
    assert row.types == ("drug",) and row.role == "target"
    assert row.links["drug"][0].node_id == ids(skb, "metformin")[0]


def test_attribute_rows_have_no_links_and_nesting_is_kept(skb, index, encoder):
    table = link_mentions(
        [
            Mention("Aortic root aneurysm", ("effect/phenotype",), "anchor"),
            Mention("aortic root", ("anatomy",), "anchor", parent=0),
            Mention("under $50", (), "attribute"),
        ],
        skb,
        index,
        encoder,
    )
    assert table.rows[1].parent == 0 and table.rows[1].links["anatomy"][0].node_id == ids(skb, "aortic root")[0]
    assert table.rows[2].links == {} and table.rows[2].types == ()


def test_batched_linking_equals_one_query_at_a_time(skb, index, encoder):
    batch = [
        [Mention("RHO", ("gene/protein",), "anchor"), Mention("retina", ("anatomy",), "anchor")],
        [],
        [Mention("night blindness", ("effect/phenotype",), "anchor"), Mention("at least 3", (), "attribute")],
    ]
    counting = CountingEncoder(encoder)
    calls = counting.calls

    tables = link_many(batch, skb, index, counting)
    assert calls == [["RHO", "retina", "night blindness"]]  # one encoder call, attributes not embedded
    for mentions, table in zip(batch, tables):
        single = link_mentions(mentions, skb, index, encoder)
        assert table.to_json() == single.to_json()
    assert tables[1].rows == ()


def test_render_lists_rows_and_links(skb, index, encoder):
    table = link_mentions(
        [
            Mention("Tall stature", ("effect/phenotype",), "anchor"),
            Mention("more than 2", (), "attribute"),
        ],
        skb,
        index,
        encoder,
        LinkingConfig(top_k=1),
    )
    assert table.render() == (
        'E1 "Tall stature" role=anchor types=effect/phenotype\n'
        "  effect/phenotype: Tall stature (sim=1.00, deg=1)\n"
        'E2 "more than 2" role=attribute types='
    )
    assert table.render(compact=True) == 'E1 "Tall stature" anchor effect/phenotype=1.00\nE2 "more than 2" attribute'
    assert np.isclose(table.rows[0].links["effect/phenotype"][0].score, 1.0, atol=1e-3)

import json

import pytest

from grasp_core.entities.table import EntityRow, EntityTable, Link
from grasp_core.errors import PlanError
from grasp_core.plan.parse import parse_plan
from grasp_core.plan.validate import validate_plan
from tests.plan.oracle import PRIME_LIKE

GOOD = {
    "target": {"type": "drug"},
    "anchors": [{"var": "a1", "type": "anatomy", "text": "retina", "match_mode": "name"}],
    "hops": [
        {"from": "a1", "rel": "expression present", "to": "x1", "to_type": "gene/protein"},
        {"from": "x1", "rel": "target", "to": "target"},
    ],
    "relevance_text": "eye drops",
}
TABLE = EntityTable(
    (
        EntityRow("E1", "retina", "anchor", ("anatomy",), {"anatomy": (Link(3, "retina", 1.0, 2),)}),
        EntityRow("E2", "cystic fibrosis", "anchor", ("disease", "gene/protein")),
    )
)


def test_parse_tolerates_fences_and_prose_around_the_object():
    text = json.dumps(GOOD)
    for wrapped in (
        text,
        f"```json\n{text}\n```",
        f"Here is the plan:\n{text}\nHope this helps {{!}}",
        f"Sure.\n```\n{text}```\ntrailing",
    ):
        plan = parse_plan(wrapped)
        assert plan.to_json() == GOOD
    assert parse_plan('{"target": {"type": "drug"}, "relevance_text": null}').relevance_text == ""


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "json"),
        ("no plan here", "json"),
        ('{"target": {"type": "drug"},}', "json"),  # trailing comma: strict JSON only
        ("{'target': {'type': 'drug'}}", "json"),
        ('{"anchors": []}', "schema"),
        ('{"target": {"type": "drug"}, "extra": 1}', "schema"),
        ('{"target": {"type": "drug"}, "anchors": [{"var": "a", "type": "drug"}]}', "schema"),
        ('{"target": {"type": "drug"}, "anchors": [{"var": "a", "type": "drug", "text": "x", "ref": "E1"}]}', "schema"),
        ('{"target": {"type": "drug"}, "anchors": [{"var": "a", "text": "x"}]}', "schema"),
        ('{"target": {"type": "drug"}, "anchors": [{"var": "target", "type": "drug", "text": "x"}]}', "schema"),
        (
            '{"target": {"type": "drug"}, "anchors": [{"var": "a", "type": "drug", "text": "x", "match_mode": "fuzzy"}]}',
            "schema",
        ),
    ],
)
def test_parse_rejects_with_a_reason(text, reason):
    with pytest.raises(PlanError) as err:
        parse_plan(text)
    assert err.value.reason == reason


def test_validate_resolves_types_and_refs():
    plan = validate_plan(parse_plan(json.dumps(GOOD)), PRIME_LIKE)
    assert [h.to_type for h in plan.hops] == ["gene/protein", "drug"]
    inferred = dict(
        GOOD,
        hops=[{"from": "a1", "rel": "expression present", "to": "x1"}, {"from": "x1", "rel": "target", "to": "target"}],
    )
    assert validate_plan(parse_plan(json.dumps(inferred)), PRIME_LIKE) == plan
    ref = dict(GOOD, anchors=[{"var": "a1", "ref": "E1", "match_mode": "name"}])
    resolved = validate_plan(parse_plan(json.dumps(ref)), PRIME_LIKE, TABLE)
    assert resolved.anchors[0].type == "anatomy" and resolved.anchors[0].ref == "E1"
    assert validate_plan(resolved, PRIME_LIKE) == resolved  # a resolved plan re-validates without its table
    # a ref anchor's own type wins over its row's first type
    ref2 = {
        "target": {"type": "drug"},
        "anchors": [{"var": "a", "ref": "E2", "type": "gene/protein"}],
        "hops": [{"from": "a", "rel": "target", "to": "target"}],
    }
    assert validate_plan(parse_plan(json.dumps(ref2)), PRIME_LIKE, TABLE).anchors[0].type == "gene/protein"
    # two anchors meeting at an intermediate variable
    merge = dict(
        GOOD,
        anchors=GOOD["anchors"] + [{"var": "a2", "type": "gene/protein", "text": "CFTR"}],
        hops=GOOD["hops"] + [{"from": "a2", "rel": "ppi", "to": "x1"}],
    )
    assert len(validate_plan(parse_plan(json.dumps(merge)), PRIME_LIKE).hops) == 3


def hops(*triples):
    return [{"from": f, "rel": r, "to": t} for f, r, t in triples]


INVALID = [
    ({"anchors": [{"var": "a1", "ref": "E9"}]}, "unknown_ref"),
    ({"target": {"type": "medicine"}}, "unknown_type"),
    ({"anchors": [{"var": "a1", "type": "organ", "text": "eye"}]}, "unknown_type"),
    (
        {
            "hops": [
                {"from": "a1", "rel": "expression present", "to": "x1", "to_type": "protein"},
                {"from": "x1", "rel": "target", "to": "target"},
            ]
        },
        "unknown_type",
    ),
    ({"hops": hops(("a1", "expressed in", "x1"), ("x1", "target", "target"))}, "unknown_relation"),
    ({"anchors": GOOD["anchors"] * 2}, "duplicate_variable"),
    ({"hops": GOOD["hops"] + hops(("x1", "ppi", "a1"))}, "duplicate_variable"),
    ({"hops": hops(("a1", "expression present", "x1"), ("x2", "target", "target"))}, "dangling_variable"),
    ({"hops": hops(("a1", "expression present", "x1"))}, "dangling_variable"),
    ({"hops": GOOD["hops"] + hops(("target", "indication", "x2"))}, "cycle"),
    ({"hops": hops(("a1", "expression present", "x1"), ("x1", "ppi", "x2"), ("x2", "ppi", "x1"))}, "cycle"),
    ({"hops": GOOD["hops"] + hops(("x1", "ppi", "x3"), ("x3", "target", "target"))}, "cycle"),
    ({"hops": hops(("x1", "ppi", "x1"), ("a1", "expression present", "target"))}, "cycle"),
    ({"hops": []}, "anchor_unreachable"),
    ({"anchors": GOOD["anchors"] + [{"var": "a2", "type": "disease", "text": "flu"}]}, "anchor_unreachable"),
    ({"hops": hops(("a1", "target", "x1"), ("x1", "target", "target"))}, "bad_hop_types"),
    (
        {
            "hops": [
                {"from": "a1", "rel": "expression present", "to": "x1", "to_type": "disease"},
                {"from": "x1", "rel": "target", "to": "target"},
            ]
        },
        "bad_hop_types",
    ),
    (
        {
            "target": {"type": "disease"},
            "anchors": [{"var": "a1", "type": "drug", "text": "aspirin"}],
            "hops": hops(
                ("a1", "target", "x1"),
                ("x1", "associated with", "x2"),
                ("x2", "associated with", "x3"),
                ("x3", "associated with", "target"),
            ),
        },
        "ambiguous_type",
    ),
    (
        {"hops": [{**GOOD["hops"][0], "dir": "out"}, GOOD["hops"][1]]},  # anatomy -> gene/protein: types fix it
        "bad_direction",
    ),
]


@pytest.mark.parametrize("change, reason", INVALID, ids=[f"{r}-{i}" for i, (_, r) in enumerate(INVALID)])
def test_validate_rejects_with_a_reason(change, reason):
    with pytest.raises(PlanError) as err:
        validate_plan(parse_plan(json.dumps(dict(GOOD, **change))), PRIME_LIKE, TABLE)
    assert err.value.reason == reason, err.value


def test_ref_anchor_without_type_needs_a_table():
    plan = parse_plan(json.dumps(dict(GOOD, anchors=[{"var": "a1", "ref": "E1"}])))
    with pytest.raises(PlanError, match="unknown_ref"):
        validate_plan(plan, PRIME_LIKE)


def test_a_hop_within_one_type_takes_a_direction():
    plan = {
        "target": {"type": "gene/protein"},
        "anchors": [{"var": "a1", "type": "gene/protein", "text": "TP53"}],
        "hops": [{"from": "a1", "rel": "ppi", "to": "target", "dir": "in"}],
    }
    resolved = validate_plan(parse_plan(json.dumps(plan)), PRIME_LIKE)
    assert resolved.hops[0].dir == "in"
    with pytest.raises(PlanError):  # only "out" and "in"
        parse_plan(json.dumps({**plan, "hops": [{**plan["hops"][0], "dir": "up"}]}))

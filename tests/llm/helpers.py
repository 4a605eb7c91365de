"""A small Prime-shaped schema, an entity table and plan texts shared by the LLM and prompt tests."""

from __future__ import annotations

import json

from grasp_core.entities.table import EntityRow, EntityTable, Link
from grasp_core.skb.schema import Relation, Schema

SCHEMA = Schema(
    "mini-prime",
    {"drug": ("description",), "disease": ("description",), "gene/protein": ("summary",), "anatomy": (), "pathway": ()},
    (
        Relation("indication", "drug", "disease"),
        Relation("off-label use", "drug", "disease"),
        Relation("target", "drug", "gene/protein"),
        Relation("associated with", "gene/protein", "disease"),
        Relation("expression present", "anatomy", "gene/protein"),
        Relation("expression absent", "anatomy", "gene/protein"),
        Relation("ppi", "gene/protein", "gene/protein"),
        Relation("interacts with", "gene/protein", "pathway"),
    ),
)

TABLE = EntityTable(
    (
        EntityRow("E1", "retina", "anchor", ("anatomy",), {"anatomy": (Link(3, "retina", 1.0, 12),)}),
        EntityRow(
            "E2", "BRCA1", "anchor", ("gene/protein", "disease"), {"gene/protein": (Link(7, "BRCA1", 0.99, 40),)}
        ),
        EntityRow("E3", "under $50", "attribute", ()),
        EntityRow("E4", "drug", "target", ("drug",), {}),
    )
)

QUERY = "Which drug targets a gene expressed in the retina and is used as eye drops?"

PLANS = [
    {
        "target": {"type": "drug"},
        "anchors": [{"var": "a1", "ref": "E1", "type": "anatomy", "match_mode": "name"}],
        "hops": [
            {"from": "a1", "rel": "expression present", "to": "x1", "to_type": "gene/protein"},
            {"from": "x1", "rel": "target", "to": "target"},
        ],
        "relevance_text": "eye drops",
    },
    {
        "target": {"type": "disease"},
        "anchors": [
            {"var": "a1", "ref": "E2", "type": "gene/protein", "match_mode": "name"},
            {"var": "a2", "type": "drug", "text": "a painkiller for migraine", "match_mode": "doc"},
        ],
        "hops": [
            {"from": "a1", "rel": "associated with", "to": "target"},
            {"from": "a2", "rel": "indication", "to": "target"},
        ],
        "relevance_text": "",
    },
    {"target": {"type": "pathway"}, "anchors": [], "hops": [], "relevance_text": "DNA repair"},
]


def plan_text(plan: dict) -> str:
    return json.dumps(plan, separators=(",", ":"))


def corpus() -> list[str]:
    """Texts to train the test tokenizer on: prompts and plans, repeated so that merges form."""
    from grasp_core.planner.lm.prompt import build_planner_messages

    messages = build_planner_messages(SCHEMA, TABLE, QUERY, compact=True)
    return [m["content"] for m in messages] * 10 + [plan_text(p) for p in PLANS] * 30

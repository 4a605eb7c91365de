import pandas as pd

from grasp_core.skb.format import SKB
from grasp_core.skb.schema import Relation, Schema
from grasp_core.text.fields import field_names, field_texts, relation_texts


def star_skb() -> SKB:
    """Product 0 is also-bought with products 1..4; product 4 has the highest degree, then 3, ..."""
    schema = Schema(
        "s",
        {"product": ("description",), "brand": ()},
        (Relation("also_buy", "product", "product"), Relation("has_brand", "product", "brand")),
    )
    nodes = pd.DataFrame(
        {
            "node_id": range(7),
            "key": [f"k{i}" for i in range(7)],
            "type": ["product"] * 5 + ["brand"] * 2,
            "name": ["P0", "P1", "P2", "P3", "P4", "B5", "B6"],
            "description": ["d0", None, "d2", None, None, None, None],
        }
    )
    edges = [(0, "also_buy", i) for i in range(1, 5)] + [(4, "has_brand", 5), (3, "has_brand", 6), (4, "also_buy", 2)]
    return SKB(schema, nodes, pd.DataFrame(edges, columns=["src", "rel", "dst"]), pd.DataFrame())


def test_relation_fields_list_neighbours_by_degree_both_directions_capped():
    texts = relation_texts(star_skb(), max_neighbours=3)
    assert texts["also_buy"][0] == "P4; P2; P3"  # degrees 3, 2, 2 (tie: smaller id) and P1 (1) is cut
    assert texts["also_buy"][2] == "P0; P4"  # an edge counts from its dst too
    assert texts["has_brand"][5] == "P4" and texts["has_brand"][4] == "B5" and texts["has_brand"][0] == ""


def test_every_node_has_every_field():
    skb = star_skb()
    texts = field_texts(skb)
    assert list(texts) == field_names(skb) == ["doc", "name", "description", "rel:also_buy", "rel:has_brand"]
    assert all(len(v) == 7 for v in texts.values())
    assert texts["description"][:3] == ["d0", "", "d2"] and texts["doc"][0] == skb.document(0)

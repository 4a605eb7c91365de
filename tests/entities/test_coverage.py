import pandas as pd
import pytest

from grasp_core.entities.coverage import anchor_coverage
from grasp_core.entities.table import EntityRow, EntityTable, Link
from tests.entities.conftest import ids


def table(*link_lists):
    """One anchor row per list of linked node ids (first = best)."""
    return EntityTable(
        tuple(
            EntityRow(f"E{i + 1}", "m", "anchor", ("disease",), {"disease": tuple(Link(n, "x", 0.5, 1) for n in nodes)})
            for i, nodes in enumerate(link_lists)
        )
    )


def test_coverage_counts_answers_and_gold_path_neighbours(skb):
    marfan, fbn1, met, tall, metformin, aspirin, diabetes, retina = ids(
        skb, "Marfan syndrome", "FBN1", "MET", "Tall stature", "metformin", "aspirin", "type 2 diabetes", "retina"
    )
    queries = pd.DataFrame(
        {
            "split": ["test", "test", "test", "test", "val"],
            "answer_ids": [[marfan], [marfan], [metformin, aspirin], [fbn1], [diabetes]],
        }
    )
    tables = [
        table([marfan]),  # the answer itself, top-1
        table([met, fbn1]),  # FBN1 neighbours Marfan, but only at rank 2
        table([retina]),  # nothing on the gold path (retina neighbours RHO only)
        EntityTable((EntityRow("E1", "under 5", "attribute", (), {}),)),  # attributes never count
        table([retina], [aspirin]),  # aspirin -indication- type 2 diabetes, in a second row
    ]
    out = anchor_coverage(tables, queries, skb)
    assert out["test"] == {"queries": 4, "answer": 25.0, "gold_path": 50.0, "gold_path_top1": 25.0}
    assert out["val"] == {"queries": 1, "answer": 0.0, "gold_path": 100.0, "gold_path_top1": 100.0}
    assert out["all"]["queries"] == 5 and out["all"]["gold_path"] == pytest.approx(60.0)


def test_coverage_needs_one_table_per_query(skb):
    with pytest.raises(ValueError, match="2 entity tables for 1 queries"):
        anchor_coverage([table([0]), table([1])], pd.DataFrame({"split": ["test"], "answer_ids": [[0]]}), skb)

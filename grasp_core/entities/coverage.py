"""How often the entity table puts the graph branch within reach of the answer.

For each query: does a gold answer appear among the table's links (``answer``), or a gold answer or a node on a
gold path — a neighbour of a gold answer, undirected (``gold_path``)? ``gold_path_top1`` counts only each
row's best link per type. Reported per split and over all queries, in percent, with the query count.
Only links count (all rows, any role); attribute rows have none.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp

from grasp_core.entities.table import EntityTable
from grasp_core.skb.format import SKB


def _adjacency(skb: SKB) -> sp.csr_matrix:
    src, dst = skb.edges["src"].to_numpy(np.int64), skb.edges["dst"].to_numpy(np.int64)
    n = skb.num_nodes
    data = np.ones(2 * len(src), np.int8)
    return sp.csr_matrix((data, (np.concatenate([src, dst]), np.concatenate([dst, src]))), shape=(n, n))


def _linked(table: EntityTable, top1: bool) -> set[int]:
    return {link.node_id for r in table.rows for links in r.links.values() for link in (links[:1] if top1 else links)}


def anchor_coverage(
    tables: Sequence[EntityTable], queries_df: pd.DataFrame, skb: SKB
) -> dict[str, dict[str, float | int]]:
    """``{split: {"queries", "answer", "gold_path", "gold_path_top1"}}`` plus an ``"all"`` entry.

    ``tables[i]`` is the table of ``queries_df.iloc[i]``.
    """
    if len(tables) != len(queries_df):
        raise ValueError(f"{len(tables)} entity tables for {len(queries_df)} queries")
    adj = _adjacency(skb)
    rows = []
    for table, answers in zip(tables, queries_df["answer_ids"]):
        answers = np.asarray(answers, np.int64)
        path = set(answers.tolist()) | set(adj[answers].indices.tolist())
        linked, linked_top1 = _linked(table, False), _linked(table, True)
        rows.append((bool(linked & set(answers.tolist())), bool(linked & path), bool(linked_top1 & path)))
    hits = pd.DataFrame(rows, columns=["answer", "gold_path", "gold_path_top1"])
    hits["split"] = queries_df["split"].to_numpy() if "split" in queries_df else "all"
    out = {}
    for split, group in [*hits.groupby("split", sort=True), ("all", hits)]:
        out[str(split)] = {
            "queries": len(group),
            **{
                k: 100.0 * float(group[k].mean()) if len(group) else 0.0
                for k in ("answer", "gold_path", "gold_path_top1")
            },
        }
    return out

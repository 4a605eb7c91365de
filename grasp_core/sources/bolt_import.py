"""`grasp data import --bolt URI`: a graph in a Bolt database (Neo4j 5, ArcadeDB) read into the SKB format.

Each node becomes one SKB node: its first label is its type; its ``name`` property (else ``title``, else its first
string property, else ``<label> <id>``) its name; an ``aliases`` property (a list of strings) its aliases; every
other property a text field (a list is joined with ``"; "``, so it reads as a term list; a property named like a
reserved column is suffixed with ``_``). The key is the ``id`` property when every node has a distinct one, else
the database's element id. Each relationship becomes an edge ``(start, type, end)``. Both are then checked and
written like a CSV import (:func:`grasp_core.sources.importer.build_skb`); the schema is inferred. The password comes
from an environment variable (``--bolt-password-env``), never from the command line.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from grasp_core.errors import GraphStoreError
from grasp_core.redact import redact
from grasp_core.skb.format import SKB
from grasp_core.sources.importer import ALIASES, RESERVED, build_skb, write

NODES_QUERY = "MATCH (n) RETURN elementId(n) AS eid, labels(n) AS labels, properties(n) AS props"
EDGES_QUERY = "MATCH (a)-[r]->(b) RETURN elementId(a) AS src, type(r) AS rel, elementId(b) AS dst"
_STRUCTURAL = ("type", "name", *RESERVED)


def read_bolt(
    uri: str, user: str, password: str | None, database: str | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The nodes table (id, type, name[, aliases], text fields) and the edges table (src, rel, dst) of a Bolt graph."""
    import neo4j

    try:
        with neo4j.GraphDatabase.driver(uri, auth=(user, password or "")) as driver:
            with driver.session(database=database) as session:
                node_rows = [r.data() for r in session.run(NODES_QUERY)]
                edge_rows = [r.data() for r in session.run(EDGES_QUERY)]
    except Exception as exc:  # the driver raises many types (unreachable, auth, protocol)
        raise GraphStoreError(
            f"cannot read the Bolt graph at {uri} ({redact(str(exc)).splitlines()[0]}); check the URI, the user and "
            "the password variable"
        ) from exc
    if not node_rows:
        raise GraphStoreError(f"the Bolt graph at {uri} has no nodes")
    nodes = _nodes(node_rows)
    key_of = dict(zip((r["eid"] for r in node_rows), nodes["id"]))
    edges = pd.DataFrame(edge_rows, columns=["src", "rel", "dst"])
    return nodes, edges.assign(src=edges["src"].map(key_of), dst=edges["dst"].map(key_of))


def _value(v) -> str | None:
    if isinstance(v, (list, tuple)):
        return "; ".join(str(x) for x in v if x is not None) or None
    return None if v is None else str(v)


def _nodes(rows: list[dict]) -> pd.DataFrame:
    ids = [r["props"].get("id") for r in rows]
    own_ids = all(i is not None for i in ids) and len({str(i) for i in ids}) == len(ids)
    records = []
    for r, own in zip(rows, ids):
        props = dict(r["props"])
        props.pop("id", None)
        label = r["labels"][0] if r["labels"] else "node"
        key = str(own) if own_ids else r["eid"]
        name = props.pop("name", None) or props.pop("title", None)
        if name is None:
            name = next((props.pop(k) for k, v in list(props.items()) if isinstance(v, str) and v.strip()), None)
        rec = {"id": key, "type": label, "name": str(name) if name is not None else f"{label} {key}"}
        aliases = props.pop(ALIASES, None)
        if aliases is not None:
            rec[ALIASES] = [str(a) for a in aliases] if isinstance(aliases, (list, tuple)) else [str(aliases)]
        for k, v in props.items():
            rec[f"{k}_" if k in _STRUCTURAL else k] = _value(v)
        records.append(rec)
    return pd.DataFrame(records)


def import_bolt(out_dir: str | Path, uri: str, user: str, password: str | None, database: str | None = None) -> SKB:
    """Read the Bolt graph at ``uri`` and write it as the user SKB ``out_dir``."""
    nodes, edges = read_bolt(uri, user, password, database)
    where = redact(uri)
    skb = build_skb(nodes, edges, Path(out_dir).name, None, f"{where} (nodes)", f"{where} (relationships)")
    write(skb, out_dir)
    return skb

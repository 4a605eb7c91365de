"""`grasp data import`: a user's knowledge base from CSV / JSON lines files into the on-disk SKB format.

Nodes: one row per node with ``id``, ``type``, ``name``, an optional ``aliases`` (a JSON list, or in CSV one string
with the names separated by ``|``) and any other columns, each a text field. Edges: ``src``, ``rel``, ``dst``
(``src``/``dst`` are node ``id`` values). Without ``--schema`` the schema is inferred: the node types are the
``type`` values, a type's text fields are the columns with a value for some node of that type (in column order),
the relations are the ``(rel, type of src, type of dst)`` triples that occur. With a ``schema.json`` every node
and edge is checked against it. Bad input fails with one line naming the file, the line and what to change;
nothing is written then. The SKB is written atomically (:func:`grasp_core.skb.format.write_skb`) with the
default question wording beside it (``wording.json``, :mod:`grasp_core.questions.wording`) for the user to edit.
A Bolt graph database is read into the same two tables by :mod:`grasp_core.sources.bolt_import`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from grasp_core.errors import SKBFormatError
from grasp_core.questions.wording import WORDING_FILE, write_default_wording
from grasp_core.skb.format import SKB, empty_queries, validate, write_skb
from grasp_core.skb.schema import Relation, Schema
from grasp_core.textnorm import check_unicode

NODE_COLUMNS = ("id", "type", "name")
EDGE_COLUMNS = ("src", "rel", "dst")
ALIASES = "aliases"
RESERVED = ("node_id", "key")  # columns of nodes.parquet the importer fills itself


def read_table(path: str | Path, required: tuple[str, ...]) -> pd.DataFrame:
    """A CSV (``.csv``, ``.tsv``) or JSON lines (``.jsonl``, ``.ndjson``, ``.json``) file, every value a string
    (lists kept for ``aliases``); missing required columns are an error."""
    path = Path(path)
    if not path.is_file():
        raise SKBFormatError(str(path), "file is missing")
    suffix = path.suffix.lower()
    try:
        if suffix in (".csv", ".tsv"):
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, sep="\t" if suffix == ".tsv" else ",")
        elif suffix in (".jsonl", ".ndjson", ".json"):
            rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            if not all(isinstance(r, dict) for r in rows):
                raise ValueError("every line must be a JSON object")
            frame = pd.DataFrame(rows)
        else:
            raise SKBFormatError(str(path), "unknown file type: use .csv, .tsv, .jsonl or .ndjson")
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise SKBFormatError(str(path), f"not readable as {suffix[1:]} ({str(exc).splitlines()[0]})") from exc
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise SKBFormatError(str(path), f"missing columns {missing} (has {list(frame.columns)})")
    return frame


def _line(path: str | Path, row: int) -> str:
    """The line of data row ``row`` in its file (a CSV's header is line 1)."""
    return f"line {row + (2 if Path(path).suffix.lower() in ('.csv', '.tsv') else 1)}"


def _text(value) -> str | None:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, (list, tuple)):
        value = "; ".join(str(v) for v in value if v is not None)
    text = str(value).strip()
    return text or None


def _aliases(value, where: str) -> list[str]:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return []
    items = value.split("|") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise SKBFormatError(where, f"aliases must be a list of names (or a '|'-separated string), got {value!r}")
    return list(dict.fromkeys(s for a in items if (s := str(a).strip())))


def build_skb(
    nodes: pd.DataFrame,
    edges: pd.DataFrame,
    name: str,
    schema: Schema | None = None,
    nodes_file: str = "nodes",
    edges_file: str = "edges",
) -> SKB:
    """The SKB of a nodes table (id, type, name[, aliases], text columns) and an edges table (src, rel, dst)."""
    for col in RESERVED:
        if col in nodes.columns:
            raise SKBFormatError(nodes_file, f"column {col!r} is reserved (the importer numbers the nodes): rename it")
    ids = [_text(v) for v in nodes["id"]]
    seen: dict[str, int] = {}
    for row, (key, node_type, node_name) in enumerate(zip(ids, nodes["type"], nodes["name"])):
        where = _line(nodes_file, row)
        if key is None:
            raise SKBFormatError(nodes_file, f"{where}: node has no id")
        if key in seen:
            raise SKBFormatError(nodes_file, f"{where}: duplicate id {key!r} (first at {_line(nodes_file, seen[key])})")
        seen[key] = row
        if _text(node_type) is None:
            raise SKBFormatError(nodes_file, f"{where}: node {key!r} has no type")
        if _text(node_name) is None:
            raise SKBFormatError(nodes_file, f"{where}: node {key!r} has no name")
        if schema is not None and str(node_type).strip() not in schema.node_types:
            raise SKBFormatError(
                nodes_file,
                f"{where}: node type {str(node_type).strip()!r} is not in the schema ({sorted(schema.node_types)})",
            )
    text_cols = [c for c in nodes.columns if c not in (*NODE_COLUMNS, ALIASES)]
    frame = pd.DataFrame(
        {
            "node_id": np.arange(len(nodes), dtype=np.int64),
            "key": ids,
            "type": [str(t).strip() for t in nodes["type"]],
            "name": [str(n).strip() for n in nodes["name"]],
        }
    )
    for c in text_cols:
        frame[c] = [_text(v) for v in nodes[c]]
    for row, value in enumerate(frame["name"]):
        check_unicode(value, f"{nodes_file}, {_line(nodes_file, row)}: name")
    if ALIASES in nodes.columns:
        frame[ALIASES] = [_aliases(v, f"{nodes_file}, {_line(nodes_file, i)}") for i, v in enumerate(nodes[ALIASES])]
    src, dst, rels = [], [], []
    types = frame["type"].to_numpy()
    for row, (a, rel, b) in enumerate(zip(edges["src"], edges["rel"], edges["dst"])):
        where = _line(edges_file, row)
        ends = []
        for end, value in (("src", a), ("dst", b)):
            key = _text(value)
            if key not in seen:
                raise SKBFormatError(edges_file, f"{where}: edge {end} {key!r} is not the id of a node in {nodes_file}")
            ends.append(seen[key])
        rel_name = _text(rel)
        if rel_name is None:
            raise SKBFormatError(edges_file, f"{where}: edge has no rel")
        if schema is not None and not schema.connects(rel_name, types[ends[0]], types[ends[1]]):
            raise SKBFormatError(
                edges_file,
                f"{where}: relation {rel_name!r} between types {types[ends[0]]!r} and {types[ends[1]]!r} is not in "
                "the schema",
            )
        src.append(ends[0])
        dst.append(ends[1])
        rels.append(rel_name)
    edge_frame = pd.DataFrame(
        {
            "src": np.asarray(src, dtype=np.int64),
            "rel": np.asarray(rels, dtype=object),
            "dst": np.asarray(dst, dtype=np.int64),
        }
    )
    if schema is None:
        schema = infer_schema(name, frame, text_cols, edge_frame)
    else:
        absent = [f for f in schema.text_fields if f not in frame]
        if absent:
            raise SKBFormatError(nodes_file, f"missing text field columns {absent} that the schema declares")
        schema = Schema(name, schema.node_types, schema.relations)
        frame = frame[["node_id", "key", "type", "name", *schema.text_fields, *([ALIASES] if ALIASES in frame else [])]]
    skb = SKB(schema, frame, edge_frame, empty_queries())
    validate(skb, where=nodes_file)
    return skb


def infer_schema(name: str, nodes: pd.DataFrame, text_cols: list[str], edges: pd.DataFrame) -> Schema:
    """Node types with the text columns their nodes use; the relation triples the edges show."""
    node_types: dict[str, tuple[str, ...]] = {}
    for t, group in nodes.groupby("type", sort=True):
        node_types[str(t)] = tuple(c for c in text_cols if group[c].notna().any())
    types = nodes["type"].to_numpy()
    triples = pd.DataFrame({"rel": edges["rel"], "src": types[edges["src"]], "dst": types[edges["dst"]]})
    relations: list[Relation] = []
    for rel, a, b in triples.drop_duplicates().itertuples(index=False):
        if Relation(rel, b, a) not in relations:
            relations.append(Relation(str(rel), str(a), str(b)))
    return Schema.from_json(Schema(name, node_types, tuple(relations)).to_json(), "the inferred schema")


def import_files(
    out_dir: str | Path,
    nodes_file: str | Path,
    edges_file: str | Path,
    schema_file: str | Path | None = None,
    wording_file: str | Path | None = None,
) -> SKB:
    """Read, check and write a user SKB to ``out_dir`` (its name is the directory's name)."""
    out_dir = Path(out_dir)
    schema = Schema.load(schema_file) if schema_file else None
    nodes = read_table(nodes_file, NODE_COLUMNS)
    edges = read_table(edges_file, EDGE_COLUMNS)
    skb = build_skb(nodes, edges, out_dir.name, schema, str(nodes_file), str(edges_file))
    write(skb, out_dir, wording_file)
    return skb


def write(skb: SKB, out_dir: str | Path, wording_file: str | Path | None = None) -> Path:
    """Write the SKB with ``wording_file`` (checked against its schema) as its wording, else the wording already
    there, else the default wording to edit."""
    out_dir = Path(out_dir)
    if wording_file is not None:
        if not Path(wording_file).is_file():
            raise SKBFormatError(str(wording_file), "file is missing")
        data = Path(wording_file).read_bytes()
        _check_wording(data, skb, str(wording_file))
        kept: bytes | None = data
    else:
        kept = (out_dir / WORDING_FILE).read_bytes() if (out_dir / WORDING_FILE).exists() else None
    write_skb(skb, out_dir)
    if kept is not None:
        (out_dir / WORDING_FILE).write_bytes(kept)
    else:
        from grasp_core.questions.generic_queries import property_rules

        write_default_wording(out_dir, skb.schema, property_rules(skb).term_fields)
    return out_dir


def _check_wording(data: bytes, skb: SKB, file: str) -> None:
    """Refuse a wording file that does not fit the schema, before anything is written."""
    import tempfile

    from grasp_core.questions.wording import load_wording

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / WORDING_FILE).write_bytes(data)
        try:
            load_wording(tmp, skb.schema)
        except SKBFormatError as exc:
            raise SKBFormatError(file, exc.problem, exc.row) from None

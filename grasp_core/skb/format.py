"""The on-disk SKB (``docs/design.md``): ``schema.json``, ``nodes.parquet``, ``edges.parquet``, ``queries.parquet``.

``SKB`` is the in-memory form every loader produces and every consumer reads. ``write_skb`` writes the
four files into a temporary directory that is renamed into place; ``read_skb`` validates everything
and raises :class:`SKBFormatError` naming the file, the row and the problem.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from grasp_core.errors import GraspError, SKBFormatError
from grasp_core.io import atomic_dir, atomic_file
from grasp_core.skb.schema import Schema
from grasp_core.textnorm import check_unicode

SPLITS = ("train", "val", "test", "test-human", "val-human", "feedback")  # feedback: held-out questions from use
FINGERPRINT = "fingerprint.txt"  # in an SKB directory: the content hash of its graph files
BUILT_FROM = "built_from.json"  # in a queries directory: {"skb": the fingerprint of the SKB it was built from}
HUMAN_QID_OFFSET = 1_000_000  # qid of human-written query i = offset + i (synthesized qids are below it)
VAL_HUMAN_QID_OFFSET = 2_000_000  # qid of hpo's val-human question i = offset + i
QUERY_COLUMNS = ("qid", "split", "query", "answer_ids")
# Columns of queries.parquet that only analysis may read (never a retriever or the planner).
ANALYSIS_COLUMNS = ("template", "register")
# Optional column of nodes.parquet: list<string>, the other names a node goes by (synonyms, lay terms,
# abbreviations, alternative titles); absent or null = none. The gazetteer, the name index (one vector per alias)
# and the node documents read it (``SKB.alias_pairs``, ``SKB.document``).
ALIASES = "aliases"
ALIAS_TEXT_FIELDS = ("synonyms", "synonym", "alias")  # text fields a source keeps alternative names in
ALIAS_SPLIT = re.compile(r"\s*(?:[;|\n]|\t)\s*")  # how a text field of alternative names separates them


@dataclass
class SKB:
    schema: Schema
    nodes: pd.DataFrame  # node_id (0..N-1, row i has node_id i), key, type, name, text fields [, aliases]
    edges: pd.DataFrame  # src, rel, dst
    queries: pd.DataFrame  # qid, split, query, answer_ids (list of node ids) [, template]

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    def node_type_counts(self) -> dict[str, int]:
        return {str(k): int(v) for k, v in self.nodes["type"].value_counts().sort_index().items()}

    def edge_counts(self) -> dict[str, int]:
        return {str(k): int(v) for k, v in self.edges["rel"].value_counts().sort_index().items()}

    def split_counts(self) -> dict[str, int]:
        return {str(k): int(v) for k, v in self.queries["split"].value_counts().sort_index().items()}

    def query_target_types(self) -> pd.Series:
        """Per query, the node type of its answers (``mixed`` when they span several types)."""
        types = self.nodes["type"].to_numpy()
        kinds = [{str(types[i]) for i in ids} for ids in self.queries["answer_ids"]]
        return pd.Series([k.pop() if len(k) == 1 else "mixed" for k in kinds], index=self.queries.index, dtype=object)

    def split(self, name: str) -> pd.DataFrame:
        return self.queries[self.queries["split"] == name].reset_index(drop=True)

    @cached_property
    def degrees(self) -> np.ndarray:
        """Undirected degree of every node."""
        return np.bincount(
            np.concatenate([self.edges["src"].to_numpy(), self.edges["dst"].to_numpy()]), minlength=self.num_nodes
        )

    def ids_of_type(self, node_type: str) -> np.ndarray:
        return self.nodes.index[self.nodes["type"].to_numpy() == node_type].to_numpy(dtype=np.int64)

    def aliases_of(self, node_id: int) -> list[str]:
        """The node's aliases (the ``aliases`` column; [] when the SKB has none)."""
        if ALIASES not in self.nodes:
            return []
        value = self.nodes[ALIASES].iat[node_id]
        return list(value) if value is not None and not isinstance(value, float) else []

    def alias_pairs(self) -> list[tuple[int, str]]:
        """(node id, alias) for every alias of every node, in node order (names not included)."""
        if ALIASES not in self.nodes:
            return []
        return [(i, str(a)) for i, value in enumerate(self.nodes[ALIASES]) if _is_list(value) for a in value]

    def type_names(self) -> list[tuple[str, str]]:
        """(node type, name) of every node, then (node type, alias) of every alias."""
        types = self.nodes["type"].astype(str).tolist()
        return [*zip(types, self.nodes["name"].astype(str)), *((types[i], a) for i, a in self.alias_pairs())]

    def text_fields_of(self, node_id: int) -> dict[str, str]:
        """The non-empty text fields of a node, in schema order."""
        row = self.nodes.iloc[node_id]
        return {f: row[f] for f in self.schema.node_types[row["type"]] if isinstance(row[f], str) and row[f]}

    def document(self, node_id: int) -> str:
        """Document text = type + name + text fields (``docs/design.md``, Embeddings)."""
        row = self.nodes.iloc[node_id]
        parts = [f"{row['type']}: {row['name']}"]
        fields = self.text_fields_of(node_id)
        parts += [f"{f}: {v}" for f, v in fields.items()]
        written = " ".join(fields.values()).casefold()
        extra = [a for a in self.aliases_of(node_id) if a.casefold() not in written]  # not already in a text field
        if extra:
            parts.append(f"{ALIASES}: " + "; ".join(extra))
        return "\n".join(parts)

    def documents(self) -> list[str]:
        return [self.document(i) for i in range(self.num_nodes)]


def _is_list(value) -> bool:
    return value is not None and not isinstance(value, (str, bytes, float)) and hasattr(value, "__len__")


is_alias_list = _is_list  # a cell of the ``aliases`` column that holds aliases (None, NaN or a string does not)


def aliases_from_fields(nodes: pd.DataFrame, fields: tuple[str, ...]) -> list[list[str]]:
    """Per node, the alternative names held in text ``fields`` (split on ``;``, ``|``, tab or newline), name and
    repeats left out: how a loader whose source keeps aliases in a text field fills the ``aliases`` column."""
    present = [f for f in fields if f in nodes]
    out = []
    for i, name in enumerate(nodes["name"].astype(str)):
        found: dict[str, None] = {}
        for f in present:
            value = nodes[f].iat[i]
            if isinstance(value, str):
                found.update((a, None) for a in ALIAS_SPLIT.split(value) if a and a != name)
        out.append(list(found))
    return out


def empty_queries() -> pd.DataFrame:
    """A queries table with the contract's columns and no rows (an SKB whose queries come later)."""
    return pd.DataFrame({c: [] for c in QUERY_COLUMNS})


def write_skb(skb: SKB, path: str | Path, source_queries: pd.DataFrame | None = None) -> Path:
    """Validate and write ``skb`` to ``path`` atomically (a crash leaves the previous version intact).

    ``source_queries`` (queries a source ships, validated against the graph) go into the same directory as
    ``source_queries.parquet``; the directory is marked complete only when both are written.
    """
    validate(skb)
    if source_queries is not None:
        validate(SKB(skb.schema, skb.nodes, skb.edges, source_queries))
    path = Path(path)
    with atomic_dir(path) as tmp:
        skb.schema.save(tmp / "schema.json")
        pq.write_table(_nodes_table(skb), tmp / "nodes.parquet")
        pq.write_table(
            pa.table(
                {
                    "src": pa.array(skb.edges["src"].to_numpy(np.int64)),
                    "rel": pa.array(skb.edges["rel"].astype(str).to_numpy(), pa.string()),
                    "dst": pa.array(skb.edges["dst"].to_numpy(np.int64)),
                }
            ),
            tmp / "edges.parquet",
        )
        pq.write_table(_queries_table(skb.queries), tmp / "queries.parquet")
        (tmp / FINGERPRINT).write_text(
            content_hash([tmp / "schema.json", tmp / "nodes.parquet", tmp / "edges.parquet"])
        )
        if source_queries is not None:
            pq.write_table(_queries_table(source_queries), tmp / "source_queries.parquet")
    return path


def content_hash(files: list[Path]) -> str:
    """sha256 over the bytes of ``files`` (in order)."""
    digest = hashlib.sha256()
    for file in files:
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def check_built_from(skb_dir: Path, queries_file: Path) -> None:
    """Refuse queries built from another version of the SKB (e.g. a build killed between its two writes).

    Artifacts written before fingerprints were recorded have none and are not checked."""
    skb_print, record = Path(skb_dir) / FINGERPRINT, Path(queries_file).parent / BUILT_FROM
    if not (skb_print.exists() and record.exists()):
        return
    built_from = json.loads(record.read_text()).get("skb")
    if built_from != skb_print.read_text().strip():
        dataset = Path(skb_dir).parent.name
        raise SKBFormatError(
            str(queries_file),
            f"built from another version of the SKB at {skb_dir} (SKB {skb_print.read_text().strip()[:12]}, "
            f"queries built from {str(built_from)[:12]}); rebuild them: `grasp data build {dataset}` "
            f"(or materialize the `queries` asset)",
        )


def _nodes_table(skb: SKB) -> pa.Table:
    cols = {
        "node_id": pa.array(skb.nodes["node_id"].to_numpy(np.int64)),
        "key": pa.array(skb.nodes["key"].astype(str).tolist(), pa.string()),
        "type": pa.array(skb.nodes["type"].astype(str).tolist(), pa.string()),
        "name": pa.array(skb.nodes["name"].astype(str).tolist(), pa.string()),
    }
    for f in skb.schema.text_fields:
        values = skb.nodes[f] if f in skb.nodes else pd.Series([None] * len(skb.nodes))
        cols[f] = pa.array([v if isinstance(v, str) else None for v in values], pa.string())
    if ALIASES in skb.nodes:
        values = [[str(a) for a in v] if _is_list(v) else None for v in skb.nodes[ALIASES]]
        cols[ALIASES] = pa.array(values, pa.list_(pa.string()))
    return pa.table(cols)


def write_queries(queries: pd.DataFrame, path: str | Path) -> Path:
    """Write a queries table alone (atomic); it is validated when read together with its graph."""
    path = Path(path)
    table = _queries_table(queries)
    with atomic_file(path, "wb") as handle:
        pq.write_table(table, handle)
    return path


def _queries_table(queries: pd.DataFrame) -> pa.Table:
    cols = {
        "qid": pa.array(queries["qid"].to_numpy(np.int64)),
        "split": pa.array(queries["split"].astype(str).tolist(), pa.string()),
        "query": pa.array(queries["query"].astype(str).tolist(), pa.string()),
        "answer_ids": pa.array([list(map(int, a)) for a in queries["answer_ids"]], pa.list_(pa.int64())),
    }
    for extra in ANALYSIS_COLUMNS:
        if extra in queries:
            cols[extra] = pa.array(queries[extra].astype(str).tolist(), pa.string())
    return pa.table(cols)


def read_skb(path: str | Path, with_queries: bool = True, queries_file: str | Path | None = None) -> SKB:
    """Read and validate an SKB directory. Raises :class:`SKBFormatError` on any malformed input.

    ``queries_file`` reads the queries from another parquet file than ``<path>/queries.parquet`` (the
    pipeline keeps the graph and the queries as two assets).
    """
    path = Path(path)
    if not path.is_dir():
        raise SKBFormatError(str(path), "SKB directory does not exist (build it first, e.g. `grasp data build`)")
    schema = Schema.load(path / "schema.json")
    nodes = _read_parquet(path / "nodes.parquet", ("node_id", "key", "type", "name"))
    nodes["node_id"] = _integers(nodes["node_id"], str(path / "nodes.parquet"), "node_id")
    if ALIASES in nodes:
        nodes[ALIASES] = _alias_lists(nodes[ALIASES], str(path / "nodes.parquet"))
    edges = _read_parquet(path / "edges.parquet", ("src", "rel", "dst"))
    for end in ("src", "dst"):
        edges[end] = _integers(edges[end], str(path / "edges.parquet"), f"edge {end}", "node id")
    queries = empty_queries()
    if with_queries:
        q_file = Path(queries_file) if queries_file else path / "queries.parquet"
        queries = _read_parquet(q_file, QUERY_COLUMNS)
        queries["qid"] = _integers(queries["qid"], str(q_file), "qid")
        queries["answer_ids"] = _answer_lists(queries["answer_ids"], str(q_file))
    if queries_file:
        check_built_from(path, Path(queries_file))
    skb = SKB(schema, nodes, edges, queries)
    validate(skb, where=path, queries_file=queries_file)
    return skb


def _read_parquet(file: Path, required: tuple[str, ...]) -> pd.DataFrame:
    if not file.exists():
        raise SKBFormatError(str(file), "file is missing")
    try:
        table = pq.read_table(file)
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise SKBFormatError(str(file), f"not a readable parquet file ({exc})") from exc
    missing = [c for c in required if c not in table.column_names]
    if missing:
        raise SKBFormatError(str(file), f"missing columns {missing}")
    return table.to_pandas()


def _integers(column: pd.Series, file: str, what: str, kind: str = "") -> pd.Series:
    """``column`` as int64; a value that is not an integer (a string, NaN, 3.5) is an error naming its row.
    Integral floats (``3.0``, what a CSV round trip makes of ids) are accepted."""
    if pd.api.types.is_integer_dtype(column.dtype):
        return column.astype(np.int64)
    numbers = pd.to_numeric(column, errors="coerce") if column.dtype == object else column
    ok = np.array([isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) for v in column])
    values = np.asarray(numbers, dtype=np.float64) if ok.all() else np.zeros(len(column))
    bad = ~ok | ~np.isfinite(values) | (values != np.round(values))
    if bad.any():
        row = _first_bad(bad)
        value = column.iloc[row]
        value = value.item() if isinstance(value, np.generic) else value
        raise SKBFormatError(file, f"{what} {value!r} is not an integer{' ' + kind if kind else ''}", row)
    return pd.Series(values.astype(np.int64), index=column.index)


def _alias_lists(column: pd.Series, file: str) -> pd.Series:
    """Every ``aliases`` value as a list of strings (null = []); anything else is an error naming its row."""
    out: list[list[str]] = []
    for row, value in enumerate(column):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            out.append([])
            continue
        if not _is_list(value):
            raise SKBFormatError(file, f"aliases must be a list of strings, got {value!r}", row)
        out.append(list(value))
    return pd.Series(out, index=column.index, dtype=object)


def _answer_lists(column: pd.Series, file: str) -> pd.Series:
    """Every ``answer_ids`` value as a list of ints; a scalar or a non-integer id is an error naming its row."""
    out = []
    for row, answers in enumerate(column):
        if answers is None or isinstance(answers, (str, bytes)) or not hasattr(answers, "__len__"):
            raise SKBFormatError(file, f"answer_ids must be a list of node ids, got {answers!r}", row)
        ids = []
        for a in answers:
            if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
                raise SKBFormatError(file, f"answer id {a!r} is not an integer node id", row)
            ids.append(int(a))
        out.append(ids)
    return pd.Series(out, index=column.index, dtype=object)


def validate(skb: SKB, where: str | Path = "<memory>", queries_file: str | Path | None = None) -> None:
    """Check every contract of ``docs/design.md``; raise :class:`SKBFormatError` at the first violation.

    Messages name ``<where>/nodes.parquet`` etc.; ``queries_file`` when the queries were read from elsewhere.
    """
    where = Path(where)
    _validate_nodes(skb, str(where / "nodes.parquet"))
    _validate_edges(skb, str(where / "edges.parquet"))
    _validate_queries(skb, str(queries_file or where / "queries.parquet"))


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _validate_nodes(skb: SKB, file: str) -> None:
    nodes = skb.nodes
    ids = nodes["node_id"].to_numpy()
    bad = ids != np.arange(len(nodes))
    if bad.any():
        row = _first_bad(bad)
        raise SKBFormatError(file, f"node_id {ids[row]} out of place: node ids must be 0..N-1 in row order", row)
    types = nodes["type"].to_numpy()
    unknown = ~np.isin(types, list(skb.schema.node_types))
    if unknown.any():
        row = _first_bad(unknown)
        raise SKBFormatError(
            file, f"unknown node type {types[row]!r} (schema has {sorted(skb.schema.node_types)})", row
        )
    dup = nodes["key"].duplicated().to_numpy()
    if dup.any():
        row = _first_bad(dup)
        raise SKBFormatError(file, f"duplicate key {nodes['key'].iloc[row]!r}", row)
    missing_name = nodes["name"].isna().to_numpy()
    if missing_name.any():
        raise SKBFormatError(file, "node has no name", _first_bad(missing_name))
    absent = [f for f in skb.schema.text_fields if f not in nodes]
    if absent:
        raise SKBFormatError(file, f"missing text field columns {absent} declared in schema.json")
    if ALIASES in skb.schema.text_fields:
        raise SKBFormatError(file, f"{ALIASES!r} is the alias column (a list of names), not a text field: rename it")
    if ALIASES in nodes:
        _validate_aliases(nodes[ALIASES], file)


def _validate_aliases(column: pd.Series, file: str) -> None:
    for row, value in enumerate(column):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            continue
        if not _is_list(value):
            raise SKBFormatError(file, f"aliases must be a list of strings (or null), got {value!r}", row)
        for alias in value:
            if not isinstance(alias, str) or not alias.strip():
                raise SKBFormatError(file, f"alias {alias!r} is not a non-empty string", row)
            try:
                check_unicode(alias, "alias")
            except GraspError as exc:
                raise SKBFormatError(file, str(exc), row) from None


def _validate_edges(skb: SKB, file: str) -> None:
    edges, n = skb.edges, skb.num_nodes
    if len(edges) == 0:
        return
    src, dst = edges["src"].to_numpy(), edges["dst"].to_numpy()
    for name, ends in (("src", src), ("dst", dst)):
        bad = (ends < 0) | (ends >= n)
        if bad.any():
            row = _first_bad(bad)
            raise SKBFormatError(file, f"edge {name} {ends[row]} is not a node (valid ids are 0..{n - 1})", row)
    rels = edges["rel"].to_numpy()
    unknown = ~np.isin(rels, skb.schema.relation_names)
    if unknown.any():
        row = _first_bad(unknown)
        raise SKBFormatError(file, f"unknown relation {rels[row]!r}", row)
    # endpoint types must match a declared (rel, src type, dst type) triple, in either direction
    type_codes, type_names = pd.factorize(skb.nodes["type"])
    rel_codes, rel_names = pd.factorize(edges["rel"])
    n_types = len(type_names)
    allowed = np.zeros((len(rel_names), n_types, n_types), dtype=bool)
    t_index = {t: i for i, t in enumerate(type_names)}
    for r in skb.schema.relations:
        if r.name in set(rel_names) and r.src in t_index and r.dst in t_index:
            ri = list(rel_names).index(r.name)
            allowed[ri, t_index[r.src], t_index[r.dst]] = allowed[ri, t_index[r.dst], t_index[r.src]] = True
    ok = allowed[rel_codes, type_codes[src], type_codes[dst]]
    if not ok.all():
        row = _first_bad(~ok)
        raise SKBFormatError(
            file,
            f"relation {rels[row]!r} between types {type_names[type_codes[src[row]]]!r} and "
            f"{type_names[type_codes[dst[row]]]!r} contradicts schema.json",
            row,
        )


def _validate_queries(skb: SKB, file: str) -> None:
    q = skb.queries
    if len(q) == 0:
        return
    dup = q["qid"].duplicated().to_numpy()
    if dup.any():
        row = _first_bad(dup)
        raise SKBFormatError(file, f"duplicate qid {q['qid'].iloc[row]}", row)
    for row, text in enumerate(q["query"]):
        if not isinstance(text, str):
            raise SKBFormatError(
                file, "query text is missing" if text is None else f"query text {text!r} is not a string", row
            )
        if not text.strip():
            raise SKBFormatError(file, "query text is empty", row)
        try:
            check_unicode(text, "query text")
        except GraspError as exc:
            raise SKBFormatError(file, str(exc), row) from None
    splits = q["split"].to_numpy()
    bad_split = ~np.isin(splits, SPLITS)
    if bad_split.any():
        row = _first_bad(bad_split)
        raise SKBFormatError(file, f"unknown split {splits[row]!r} (expected one of {SPLITS})", row)
    n = skb.num_nodes
    for row, answers in enumerate(q["answer_ids"]):
        if answers is None or len(answers) == 0:
            raise SKBFormatError(file, "query has no answer", row)
        a = np.asarray(answers)
        bad = (a < 0) | (a >= n)
        if bad.any():
            raise SKBFormatError(file, f"answer id {a[bad][0]} is not a node", row)

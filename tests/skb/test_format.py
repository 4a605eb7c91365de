"""Every failure of the on-disk SKB contract gives an SKBFormatError naming the file, the row and the problem;
write_skb never leaves a half-written directory and keeps the previous version when it fails."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grasp_core.errors import SKBFormatError
from grasp_core.io import is_complete
from grasp_core.skb.format import SKB, aliases_from_fields, read_skb, validate, write_skb
from grasp_core.skb.schema import Relation, Schema

SCHEMA = Schema(
    name="toy",
    node_types={"product": ("description",), "brand": ()},
    relations=(Relation("also_buy", "product", "product"), Relation("has_brand", "product", "brand")),
)


def toy_skb() -> SKB:
    nodes = pd.DataFrame(
        {
            "node_id": [0, 1, 2, 3],
            "key": ["p1", "p2", "p3", "b1"],
            "type": ["product", "product", "product", "brand"],
            "name": ["Shoe", "Stove", "Bottle", "Acme"],
            "description": ["light", None, "steel", None],
        }
    )
    edges = pd.DataFrame({"src": [0, 0, 1], "rel": ["also_buy", "has_brand", "has_brand"], "dst": [1, 3, 3]})
    queries = pd.DataFrame(
        {"qid": [7, 8], "split": ["train", "test"], "query": ["a shoe", "a stove"], "answer_ids": [[0], [1, 2]]}
    )
    return SKB(SCHEMA, nodes, edges, queries)


@pytest.fixture
def skb_dir(tmp_path) -> Path:
    return write_skb(toy_skb(), tmp_path / "toy")


def edit(file: Path, **changes) -> None:
    """Rewrite one parquet file with ``column=(row, value)`` changes."""
    frame = pq.read_table(file).to_pandas()
    for column, (row, value) in changes.items():
        frame.at[row, column] = value
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), file)


def raises(skb_dir: Path, file: str, row: int | None, problem: str):
    where = re.escape(str(skb_dir / file)) + ("" if row is None else f", row {row}")
    return pytest.raises(SKBFormatError, match=f"^{where}: {problem}")


def test_a_valid_skb_round_trips(skb_dir):
    back = read_skb(skb_dir)
    assert is_complete(skb_dir)
    assert back.schema == SCHEMA
    assert back.nodes["name"].tolist() == ["Shoe", "Stove", "Bottle", "Acme"]
    assert back.edges.equals(toy_skb().edges)
    assert [list(a) for a in back.queries["answer_ids"]] == [[0], [1, 2]]
    assert back.document(0) == "product: Shoe\ndescription: light"


@pytest.mark.parametrize("file", ["schema.json", "nodes.parquet", "edges.parquet", "queries.parquet"])
def test_missing_file(skb_dir, file):
    (skb_dir / file).unlink()
    with raises(skb_dir, file, None, "file is missing"):
        read_skb(skb_dir)


def test_missing_directory(tmp_path):
    with pytest.raises(SKBFormatError, match="SKB directory does not exist"):
        read_skb(tmp_path / "absent")


def test_unknown_node_type(skb_dir):
    edit(skb_dir / "nodes.parquet", type=(2, "planet"))
    with raises(skb_dir, "nodes.parquet", 2, r"unknown node type 'planet' \(schema has \['brand', 'product'\]\)"):
        read_skb(skb_dir)


def test_node_ids_out_of_place(skb_dir):
    edit(skb_dir / "nodes.parquet", node_id=(1, 5))
    with raises(skb_dir, "nodes.parquet", 1, "node_id 5 out of place"):
        read_skb(skb_dir)


def test_duplicate_key(skb_dir):
    edit(skb_dir / "nodes.parquet", key=(3, "p2"))
    with raises(skb_dir, "nodes.parquet", 3, "duplicate key 'p2'"):
        read_skb(skb_dir)


def test_node_without_name(skb_dir):
    edit(skb_dir / "nodes.parquet", name=(1, None))
    with raises(skb_dir, "nodes.parquet", 1, "node has no name"):
        read_skb(skb_dir)


def test_missing_columns(skb_dir):
    frame = pq.read_table(skb_dir / "nodes.parquet").to_pandas()
    pq.write_table(
        pa.Table.from_pandas(frame.drop(columns=["description"]), preserve_index=False), skb_dir / "nodes.parquet"
    )
    with raises(skb_dir, "nodes.parquet", None, r"missing text field columns \['description'\]"):
        read_skb(skb_dir)
    pq.write_table(pa.Table.from_pandas(frame.drop(columns=["type"]), preserve_index=False), skb_dir / "nodes.parquet")
    with raises(skb_dir, "nodes.parquet", None, r"missing columns \['type'\]"):
        read_skb(skb_dir)


def test_unknown_relation(skb_dir):
    edit(skb_dir / "edges.parquet", rel=(1, "likes"))
    with raises(skb_dir, "edges.parquet", 1, "unknown relation 'likes'"):
        read_skb(skb_dir)


@pytest.mark.parametrize("end, value", [("dst", 99), ("src", -1)])
def test_edge_to_a_missing_node(skb_dir, end, value):
    edit(skb_dir / "edges.parquet", **{end: (2, value)})
    with raises(skb_dir, "edges.parquet", 2, rf"edge {end} {value} is not a node \(valid ids are 0..3\)"):
        read_skb(skb_dir)


def test_relation_between_the_wrong_types(skb_dir):
    edit(skb_dir / "edges.parquet", dst=(2, 2))  # has_brand product -> product
    with raises(skb_dir, "edges.parquet", 2, "relation 'has_brand' between types 'product' and 'product' contradicts"):
        read_skb(skb_dir)


def test_relation_in_the_reverse_direction_is_fine(skb_dir):
    edit(skb_dir / "edges.parquet", src=(1, 3), dst=(1, 0))  # brand -> product
    assert len(read_skb(skb_dir).edges) == 3


def test_answer_id_that_is_not_a_node(skb_dir):
    frame = pq.read_table(skb_dir / "queries.parquet").to_pandas()
    frame.at[1, "answer_ids"] = [1, 42]
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), skb_dir / "queries.parquet")
    with raises(skb_dir, "queries.parquet", 1, "answer id 42 is not a node"):
        read_skb(skb_dir)


@pytest.mark.parametrize(
    "column, value, problem",
    [
        ("split", "dev", r"unknown split 'dev'"),
        ("qid", 7, "duplicate qid 7"),
        ("answer_ids", [], "query has no answer"),
    ],
)
def test_bad_queries(skb_dir, column, value, problem):
    frame = pq.read_table(skb_dir / "queries.parquet").to_pandas()
    frame.at[1, column] = value
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), skb_dir / "queries.parquet")
    with raises(skb_dir, "queries.parquet", 1, problem):
        read_skb(skb_dir)


def test_queries_read_from_another_file_are_named_as_such(skb_dir, tmp_path):
    other = tmp_path / "elsewhere.parquet"
    frame = pq.read_table(skb_dir / "queries.parquet").to_pandas()
    frame.at[0, "answer_ids"] = [9]
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), other)
    with pytest.raises(SKBFormatError, match=f"^{re.escape(str(other))}, row 0: answer id 9 is not a node"):
        read_skb(skb_dir, queries_file=other)


@pytest.mark.parametrize("file", ["nodes.parquet", "edges.parquet", "queries.parquet"])
def test_corrupt_parquet(skb_dir, file):
    data = (skb_dir / file).read_bytes()
    (skb_dir / file).write_bytes(data[: len(data) // 2])
    with raises(skb_dir, file, None, "not a readable parquet file"):
        read_skb(skb_dir)


@pytest.mark.parametrize(
    "content, row, problem",
    [
        ("{not json", None, "not valid JSON"),
        ("[]", None, "expected a JSON object"),
        ('{"name": "x", "node_types": {}}', None, "missing key 'relations'"),
        ('{"name": "x", "node_types": ["product"], "relations": []}', None, "'node_types' must be a non-empty object"),
        ('{"name": "x", "node_types": {"a": {}}, "relations": {}}', None, "'relations' must be a list"),
        (
            '{"name": "x", "node_types": {"a": {"text_fields": "desc"}}, "relations": []}',
            None,
            "node type 'a': 'text_fields' must be a list of strings",
        ),
        (
            '{"name": "x", "node_types": {"a": {"text_fields": ["name"]}}, "relations": []}',
            None,
            r"node type 'a': text field names \['name'\] are reserved",
        ),
        (
            '{"name": "x", "node_types": {"a": {"text_fields": []}}, "relations": [{"name": "r", "src": "a"}]}',
            0,
            "a relation needs 'name', 'src' and 'dst'",
        ),
        (
            '{"name": "x", "node_types": {"a": {"text_fields": []}}, "relations": '
            '[{"name": "r", "src": "a", "dst": "a"}, {"name": "r", "src": "a", "dst": "b"}]}',
            1,
            "relation 'r': unknown dst node type 'b'",
        ),
        (
            '{"name": "x", "node_types": {"a": {"text_fields": []}}, "relations": '
            '[{"name": "r", "src": "a", "dst": "a"}, {"name": "r", "src": "a", "dst": "a"}]}',
            None,
            "duplicate relation entries",
        ),
    ],
)
def test_bad_schema_json(skb_dir, content, row, problem):
    (skb_dir / "schema.json").write_text(content)
    with raises(skb_dir, "schema.json", row, problem):
        read_skb(skb_dir)


# ------------------------------------------------------------------------------------------ crash safety


def _listing(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir())


def test_write_skb_refuses_an_invalid_skb_and_keeps_the_previous_version(skb_dir):
    bad = toy_skb()
    bad.edges.loc[0, "dst"] = 3  # also_buy product -> brand
    before = {f: (skb_dir / f).read_bytes() for f in _listing(skb_dir)}
    with pytest.raises(SKBFormatError, match=r"^<memory>/edges\.parquet, row 0: relation 'also_buy'"):
        write_skb(bad, skb_dir)
    assert {f: (skb_dir / f).read_bytes() for f in _listing(skb_dir)} == before
    assert _listing(skb_dir.parent) == ["toy"]


def test_a_crash_midway_keeps_the_previous_version_and_leaves_no_half_written_dir(skb_dir, monkeypatch):
    write_table = pq.write_table

    def crash_on_edges(table, where, *args, **kwargs):
        if str(where).endswith("edges.parquet"):
            raise OSError("disk full")
        return write_table(table, where, *args, **kwargs)

    changed = toy_skb()
    changed.nodes.loc[0, "name"] = "Boot"
    monkeypatch.setattr(pq, "write_table", crash_on_edges)
    with pytest.raises(OSError, match="disk full"):
        write_skb(changed, skb_dir)
    monkeypatch.undo()
    assert _listing(skb_dir.parent) == ["toy"]  # no temporary directory left behind
    assert read_skb(skb_dir).nodes["name"][0] == "Shoe"
    write_skb(changed, skb_dir)
    assert read_skb(skb_dir).nodes["name"][0] == "Boot"
    assert _listing(skb_dir.parent) == ["toy"]


def test_validate_in_memory_names_the_row():
    skb = toy_skb()
    skb.queries.at[0, "answer_ids"] = [4]
    with pytest.raises(SKBFormatError, match=r"queries\.parquet, row 0: answer id 4 is not a node"):
        validate(skb)


def test_schema_json_is_what_design_md_says(skb_dir):
    obj = json.loads((skb_dir / "schema.json").read_text())
    assert obj == {
        "name": "toy",
        "node_types": {"product": {"text_fields": ["description"]}, "brand": {"text_fields": []}},
        "relations": [
            {"name": "also_buy", "src": "product", "dst": "product"},
            {"name": "has_brand", "src": "product", "dst": "brand"},
        ],
    }


# ------------------------------------------------------------------------------------------ hostile user SKBs


def replace_column(file: Path, column: str, values: list) -> None:
    frame = pq.read_table(file).to_pandas()
    frame[column] = pd.Series(values, dtype=object)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), file)


@pytest.mark.parametrize(
    "file, column, values, row, problem",
    [
        ("queries.parquet", "qid", ["q7", "q8"], 0, "qid 'q7' is not an integer"),
        ("queries.parquet", "answer_ids", [0, 1], 0, "answer_ids must be a list of node ids, got 0"),
        ("queries.parquet", "answer_ids", [["p1"], ["p2"]], 0, "answer id 'p1' is not an integer node id"),
        ("queries.parquet", "query", [None, "a stove"], 0, "query text is missing"),
        ("queries.parquet", "query", ["a shoe", "  "], 1, "query text is empty"),
        ("edges.parquet", "src", [0.0, float("nan"), 1.0], 1, "edge src nan is not an integer node id"),
        ("edges.parquet", "dst", [1.0, 3.5, 3.0], 1, "edge dst 3.5 is not an integer node id"),
        ("nodes.parquet", "node_id", ["0", "1", "2", "3"], 0, "node_id '0' is not an integer"),
    ],
)
def test_wrongly_typed_columns_are_one_line_errors(skb_dir, file, column, values, row, problem):
    replace_column(skb_dir / file, column, values)
    with raises(skb_dir, file, row, problem):
        read_skb(skb_dir)


def test_integral_floats_as_edge_ids_are_accepted(skb_dir):
    replace_column(skb_dir / "edges.parquet", "src", [0.0, 0.0, 1.0])
    assert read_skb(skb_dir).edges["src"].tolist() == [0, 0, 1]


@pytest.mark.parametrize(
    "node_types, relations, problem",
    [
        ({"a": {"text_fields": []}, "A": {"text_fields": []}}, [], "node types 'A' and 'a' differ only in case"),
        (
            {"a": {"text_fields": []}},
            [{"name": "r", "src": "a", "dst": "a"}, {"name": "R", "src": "a", "dst": "a"}],
            "relations 'R' and 'r' differ only in case",
        ),
    ],
)
def test_names_differing_only_in_case_are_refused(skb_dir, node_types, relations, problem):
    (skb_dir / "schema.json").write_text(json.dumps({"name": "x", "node_types": node_types, "relations": relations}))
    with raises(skb_dir, "schema.json", None, problem):
        read_skb(skb_dir)


def test_aliases_round_trip_and_read_in_documents(tmp_path):
    skb = toy_skb()
    skb.nodes["aliases"] = [["Sneaker", "Trainer"], [], None, ["ACME Corp"]]
    back = read_skb(write_skb(skb, tmp_path / "aliased"))
    assert [back.aliases_of(i) for i in range(4)] == [["Sneaker", "Trainer"], [], [], ["ACME Corp"]]
    assert back.alias_pairs() == [(0, "Sneaker"), (0, "Trainer"), (3, "ACME Corp")]
    assert back.document(0).endswith("aliases: Sneaker; Trainer")  # not in a text field: the document gets them
    assert "aliases" not in back.document(1)


def test_an_skb_without_aliases_has_none(skb_dir):
    skb = read_skb(skb_dir)
    assert "aliases" not in skb.nodes and skb.alias_pairs() == [] and skb.aliases_of(0) == []


@pytest.mark.parametrize(
    "value, problem",
    [("Sneaker", "aliases must be a list of strings"), (["ok", ""], "alias '' is not a non-empty string")],
)
def test_bad_aliases_name_the_row(tmp_path, value, problem):
    skb = toy_skb()
    skb.nodes["aliases"] = [[], [], None, []]
    skb.nodes.at[2, "aliases"] = value
    with pytest.raises(SKBFormatError, match=f"nodes.parquet, row 2: {problem}"):
        validate(skb)


def test_aliases_from_text_fields_leave_the_name_and_repeats_out():
    nodes = pd.DataFrame({"name": ["TP53", "MDM2"], "alias": ["p53; TP53 | LFS1", None], "synonyms": ["p53", None]})
    assert aliases_from_fields(nodes, ("alias", "synonyms", "absent")) == [["p53", "LFS1"], []]

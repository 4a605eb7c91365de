"""`grasp data import`: CSV and JSON lines files, and a Bolt graph database (the suite's server), to a user SKB."""

from __future__ import annotations

import json

import neo4j
import pytest

from grasp_core.cli import main
from grasp_core.errors import SKBFormatError
from grasp_core.questions.wording import WORDING_FILE
from grasp_core.skb.format import read_skb
from grasp_core.sources.importer import import_files

NODES = [
    {
        "id": "a1",
        "type": "author",
        "name": "Ursula K. Le Guin",
        "aliases": ["Le Guin", "U. K. Le Guin"],
        "bio": "American writer of speculative fiction",
    },
    {
        "id": "a2",
        "type": "author",
        "name": "Stanislaw Lem",
        "aliases": [],
        "bio": "Polish writer of science fiction and essays",
    },
    {
        "id": "b1",
        "type": "book",
        "name": "The Dispossessed",
        "summary": "An anarchist moon and its twin planet",
        "genre": "utopian fiction; science fiction",
    },
    {
        "id": "b2",
        "type": "book",
        "name": "Solaris",
        "summary": "A sentient ocean studied by scientists",
        "genre": "science fiction",
    },
    {
        "id": "b3",
        "type": "book",
        "name": "A Wizard of Earthsea",
        "summary": "A young wizard on an archipelago",
        "genre": "fantasy",
    },
    {"id": "g1", "type": "genre", "name": "Science fiction"},
]
EDGES = [
    ("a1", "writes", "b1"),
    ("a2", "writes", "b2"),
    ("a1", "writes", "b3"),
    ("b1", "in_genre", "g1"),
    ("b2", "in_genre", "g1"),
]


def _csv(tmp_path, nodes=NODES, edges=EDGES):
    cols = ["id", "type", "name", "aliases", "bio", "summary", "genre"]
    rows = [",".join(cols)]
    for n in nodes:
        values = [n.get(c, "") if c != "aliases" else "|".join(n.get("aliases", [])) for c in cols]
        rows.append(",".join(f'"{v}"' for v in values))
    (tmp_path / "nodes.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "edges.csv").write_text("src,rel,dst\n" + "".join(f"{a},{r},{b}\n" for a, r, b in edges))
    return tmp_path / "nodes.csv", tmp_path / "edges.csv"


def test_csv_import_infers_the_schema_and_writes_a_valid_skb_with_its_wording(tmp_path):
    nodes, edges = _csv(tmp_path)
    skb = import_files(tmp_path / "books", nodes, edges)
    back = read_skb(tmp_path / "books", with_queries=False)
    assert back.schema.name == "books" and back.num_nodes == 6 and len(back.edges) == 5
    assert back.schema.node_types == {"author": ("bio",), "book": ("summary", "genre"), "genre": ()}
    assert {(r.name, r.src, r.dst) for r in back.schema.relations} == {
        ("writes", "author", "book"),
        ("in_genre", "book", "genre"),
    }
    assert list(back.nodes["key"]) == ["a1", "a2", "b1", "b2", "b3", "g1"]
    assert back.nodes.loc[2, "genre"] == "utopian fiction; science fiction" and back.nodes.loc[5, "summary"] is None
    assert skb.nodes.loc[0, "aliases"] == ["Le Guin", "U. K. Le Guin"] and skb.nodes.loc[1, "aliases"] == []
    wording = json.loads((tmp_path / "books" / WORDING_FILE).read_text())
    hops = {(h["relation"], h["from"], h["to"]): h["phrases"] for h in wording["hops"]}
    assert hops[("writes", "author", "book")] == ["that {x} writes"] and hops[("writes", "book", "author")] == [
        "writing {x}"
    ]
    assert wording["fields"]["genre"][0] == "with genre {p}"  # a field of short terms


def test_json_lines_import_equals_the_csv_import_and_keeps_an_edited_wording(tmp_path):
    nodes, edges = _csv(tmp_path)
    import_files(tmp_path / "from_csv", nodes, edges)
    (tmp_path / "nodes.jsonl").write_text("".join(json.dumps(n) + "\n" for n in NODES))
    (tmp_path / "edges.jsonl").write_text(
        "".join(json.dumps({"src": a, "rel": r, "dst": b}) + "\n" for a, r, b in EDGES)
    )
    (tmp_path / "from_jsonl").mkdir()
    (tmp_path / "from_jsonl" / WORDING_FILE).write_text('{"types": {"book": [["novel", "novels"]]}}')
    import_files(tmp_path / "from_jsonl", tmp_path / "nodes.jsonl", tmp_path / "edges.jsonl")
    a, b = read_skb(tmp_path / "from_csv"), read_skb(tmp_path / "from_jsonl")
    assert a.nodes.drop(columns="bio").equals(b.nodes.drop(columns="bio")) and a.edges.equals(b.edges)
    assert json.loads((tmp_path / "from_jsonl" / WORDING_FILE).read_text()) == {
        "types": {"book": [["novel", "novels"]]}
    }


@pytest.mark.parametrize(
    "nodes, edges, message",
    [
        (NODES + [NODES[0]], EDGES, "nodes.csv: line 8: duplicate id 'a1' (first at line 2)"),
        (NODES, EDGES + [("a1", "writes", "b9")], "edges.csv: line 7: edge dst 'b9' is not the id of a node"),
        ([{**NODES[0], "name": ""}] + NODES[1:], EDGES, "nodes.csv: line 2: node 'a1' has no name"),
    ],
)
def test_bad_files_fail_in_one_line_naming_file_and_line_and_write_nothing(tmp_path, nodes, edges, message):
    n, e = _csv(tmp_path, nodes, edges)
    with pytest.raises(SKBFormatError) as err:
        import_files(tmp_path / "kb", n, e)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "kb").exists()


def test_a_given_schema_is_enforced_and_the_cli_imports_under_the_user_skb_root(tmp_path, monkeypatch, capsys):
    n, e = _csv(tmp_path)
    schema = {
        "name": "x",
        "node_types": {
            "author": {"text_fields": ["bio"]},
            "book": {"text_fields": ["summary", "genre"]},
            "genre": {"text_fields": []},
        },
        "relations": [{"name": "writes", "src": "author", "dst": "book"}],
    }
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    with pytest.raises(
        SKBFormatError,
        match="edges.csv: line 5: relation 'in_genre' between types 'book' and 'genre' is not in the schema",
    ):
        import_files(tmp_path / "kb", n, e, tmp_path / "schema.json")
    monkeypatch.setenv("GRASP_USER_SKBS", str(tmp_path / "user"))
    assert main(["data", "import", "shelf", "--nodes", str(n), "--edges", str(e)]) == 0
    assert "imported 6 nodes (3 types), 5 edges (2 relations)" in capsys.readouterr().out
    assert read_skb(tmp_path / "user" / "shelf").schema.name == "shelf"
    assert main(["data", "import", "hpo", "--nodes", str(n), "--edges", str(e)]) == 2
    assert "built-in dataset" in capsys.readouterr().err


def test_bolt_import_reads_labels_properties_and_relationship_types(bolt_server, tmp_path, monkeypatch):
    with neo4j.GraphDatabase.driver(bolt_server.uri, auth=(bolt_server.user, bolt_server.password)) as driver:
        with driver.session(database=bolt_server.database) as s:
            s.run("MATCH (n) DETACH DELETE n").consume()
            for n in NODES:
                props = {k: v for k, v in n.items() if k != "type" and v != []}
                s.run(f"CREATE (n:{n['type'].capitalize()}) SET n = $p", p=props).consume()
            for a, r, b in EDGES:
                s.run(f"MATCH (a {{id: $a}}), (b {{id: $b}}) CREATE (a)-[:{r.upper()}]->(b)", a=a, b=b).consume()
        try:
            monkeypatch.setenv("KB_PASSWORD", bolt_server.password)
            args = [
                "data",
                "import",
                str(tmp_path / "graph"),
                "--bolt",
                bolt_server.uri,
                "--bolt-user",
                bolt_server.user,
            ]
            assert main([*args, "--bolt-password-env", "KB_PASSWORD", "--bolt-database", bolt_server.database]) == 0
        finally:
            with driver.session(database=bolt_server.database) as s:
                s.run("MATCH (n) DETACH DELETE n").consume()
    skb = read_skb(tmp_path / "graph")
    assert skb.node_type_counts() == {"Author": 2, "Book": 3, "Genre": 1}
    assert {(r.name, r.src, r.dst) for r in skb.schema.relations} == {
        ("WRITES", "Author", "Book"),
        ("IN_GENRE", "Book", "Genre"),
    }
    by_key = skb.nodes.set_index("key")
    assert (
        by_key.loc["b2", "name"] == "Solaris"
        and by_key.loc["b2", "summary"] == "A sentient ocean studied by scientists"
    )
    keys = skb.nodes["key"].to_numpy()
    assert sorted(zip(keys[skb.edges["src"]], skb.edges["rel"], keys[skb.edges["dst"]])) == sorted(
        (a, r.upper(), b) for a, r, b in EDGES
    )

"""The STaRK loader: a tiny SKB written by the test in the stark-qa on-disk format, the real query files, errors."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from grasp_core.errors import SKBFormatError, UnknownDatasetError
from grasp_core.skb.format import read_skb, validate, write_skb
from grasp_core.sources.stark import HUMAN_QID_OFFSET, load_stark_graph, load_stark_queries, load_stark_skb

SHARED_QA = Path("/work/shared/data/stark_qa")
NAN = float("nan")

PRIME_NODE_TYPES = [
    "disease",
    "gene/protein",
    "molecular_function",
    "drug",
    "pathway",
    "anatomy",
    "effect/phenotype",
    "biological_process",
    "cellular_component",
    "exposure",
]
PRIME_RELATIONS = [
    "ppi",
    "carrier",
    "enzyme",
    "target",
    "transporter",
    "contraindication",
    "indication",
    "off-label use",
    "synergistic interaction",
    "associated with",
    "parent-child",
    "phenotype absent",
    "phenotype present",
    "side effect",
    "interacts with",
    "linked to",
    "expression present",
    "expression absent",
]


def save_files(folder: Path, **files) -> None:
    """What ``stark_qa.tools.io.save_files`` does: dicts pickled to ``<key>.pkl``, tensors ``torch.save``d."""
    folder.mkdir(parents=True, exist_ok=True)
    for key, value in files.items():
        if isinstance(value, dict):
            with open(folder / f"{key}.pkl", "wb") as handle:
                pickle.dump(value, handle)
        else:
            torch.save(value, folder / f"{key}.pt")


def _product(title, brand=None, **extra):
    info = {
        "review": extra.pop("review", []),
        "qa": extra.pop("qa", []),
        "asin": f"B-{title[:3]}",
        "title": title,
        "global_category": "Sports and Outdoors",
        "price": "$10",
        "feature": extra.pop("feature", []),
        "rank": "1 in Sports",
        "details": extra.pop("details", {}),
        "description": extra.pop("description", []),
    }
    if brand:
        info["brand"] = brand
    info.update(extra)
    return info


def write_amazon(root: Path) -> None:
    """As ``AmazonSKB.post_process`` caches it: products 0-2, then brand, category and color nodes."""
    node_info = {
        0: _product(
            "Trail running shoe",
            "Acme",
            category=["running"],
            color=["black"],
            feature=["Breathable mesh upper", "ASIN: B000XYZ"],
            description=["A light shoe", "for rocky trails."],
            details={"product_dimensions": "10 x 4 x 3 inches ; 1.2 pounds", "shipping_weight": "2 pounds"},
            review=[
                {"reviewerID": "r1", "summary": "ok", "reviewText": "Fine shoe", "vote": NAN, "overall": 4.0},
                {"reviewerID": "r2", "summary": "great", "reviewText": "Love it", "vote": "1,204", "overall": 5.0},
            ],
            qa=[{"questionType": "yes/no", "question": "Waterproof?", "answer": "No", "answerTime": "2015"}],
        ),
        1: _product("Camping stove", "Acme", category=["running"]),
        2: _product("Water bottle"),
        3: {"brand_name": "Acme"},
        4: {"category_name": "running"},
        5: {"color_name": "black"},
    }
    save_files(
        root / "processed" / "cache" / "brand-category-color",
        node_info=node_info,
        # also_buy 0->1 and 1->0 is one undirected edge
        edge_index=torch.LongTensor([[0, 1, 1, 0, 1, 0, 0], [1, 0, 2, 3, 3, 4, 5]]),
        edge_types=torch.LongTensor([0, 0, 1, 2, 2, 3, 4]),
        edge_type_dict={0: "also_buy", 1: "also_view", 2: "has_brand", 3: "has_category", 4: "has_color"},
        node_type_dict={0: "product", 1: "brand", 2: "category", 3: "color"},
        node_types=torch.LongTensor([0, 0, 0, 1, 2, 3]),
    )


def write_mag(root: Path) -> None:
    """As ``MagSKB._process_raw`` saves it (no type dictionaries: MagSKB hard-codes them)."""
    venue = {
        "OriginalVenue": -1,
        "JournalDisplayName": -1,
        "ConferenceSeriesDisplayName": -1,
        "ConferenceInstancesDisplayName": -1,
    }
    node_info = {
        0: {
            "id": 10,
            "mag_id": 2100,
            "DisplayName": "Ada Lovelace",
            "PaperCount": 12,
            "CitationCount": -1,
            "type": "author",
            "new_id": 0,
        },
        1: {
            "id": 3,
            "mag_id": 77,
            "DisplayName": "University of London",
            "PaperCount": 500,
            "CitationCount": 9000,
            "type": "institution",
            "new_id": 1,
        },
        2: {
            "id": 5,
            "mag_id": 88,
            "DisplayName": "Analytical engine",
            "PaperCount": -1,
            "CitationCount": -1,
            "type": "field_of_study",
            "new_id": 2,
        },
        3: {
            "id": 1,
            "mag_id": 901,
            "title": "Notes on the engine",
            "abstract": "We describe the engine.\r\n",
            "Date": "1843-01-01",
            "type": "paper",
            "new_id": 3,
            **venue,
            "JournalDisplayName": "Scientific Memoirs",
        },
        4: {
            "id": 2,
            "mag_id": 902,
            "title": NAN,
            "abstract": "A paper without a title.",
            "Date": -1,
            "type": "paper",
            "new_id": 4,
            **venue,
        },
    }
    save_files(
        root / "processed",
        node_info=node_info,
        edge_index=torch.LongTensor([[0, 3, 3, 0, 0], [1, 4, 2, 3, 4]]),
        edge_types=torch.LongTensor([0, 1, 2, 3, 3]),
        node_types=torch.LongTensor([0, 1, 2, 3, 3]),
    )


def write_prime(root: Path) -> None:
    """As ``PrimeSKB._process_raw`` saves it; kg.csv lists every edge in both directions."""
    t = {name: i for i, name in enumerate(PRIME_NODE_TYPES)}
    node_info = {
        0: {
            "id": "7157",
            "type": "gene/protein",
            "name": "TP53",
            "source": "NCBI",
            "details": {
                "_id": "7157",
                "_score": 1.0,
                "name": "tumor protein p53",
                "type_of_gene": "protein-coding",
                "alias": ["BCC7", "LFS1"],
                "genomic_pos": [{"chr": "17", "start": 7661779, "end": 7687538, "strand": -1}],
                "summary": "This gene encodes a tumor suppressor.",
                "generif": [
                    {"pubmed": 1, "text": "p53 regulates apoptosis."},
                    {"pubmed": 2, "text": "p53 is mutated in cancer."},
                ],
                "interpro": [{"desc": "p53 DNA-binding domain", "id": "IPR011615", "short_desc": "p53"}],
            },
        },
        1: {
            "id": "5044",
            "type": "disease",
            "name": "Li-Fraumeni syndrome",
            "source": "MONDO",
            "details": {
                "mondo_id": 5044,
                "mondo_name": "Li-Fraumeni syndrome",
                "mondo_definition": "A rare hereditary cancer syndrome.",
                "umls_description": NAN,
                "orphanet_prevalence": "1-9 / 100 000",
            },
        },
        2: {
            "id": "DB00001",
            "type": "drug",
            "name": "Lepirudin",
            "source": "DrugBank",
            "details": {
                "description": "Lepirudin is a recombinant hirudin.",
                "half_life": "1.3 hours",
                "molecular_weight": 6979.5,
            },
        },
        3: {"id": "1250", "type": "effect/phenotype", "name": "Seizure", "source": "HPO"},
        4: {
            "id": "R-HSA-109581",
            "type": "pathway",
            "name": "Apoptosis",
            "source": "REACTOME",
            "details": {
                "displayName": "Apoptosis",
                "speciesName": "Homo sapiens",
                "summation": "Apoptosis is programmed cell death.",
            },
        },
        5: {"id": "2113", "type": "anatomy", "name": "retina", "source": "UBERON"},
    }
    types = ["gene/protein", "disease", "drug", "effect/phenotype", "pathway", "anatomy"]
    one_way = [
        (0, "associated with", 1),
        (2, "target", 0),
        (1, "phenotype present", 3),
        (0, "interacts with", 4),
        (5, "expression present", 0),
    ]
    both = one_way + [(d, r, s) for s, r, d in one_way]
    save_files(
        root / "processed",
        node_info=node_info,
        edge_index=torch.LongTensor([[s for s, _, _ in both], [d for _, _, d in both]]),
        edge_types=torch.LongTensor([PRIME_RELATIONS.index(r) for _, r, _ in both]),
        edge_type_dict=dict(enumerate(PRIME_RELATIONS)),
        node_types=torch.LongTensor([t[x] for x in types]),
        node_type_dict=dict(enumerate(PRIME_NODE_TYPES)),
    )


WRITERS = {"amazon": write_amazon, "mag": write_mag, "prime": write_prime}


def write_qa(
    qa_dir: Path,
    synth: list[tuple[int, str, list[int]]],
    splits: dict[str, list[int]],
    human: list[tuple[int, str, list[int]]],
) -> None:
    (qa_dir / "stark_qa").mkdir(parents=True)
    (qa_dir / "split").mkdir()

    def rows(items):
        return "".join(f'{i},"{q}","{a}"\n' for i, q, a in items)

    (qa_dir / "stark_qa" / "stark_qa.csv").write_text("id,query,answer_ids\n" + rows(synth))
    (qa_dir / "stark_qa" / "stark_qa_human_generated_eval.csv").write_text(
        "id,query,answer_ids,answer_ids_source\n" + "".join(f'{i},"{q}","{a}","{a[:1]}"\n' for i, q, a in human)
    )
    for split, ids in splits.items():
        (qa_dir / "split" / f"{split}.index").write_text("\n".join(map(str, ids)) + "\n")


def node(skb_nodes, key: str) -> dict:
    row = skb_nodes[skb_nodes["key"] == key]
    assert len(row) == 1
    return {k: v for k, v in row.iloc[0].items() if isinstance(v, str) or k == "node_id"}


# ------------------------------------------------------------------------------------------- (a) tiny fixtures


def test_amazon_fixture_loads_with_stark_fields(tmp_path):
    write_amazon(tmp_path)
    schema, nodes, edges = load_stark_graph("amazon", tmp_path)
    assert nodes["type"].tolist() == ["product"] * 3 + ["brand", "category", "color"]
    assert nodes["key"].tolist() == [str(i) for i in range(6)]
    assert nodes["name"].tolist() == ["Trail running shoe", "Camping stove", "Water bottle", "Acme", "running", "black"]
    shoe = node(nodes, "0")
    assert shoe["brand"] == "Acme"
    assert (shoe["dimensions"], shoe["weight"]) == ("10 x 4 x 3 inches", "1.2 pounds")
    assert shoe["description"] == "A light shoe for rocky trails."
    assert shoe["features"] == "Breathable mesh upper"  # the ASIN line is dropped, as STaRK does
    # reviews ordered by votes ("1,204" first; a NaN vote counts 0)
    assert shoe["reviews"] == 'The review "great" states that "Love it".; The review "ok" states that "Fine shoe".'
    assert shoe["qa"] == 'The question is "Waterproof?", and the answer is "No".'
    assert "reviews" not in node(nodes, "2") and "brand" not in node(nodes, "2")
    assert schema.node_types["product"] == ("brand", "dimensions", "weight", "description", "features", "reviews", "qa")
    assert schema.node_types["brand"] == ()
    assert {(r.name, r.src, r.dst) for r in schema.relations} == {
        ("also_buy", "product", "product"),
        ("also_view", "product", "product"),
        ("has_brand", "product", "brand"),
        ("has_category", "product", "category"),
        ("has_color", "product", "color"),
    }
    assert list(edges.itertuples(index=False, name=None)) == [
        (0, "also_buy", 1),
        (1, "also_view", 2),
        (0, "has_brand", 3),
        (1, "has_brand", 3),
        (0, "has_category", 4),
        (0, "has_color", 5),
    ]


def test_mag_fixture_uses_the_builtin_type_dicts_and_drops_unknowns(tmp_path):
    write_mag(tmp_path)
    schema, nodes, edges = load_stark_graph("mag", tmp_path)
    assert nodes["type"].tolist() == ["author", "institution", "field_of_study", "paper", "paper"]
    assert node(nodes, "0") == {"node_id": 0, "key": "0", "type": "author", "name": "Ada Lovelace", "paper_count": "12"}
    assert node(nodes, "1")["citation_count"] == "9000"
    paper = node(nodes, "3")
    assert paper["abstract"] == "We describe the engine."
    assert (paper["date"], paper["venue"]) == ("1843-01-01", "Scientific Memoirs")
    untitled = node(nodes, "4")
    assert untitled["name"] == "Unknown" and "date" not in untitled and "venue" not in untitled
    assert schema.node_types == {
        "author": ("paper_count",),  # its only citation count is -1 (unknown)
        "institution": ("paper_count", "citation_count"),
        "field_of_study": (),
        "paper": ("abstract", "date", "venue"),
    }
    assert schema.relation_names == sorted(
        [
            "author___affiliated_with___institution",
            "paper___cites___paper",
            "paper___has_topic___field_of_study",
            "author___writes___paper",
        ]
    )
    assert schema.connects("author___writes___paper", "paper", "author")
    assert len(edges) == 5


def test_prime_fixture_keeps_details_as_fields_and_stores_each_edge_once(tmp_path):
    write_prime(tmp_path)
    schema, nodes, edges = load_stark_graph("prime", tmp_path)
    gene = node(nodes, "0")
    assert gene["name"] == "TP53" and gene["type"] == "gene/protein" and gene["source"] == "NCBI"
    assert gene["details_name"] == "tumor protein p53"  # 'name' is a reserved column
    assert gene["alias"] == "BCC7; LFS1"
    assert gene["genomic_pos"] == "chr: 17, start: 7661779, end: 7687538, strand: -1"
    assert gene["generif"] == "p53 regulates apoptosis.; p53 is mutated in cancer."
    assert gene["interpro"] == "p53 DNA-binding domain"
    assert not any(k.startswith("_") for k in gene)
    disease = node(nodes, "1")
    assert "mondo_id" not in disease and "umls_description" not in disease
    assert disease["mondo_definition"] == "A rare hereditary cancer syndrome."
    assert node(nodes, "2")["molecular_weight"] == "6979.5"
    seizure = {"node_id": 3, "key": "3", "type": "effect/phenotype", "name": "Seizure", "source": "HPO"}
    assert node(nodes, "3") == seizure
    assert schema.node_types["exposure"] == ()
    assert schema.node_types["drug"] == ("source", "description", "half_life", "molecular_weight")
    assert len(edges) == 5  # 10 directed kg.csv rows
    assert set(edges.itertuples(index=False, name=None)) == {
        (0, "associated with", 1),
        (2, "target", 0),
        (1, "phenotype present", 3),
        (0, "interacts with", 4),
        (5, "expression present", 0),
    }
    assert schema.connects("target", "gene/protein", "drug") and not schema.connects("target", "drug", "disease")


@pytest.mark.parametrize("name", ["amazon", "mag", "prime"])
def test_fixture_with_queries_is_a_valid_skb_that_round_trips(tmp_path, name):
    WRITERS[name](tmp_path / "skb")
    write_qa(
        tmp_path / "qa",
        synth=[(900, "first query", [0]), (500, "second query", [1, 2]), (700, "unsplit query", [1])],
        splits={"train": [900], "val": [500], "test": []},
        human=[(0, "a human query", [2])],
    )
    skb = load_stark_skb(name, tmp_path / "skb", tmp_path / "qa")
    validate(skb)
    q = skb.queries
    assert q["split"].tolist() == ["train", "val", "test-human"]  # the unsplit query is dropped
    expected_qids = [2, 0] if name == "amazon" else [900, 500]  # Amazon: rank among all query ids
    assert q["qid"].tolist() == [*expected_qids, HUMAN_QID_OFFSET]
    assert [list(a) for a in q["answer_ids"]] == [[0], [1, 2], [2]]
    back = read_skb(write_skb(skb, tmp_path / "out"))
    assert back.nodes["name"].tolist() == skb.nodes["name"].tolist()
    assert back.edges.equals(skb.edges) and back.schema == skb.schema
    assert back.document(0) == skb.document(0)


def test_answers_map_through_node_keys_and_unknown_answers_are_named(tmp_path):
    write_qa(tmp_path, synth=[(0, "q", [30, 10])], splits={"train": [0], "val": [], "test": []}, human=[(0, "h", [20])])
    q = load_stark_queries("mag", tmp_path, node_keys=["10", "20", "30"])
    assert [list(a) for a in q["answer_ids"]] == [[2, 0], [1]]
    with pytest.raises(SKBFormatError, match=r"stark_qa\.csv, row 0: answer id 30 is not a node"):
        load_stark_queries("mag", tmp_path, node_keys=["10", "20"])


def test_bad_query_files_are_named(tmp_path):
    write_qa(tmp_path, synth=[(0, "q", [1]), (1, "r", [])], splits={"train": [0], "val": [], "test": []}, human=[])
    with pytest.raises(SKBFormatError, match=r"stark_qa\.csv, row 1: answer_ids '\[\]' is not a non-empty list"):
        load_stark_queries("prime", tmp_path)
    (tmp_path / "stark_qa" / "stark_qa.csv").write_text("id,query,answer_ids\n0,q,[1]\n")
    (tmp_path / "split" / "val.index").write_text("7\n")
    with pytest.raises(SKBFormatError, match=r"val\.index, row 0: query id 7 is not in"):
        load_stark_queries("prime", tmp_path)
    (tmp_path / "split" / "val.index").write_text("0\n")
    with pytest.raises(SKBFormatError, match=r"val\.index, row 0: query id 0 is already in split 'train'"):
        load_stark_queries("prime", tmp_path)


# ------------------------------------------------------------------------------------------- (b) real QA files


@pytest.mark.parametrize(
    "name, qa, counts",
    [
        ("amazon", "amazon", {"train": 5910, "val": 1548, "test": 1642, "test-human": 81}),
        ("mag", "mag", {"train": 7993, "val": 2665, "test": 2665, "test-human": 84}),
        ("prime", "primekg", {"train": 6162, "val": 2241, "test": 2801, "test-human": 109}),
    ],
)
def test_real_stark_queries_load_with_the_documented_counts(name, qa, counts):
    q = load_stark_queries(name, SHARED_QA / qa)
    assert q["split"].value_counts().to_dict() == counts
    assert q["qid"].is_unique and q["qid"].dtype == np.int64
    synth = q[q["split"] != "test-human"]
    assert synth["qid"].max() < HUMAN_QID_OFFSET <= q[q["split"] == "test-human"]["qid"].min()
    assert all(len(a) > 0 for a in q["answer_ids"]) and q["query"].str.len().min() > 0


def test_real_amazon_qids_are_todays_ids():
    q = load_stark_queries("amazon", SHARED_QA / "amazon")
    synth = q[q["split"] != "test-human"]
    assert sorted(synth["qid"]) == list(range(9100))
    # old id 601168 is the first row of the csv; today's id is its rank among the old ids
    old_ids = sorted(
        int(line.split(",", 1)[0]) for line in (SHARED_QA / "amazon/stark_qa/stark_qa.csv").open() if line[:1].isdigit()
    )
    row = synth[synth["qid"] == old_ids.index(601168)].iloc[0]
    assert row["query"].startswith("Can you suggest some imported women's yoga pants")
    assert list(row["answer_ids"]) == [601168, 947318]
    first_test = int((SHARED_QA / "amazon/split/test.index").read_text().split()[0])
    assert synth[synth["qid"] == old_ids.index(first_test)]["split"].item() == "test"


# ------------------------------------------------------------------------------------------- (c) missing files


@pytest.mark.parametrize("name", ["amazon", "mag", "prime"])
def test_missing_processed_files_give_a_clear_error(tmp_path, name):
    with pytest.raises(SKBFormatError) as err:
        load_stark_skb(name, tmp_path / "nowhere", SHARED_QA / {"prime": "primekg"}.get(name, name))
    message = str(err.value)
    for f in ("node_info.pkl", "edge_index.pt", "edge_types.pt", "node_types.pt"):
        assert f in message
    assert ("node_type_dict.pkl" in message) == (name != "mag")
    assert f"grasp data fetch {name}" in message  # the command that downloads them
    folder = "processed/cache/brand-category-color" if name == "amazon" else "processed"
    assert str(tmp_path / "nowhere" / folder) in message


def test_a_partial_processed_dir_names_the_missing_file(tmp_path):
    write_prime(tmp_path)
    (tmp_path / "processed" / "edge_types.pt").unlink()
    with pytest.raises(SKBFormatError, match=r"missing: edge_types\.pt\)"):
        load_stark_graph("prime", tmp_path)


def test_corrupt_processed_files_are_named(tmp_path):
    write_mag(tmp_path)
    (tmp_path / "processed" / "edge_index.pt").write_bytes(b"garbage")
    with pytest.raises(SKBFormatError, match=r"edge_index\.pt: not a readable torch tensor file"):
        load_stark_graph("mag", tmp_path)
    write_mag(tmp_path)
    torch.save(torch.LongTensor([[0, 9], [1, 2]]), tmp_path / "processed" / "edge_index.pt")
    torch.save(torch.LongTensor([0, 1]), tmp_path / "processed" / "edge_types.pt")
    with pytest.raises(SKBFormatError, match=r"edge_index\.pt: edge 1 ends at node \[9, 2\] not in node_info\.pkl"):
        load_stark_graph("mag", tmp_path)


def test_unknown_name_and_missing_qa_dir(tmp_path):
    with pytest.raises(UnknownDatasetError):
        load_stark_queries("wikidata", tmp_path)
    with pytest.raises(SKBFormatError, match="grasp data fetch mag"):
        load_stark_queries("mag", tmp_path)


# ------------------------------------------------------------------------------------------- parity with stark-qa


@pytest.mark.slow
def test_fixtures_are_what_stark_qa_itself_loads(tmp_path):
    """The real stark-qa classes read the test's fixtures: same nodes, same undirected edges, same texts."""
    from stark_qa.skb import AmazonSKB, MagSKB, PrimeSKB  # ~20 s import, kept out of grasp_core

    for name, cls in (("amazon", AmazonSKB), ("mag", MagSKB), ("prime", PrimeSKB)):
        root = tmp_path / name
        WRITERS[name](root)
        (root / "schema").mkdir()  # MagSKB would download its raw-data schema otherwise
        theirs = cls(root=str(root), download_processed=False)
        schema, nodes, edges = load_stark_graph(name, root)
        assert [theirs.get_node_type_by_id(i) for i in range(len(theirs.node_info))] == nodes["type"].tolist()
        their_edges = {
            (theirs.edge_type_dict[int(t)], min(int(a), int(b)), max(int(a), int(b)))
            for (a, b), t in zip(theirs.edge_index.t().tolist(), theirs.edge_types)
        }
        ours = {(r, min(s, d), max(s, d)) for s, r, d in edges.itertuples(index=False, name=None)}
        assert ours == their_edges
        for i in range(len(nodes)):
            if nodes["name"][i] == "Unknown":
                continue
            doc = theirs.get_doc_info(i)
            for field in ("name", *schema.node_types[nodes["type"][i]]):
                value = nodes[field][i]
                if isinstance(value, str) and field not in (
                    "reviews",
                    "qa",
                    "features",
                    "description",
                    "alias",
                    "genomic_pos",
                    "generif",
                ):
                    assert value in doc, (name, i, field, value, doc)

"""Processed STaRK directories made by stark-qa's own processing and save code from tiny synthetic raw inputs
(only its network downloads are stubbed), in stark-qa's own download layout, loaded by our loader."""

from __future__ import annotations

import pickle
from pathlib import Path

import pandas as pd
import pytest

from grasp_core.skb.format import validate
from grasp_core.sources.stark import find_stark_dirs, load_stark_graph, load_stark_skb

pytestmark = pytest.mark.slow


@pytest.fixture
def offline(monkeypatch):
    """Every network download stark-qa (and TDC under it) could start fails the test."""
    import stark_qa.retrieval.dataset as qa_dataset
    import stark_qa.skb.amazon as amazon
    import stark_qa.skb.prime as prime
    import tdc.utils.load as tdc_load

    def no_network(*args, **kwargs):
        raise AssertionError(f"stark-qa tried to download: {args}")

    for module, name in (
        (prime, "hf_hub_download"),
        (prime, "download_hf_file"),
        (tdc_load, "dataverse_download"),
        (amazon, "hf_hub_download"),
        (amazon, "download_hf_file"),
        (amazon, "download_url"),
    ):
        monkeypatch.setattr(module, name, no_network)

    # load_qa lists the Hugging Face folder before reading it: the files are already in place
    monkeypatch.setattr(
        qa_dataset, "download_hf_folder", lambda repo, folder, repo_type, save_as_folder: save_as_folder
    )


def write_stark_qa(root: Path, name: str, rows: list[tuple[int, str, list[int]]], splits: dict, human: list) -> None:
    """QA files where stark-qa's ``load_qa(name, root)`` keeps them: ``<root>/<name>/{stark_qa,split}``."""
    base = root / name
    (base / "stark_qa").mkdir(parents=True)
    (base / "split").mkdir()
    for file, data in (("stark_qa.csv", rows), ("stark_qa_human_generated_eval.csv", human)):
        pd.DataFrame(data, columns=["id", "query", "answer_ids"]).to_csv(base / "stark_qa" / file, index=False)
    for split, ids in {**splits, "test-0.1": splits["test"][:1]}.items():
        (base / "split" / f"{split}.index").write_text("\n".join(map(str, ids)) + "\n")


PRIME_NODES = [  # (index, id, type, name)
    (0, "9796", "gene/protein", "PHYHIP"),
    (1, "7918", "gene/protein", "GPANK1"),
    (2, "DB00001", "drug", "Lepirudin"),
    (3, "5009", "disease", "heart failure"),
    (4, "R-HSA-1", "pathway", "Signal transduction"),
    (5, "GO:0005515", "molecular_function", "protein binding"),
    (6, "HP:0001635", "effect/phenotype", "Congestive heart failure"),
    (7, "UBERON:0000948", "anatomy", "heart"),
    (8, "GO:0007165", "biological_process", "signal transduction"),
    (9, "GO:0005737", "cellular_component", "cytoplasm"),
    (10, "CHEBI:1", "exposure", "tobacco smoke"),
]  # stark-qa's processing needs at least one node of each of Prime's ten types
PRIME_EDGES = [  # (x, relation, display_relation, y), listed in both directions as kg.csv does
    (0, "protein_protein", "ppi", 1),
    (2, "drug_protein", "target", 0),
    (2, "indication", "indication", 3),
    (2, "contraindication", "contraindication", 3),  # a second relation on the pair (drug 2, disease 3)
    (0, "pathway_protein", "interacts with", 4),
    (1, "molfunc_protein", "interacts with", 5),
    (3, "disease_phenotype_positive", "phenotype present", 6),
    (7, "anatomy_protein_present", "expression present", 0),
    (8, "bioprocess_protein", "interacts with", 1),
    (9, "cellcomp_protein", "interacts with", 0),
    (10, "exposure_disease", "linked to", 3),
]


def write_prime_raw(raw: Path) -> None:
    """kg.csv, the metadata pickle and TDC's local copies (primekg.tab and the drug/disease feature tables)."""
    raw.mkdir(parents=True)
    by_index = {n[0]: n for n in PRIME_NODES}
    rows = []
    for x, relation, display, y in PRIME_EDGES:
        for a, b in ((x, y), (y, x)):
            ia, ida, ta, na = by_index[a]
            ib, idb, tb, nb = by_index[b]
            rows.append([relation, display, ia, ida, ta, na, "SRC", ib, idb, tb, nb, "SRC"])
    kg = pd.DataFrame(
        rows,
        columns=["relation", "display_relation", "x_index", "x_id", "x_type", "x_name", "x_source"]
        + ["y_index", "y_id", "y_type", "y_name", "y_source"],
    )
    kg.to_csv(raw / "kg.csv", index=False)
    kg.to_csv(raw / "primekg.tab", index=False)  # TDC's PrimeKG loader reads its own copy (comma-separated)
    meta = {
        "gene/protein": {"PHYHIP": {"summary": "phytanoyl-CoA hydroxylase interacting protein", "alias": ["PAHX-AP1"]}},
        "pathway": {0: {"name": ["Signal transduction"], "summary": "signalling cascades"}},
        "molecular_function": {"GO:0005515": {"definition": "binding to a protein"}},
        "biological_process": {},
        "cellular_component": {},
    }
    with open(raw / "primekg_metadata_extended.pkl", "wb") as handle:
        pickle.dump(meta, handle)
    pd.DataFrame([{"node_index": 2, "description": "an anticoagulant", "half_life": "1.3 hours"}]).to_csv(
        raw / "primekg_drug_feature.tab", sep="\t", index=False
    )
    pd.DataFrame([{"node_index": 3, "mondo_definition": "the heart fails to pump enough blood"}]).to_csv(
        raw / "primekg_disease_feature.tab", sep="\t", index=False
    )


def test_prime_processed_by_stark_qa_loads_in_its_own_layout(tmp_path, offline):
    from stark_qa import load_qa
    from stark_qa.skb.prime import PrimeSKB

    root = tmp_path / "stark"  # the root given to stark-qa's load_skb / load_qa: <root>/prime/...
    write_prime_raw(root / "prime" / "raw")
    theirs = PrimeSKB(root=str(root / "prime"), download_processed=False)  # processes raw/ and saves processed/
    assert (root / "prime" / "processed" / "node_info.pkl").is_file()
    write_stark_qa(
        root,
        "prime",
        rows=[
            (0, "Which drug targets PHYHIP?", [2]),
            (1, "What treats heart failure?", [2]),
            (2, "PHYHIP partner?", [1]),
        ],
        splits={"train": [0], "val": [1], "test": [2]},
        human=[(0, "Proteins in signal transduction?", [0])],
    )
    their_qa = load_qa("prime", str(root))

    skb_dir, qa_dir = find_stark_dirs("prime", root, root)
    assert (skb_dir, qa_dir) == (root / "prime", root / "prime")
    skb = load_stark_skb("prime", skb_dir, qa_dir)
    validate(skb)
    assert skb.nodes["name"].tolist() == [n[3] for n in PRIME_NODES]
    assert skb.nodes["type"].tolist() == [theirs.get_node_type_by_id(i) for i in range(len(PRIME_NODES))]
    assert skb.nodes.loc[2, "description"] == "an anticoagulant" and skb.nodes.loc[2, "half_life"] == "1.3 hours"
    assert skb.nodes.loc[0, "summary"] == "phytanoyl-CoA hydroxylase interacting protein"
    assert skb.nodes.loc[5, "definition"] == "binding to a protein"
    edges = {(r, min(s, d), max(s, d)) for s, r, d in skb.edges.itertuples(index=False, name=None)}
    assert edges == {(display, min(x, y), max(x, y)) for x, _, display, y in PRIME_EDGES}
    # kg.csv lists both directions, so stark-qa's edge_index is already undirected and keeps every relation of a
    # pair (here indication and contraindication of drug 2 for disease 3), as we do
    theirs_edges = {
        (theirs.edge_type_dict[int(t)], min(a, b), max(a, b))
        for (a, b), t in zip(theirs.edge_index.t().tolist(), theirs.edge_types)
    }
    assert theirs_edges == edges and {r for r, a, b in edges if (a, b) == (2, 3)} == {"indication", "contraindication"}
    # the queries stark-qa reads are ours, split for split
    q = skb.queries.set_index("qid")
    for split, idx in their_qa.get_idx_split().items():
        if split == "test-0.1":
            continue
        for i in idx.tolist():
            query, qid, answers, _ = their_qa[i]
            assert q.loc[qid, "split"] == split and q.loc[qid, "query"] == query
            assert list(q.loc[qid, "answer_ids"]) == answers


def test_qa_is_found_in_the_hugging_face_and_github_layouts(tmp_path):
    for layout in ("qa/prime", "primekg", "qa/primekg"):
        root = tmp_path / layout.replace("/", "_")
        base = root / layout
        (base / "stark_qa").mkdir(parents=True)
        (base / "stark_qa" / "stark_qa.csv").write_text("id,query,answer_ids\n")
        skb_dir, qa_dir = find_stark_dirs("prime", root, root)
        assert qa_dir == base and skb_dir == root / "prime"
    (tmp_path / "hf" / "skb" / "mag" / "processed").mkdir(parents=True)
    (tmp_path / "hf" / "skb" / "mag" / "processed" / "node_info.pkl").write_bytes(b"")
    (tmp_path / "hf" / "qa" / "mag" / "stark_qa").mkdir(parents=True)
    (tmp_path / "hf" / "qa" / "mag" / "stark_qa" / "stark_qa.csv").write_text("id,query,answer_ids\n")
    assert find_stark_dirs("mag", tmp_path / "hf", tmp_path / "hf") == (
        tmp_path / "hf" / "skb" / "mag",
        tmp_path / "hf" / "qa" / "mag",
    )


def test_missing_qa_names_every_place_looked(tmp_path):
    from grasp_core.errors import SKBFormatError

    with pytest.raises(SKBFormatError) as err:
        find_stark_dirs("prime", tmp_path, tmp_path)
    for place in ("prime", "primekg", "qa/prime", "qa/primekg"):
        assert str(tmp_path / place) in str(err.value)
    assert "GRASP_STARK_QA_ROOT" in str(err.value)


def test_graph_loads_from_the_processed_folder_directly(tmp_path, offline):
    from stark_qa.skb.prime import PrimeSKB

    write_prime_raw(tmp_path / "prime" / "raw")
    PrimeSKB(root=str(tmp_path / "prime"), download_processed=False)
    schema, nodes, _ = load_stark_graph("prime", tmp_path / "prime" / "processed")
    assert len(nodes) == len(PRIME_NODES) and schema.connects("target", "drug", "gene/protein")


AMAZON_PRODUCTS = 22  # stark-qa keeps a colour only when more than 20 products have it


def write_amazon_raw(root: Path) -> None:
    """The UCSD Amazon files of one category (reviews, metadata, Q&A) and STaRK's sub-category list."""
    import gzip
    import json

    raw = root / "raw"
    raw.mkdir(parents=True)
    (root / "category_list.json").write_text(json.dumps(["running", "camping & hiking"]))
    asins = [f"B{i:09d}" for i in range(AMAZON_PRODUCTS)]
    meta, reviews = [], []
    for i, asin in enumerate(asins):
        meta.append(
            {
                "asin": asin,
                "title": f"Trail shoe {i}",
                "category": ["Sports & Outdoors", "Running" if i % 2 else "Camping & Hiking"],
                "price": "$50.00",
                "brand": "Salomon" if i < 11 else "by Merrell",
                "feature": [f"grip level {i}"],
                "rank": "1 in Sports",
                "details": {"Item Weight:": f"{i} ounces"},
                "description": [f"A shoe for trails, model {i}."],
                # product 0: both also-bought and also-viewed with product 1 (two relations on one pair)
                "also_buy": [asins[1]] if i == 0 else [],
                "also_view": [asins[1], asins[2]] if i == 0 else [],
            }
        )
        reviews.append(
            {
                "asin": asin,
                "reviewerID": f"R{i}",
                "summary": "good",
                "style": {"Color:": " Black"},
                "reviewText": f"Comfortable on long runs ({i}).",
                "vote": "2",
                "overall": 5.0,
                "verified": True,
                "reviewTime": "01 1, 2018",
            }
        )
    qa = [
        {
            "asin": asins[0],
            "questionType": "yes/no",
            "answerType": "Y",
            "question": "Waterproof?",
            "answer": "Yes.",
            "answerTime": "Jan 1, 2018",
        }
    ]
    category = "Sports_and_Outdoors"
    for file, rows, dump in (
        (f"{category}.json.gz", reviews, json.dumps),
        (f"meta_{category}.json.gz", meta, json.dumps),
        (f"qa_{category}.json.gz", qa, repr),  # stark-qa reads Q&A lines with eval()
    ):
        with gzip.open(raw / file, "wt") as handle:
            handle.writelines(dump(r) + "\n" for r in rows)


def test_amazon_processed_by_stark_qa_loads_from_its_cache_folder(tmp_path, offline, monkeypatch):
    from stark_qa.skb.amazon import AmazonSKB

    root = tmp_path / "stark"
    write_amazon_raw(root / "amazon")
    # with download_processed=False stark-qa never sets the sub-category path it then reads (a stark-qa bug)
    monkeypatch.setattr(AmazonSKB, "sub_category_path", str(root / "amazon" / "category_list.json"), raising=False)
    theirs = AmazonSKB(root=str(root / "amazon"), download_processed=False)
    assert (root / "amazon" / "processed" / "cache" / "brand-category-color" / "node_info.pkl").is_file()
    write_stark_qa(
        root,
        "amazon",
        rows=[(0, "A Salomon trail shoe?", [0]), (1, "A Merrell shoe for running?", [11]), (2, "Black shoe?", [3])],
        splits={"train": [0], "val": [1], "test": [2]},
        human=[(0, "Shoes bought with trail shoe 1?", [0])],
    )
    skb = load_stark_skb("amazon", *find_stark_dirs("amazon", root, root))
    validate(skb)
    nodes = skb.nodes
    assert nodes["type"].value_counts().to_dict() == {"product": AMAZON_PRODUCTS, "category": 2, "brand": 2, "color": 1}
    assert nodes["type"].tolist() == [theirs.get_node_type_by_id(i) for i in range(len(nodes))]
    assert nodes.loc[0, "name"] == "Trail shoe 0" and set(nodes.loc[nodes["type"] == "brand", "name"]) == {
        "Salomon",
        "Merrell",
    }
    assert "Comfortable on long runs (0)." in skb.document(0) and "Waterproof?" in skb.document(0)
    edges = {(r, min(s, d), max(s, d)) for s, r, d in skb.edges.itertuples(index=False, name=None)}
    assert {r for r, a, b in edges if (a, b) == (0, 1)} == {"also_buy", "also_view"}
    assert ("also_view", 0, 2) in edges
    assert sum(r == "has_color" for r, _, _ in edges) == AMAZON_PRODUCTS
    # stark-qa stores these edges one way and makes the graph undirected when it loads it
    # (torch_geometric's to_undirected(..., reduce="mean")): the two relations of the pair (0, 1) collapse into
    # one edge whose type id is the mean of theirs, rounded down: also_buy (0) and also_view (1) -> also_buy
    theirs_edges = [
        (theirs.edge_type_dict[int(t)], min(a, b), max(a, b))
        for (a, b), t in zip(theirs.edge_index.t().tolist(), theirs.edge_types)
    ]
    assert {r for r, a, b in theirs_edges if (a, b) == (0, 1)} == {"also_buy"}
    assert set(theirs_edges) == edges - {("also_view", 0, 1)}


MAG_RELATIONS = {  # ogbn-mag relation folder -> (reltype id as ogbn-mag numbers it, (src, dst) ogbn ids)
    "author___affiliated_with___institution": (0, [(0, 0), (1, 0)]),
    "paper___cites___paper": (1, [(1, 0), (2, 0), (2, 1)]),
    "paper___has_topic___field_of_study": (2, [(0, 0), (1, 1), (2, 0)]),
    "author___writes___paper": (3, [(0, 0), (1, 0), (1, 1), (0, 2)]),
}


def write_mag_raw(root: Path) -> None:
    """ogbn-mag's relation and mapping files, the papers' English titles/abstracts (stark-qa's paper100M cache)
    and the MAG attribute tables as stark-qa caches them after merging the MAG dump (``processed/mag_cache``)."""
    ogbn = root / "raw" / "ogbn_mag"
    for rel, (type_id, pairs) in MAG_RELATIONS.items():
        folder = ogbn / "raw" / "relations" / rel
        folder.mkdir(parents=True)
        pd.DataFrame(pairs).to_csv(folder / "edge.csv.gz", header=False, index=False)
        pd.DataFrame([type_id] * len(pairs)).to_csv(folder / "edge_reltype.csv.gz", header=False, index=False)
        pd.DataFrame([len(pairs)]).to_csv(folder / "num-edge-list.csv.gz", header=False, index=False)
    (ogbn / "mapping").mkdir()
    pd.DataFrame({"ent idx": [0, 1, 2], "ent name": [901, 902, 903]}).to_csv(
        ogbn / "mapping" / "paper_entidx2name.csv.gz", index=False
    )
    text = root / "processed" / "paper100M_cache"
    text.mkdir(parents=True)
    pd.DataFrame(
        {
            "mag_id": [901, 902, 903],
            "title": ["Notes on the engine", "On computable numbers", "A mathematical theory of communication"],
            "abstract": ["We describe the engine.", "Numbers a machine can write.", "Entropy of a source."],
        }
    ).to_csv(text / "idx_title_abs.tsv", sep="\t", index=False)
    cache = root / "processed" / "mag_cache"
    cache.mkdir()
    counts = {"PaperCount": [12, -1], "CitationCount": [-1, 40]}
    pd.DataFrame(
        {"id": [0, 1], "AuthorId": [2100, 2101], "DisplayName": ["Ada Lovelace", "Alan Turing"], **counts}
    ).to_csv(cache / "author_data.csv", index=False)
    pd.DataFrame(
        {
            "id": [0],
            "AffiliationId": [77],
            "DisplayName": ["University of London"],
            "PaperCount": [500],
            "CitationCount": [9000],
        }
    ).to_csv(cache / "institution_data.csv", index=False)
    pd.DataFrame({"id": [0, 1], "FieldOfStudyId": [88, 89], "DisplayName": ["Computing", "Logic"], **counts}).to_csv(
        cache / "field_of_study_data.csv", index=False
    )
    pd.DataFrame(
        {
            "id": [0, 1, 2],
            "PaperId": [901, 902, 903],
            "Date": ["1843-01-01", "1936-11-12", -1],
            "OriginalVenue": ["Scientific Memoirs", -1, -1],
            "JournalDisplayName": [-1, "Proceedings of the LMS", -1],
            "ConferenceSeriesDisplayName": [-1, -1, -1],
            "ConferenceInstancesDisplayName": [-1, -1, -1],
        }
    ).to_csv(cache / "paper_data.csv", index=False)
    (root / "schema").mkdir()  # MagSKB fetches the MAG dump's schema unless the folder exists


def test_mag_processed_by_stark_qa_loads_in_its_own_layout(tmp_path, offline, monkeypatch):
    import stark_qa.skb.mag as mag

    root = tmp_path / "stark"
    write_mag_raw(root / "mag")

    def ogbn_mag_download(name: str, root: str) -> None:  # fetches ogbn-mag, whose files are in place; unused
        assert name == "ogbn-mag" and (Path(root) / "ogbn_mag" / "raw" / "relations").is_dir()

    monkeypatch.setattr(mag, "NodePropPredDataset", ogbn_mag_download)
    for name in ("hf_hub_download", "download_hf_file", "download_hf_folder", "download_url"):
        monkeypatch.setattr(mag, name, lambda *a, **k: pytest.fail(f"stark-qa tried to download: {a}"))
    theirs = mag.MagSKB(root=str(root / "mag"), download_processed=False)  # processes raw/ and saves processed/
    assert (root / "mag" / "processed" / "node_info.pkl").is_file()
    write_stark_qa(
        root,
        "mag",
        rows=[
            (5, "Papers by Ada Lovelace?", [5]),
            (6, "Papers on logic?", [6]),
            (7, "Papers citing the notes?", [6, 7]),
        ],
        splits={"train": [5], "val": [6], "test": [7]},
        human=[(0, "Turing's papers on computing?", [6])],
    )
    skb = load_stark_skb("mag", *find_stark_dirs("mag", root, root))
    validate(skb)
    nodes = skb.nodes
    assert nodes["type"].tolist() == [theirs.get_node_type_by_id(i) for i in range(len(nodes))]
    assert nodes["type"].value_counts().to_dict() == {"author": 2, "institution": 1, "field_of_study": 2, "paper": 3}
    by_name = dict(zip(nodes["name"], range(len(nodes))))
    assert {"Ada Lovelace", "University of London", "Logic", "On computable numbers"} <= set(by_name)
    paper = by_name["Notes on the engine"]
    assert (
        nodes.loc[paper, "abstract"] == "We describe the engine." and nodes.loc[paper, "venue"] == "Scientific Memoirs"
    )
    assert nodes.loc[by_name["On computable numbers"], "venue"] == "Proceedings of the LMS"
    edges = {(r, min(s, d), max(s, d)) for s, r, d in skb.edges.itertuples(index=False, name=None)}
    assert ("author___writes___paper", by_name["Ada Lovelace"], paper) in edges
    assert sum(r == "paper___cites___paper" for r, _, _ in edges) == 3
    theirs_edges = {
        (theirs.edge_type_dict[int(t)], min(a, b), max(a, b))
        for (a, b), t in zip(theirs.edge_index.t().tolist(), theirs.edge_types)
    }
    assert theirs_edges == edges  # MAG's relations never share a node pair: nothing collapses
    assert skb.queries.set_index("qid").loc[7, "split"] == "test"

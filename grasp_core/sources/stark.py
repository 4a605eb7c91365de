"""The real STaRK SKBs (``amazon``, ``mag``, ``prime``) from the stark-qa package's processed files on a local disk.

Nothing is downloaded here (``grasp data fetch``, :mod:`grasp_core.sources.stark_fetch`, puts the files in place):
``skb_dir`` is the dataset root the ``stark_qa`` SKB classes call ``root`` (where ``skb/<name>/processed.zip`` of the
``snap-stanford/stark`` dataset was unzipped), or directly the folder that holds the files:

- amazon: ``<skb_dir>/processed/cache/brand-category-color/`` (what ``AmazonSKB`` caches with its default
  ``meta_link_types``): ``node_info.pkl``, ``edge_index.pt``, ``edge_types.pt``, ``node_types.pt``,
  ``node_type_dict.pkl``, ``edge_type_dict.pkl``;
- prime: ``<skb_dir>/processed/``, the same six files;
- mag: ``<skb_dir>/processed/``: ``node_info.pkl``, ``edge_index.pt``, ``edge_types.pt``, ``node_types.pt``
  (``MagSKB`` hard-codes its type dictionaries; ``*_type_dict.pkl`` files are used when present).

Conversion decisions (the stark-qa sources ``stark_qa/skb/{amazon,mag,prime}.py`` are the reference):

- ``key`` = the STaRK node id as a string; ``node_id`` = rank of the STaRK id (the identity for every STaRK
  release, whose ids are dense), so gold answer ids keep their meaning.
- Names: Amazon product ``title`` and ``<type>_name`` for brand/category/color; MAG paper ``title`` and
  ``DisplayName`` otherwise; Prime ``name``. A node without one is named ``Unknown`` (as STaRK's documents say).
- Text fields follow each class's ``get_doc_info``: Amazon product brand, dimensions, weight (from
  ``details.product_dimensions``), description, features (without ``asin`` lines), the ``MAX_ENTRIES`` most voted
  reviews and the first ``MAX_ENTRIES`` Q&A pairs; MAG paper abstract, date and venue (original venue, else
  journal, else conference series, else conference instance), and paper/citation counts for authors, institutions
  and fields (``-1`` = unknown = absent); Prime ``source`` plus one field per ``details`` key (keys starting with
  ``_`` or containing ``_id`` are skipped as STaRK does; a key that clashes with a reserved column is prefixed with
  ``details_``). A type's fields are those that are non-empty for at least one of its nodes, in first-seen order.
- Edges: STaRK makes the graph undirected at load time; here every (relation, unordered pair) is stored once, in
  the orientation seen first. The schema's relations are the (relation, type, type) triples the edges use, each
  unordered type pair once.
- Queries: see :func:`load_stark_queries`.
"""

from __future__ import annotations

import json
import math
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from grasp_core.errors import SKBFormatError, UnknownDatasetError
from grasp_core.skb.format import (
    ALIAS_TEXT_FIELDS,
    ALIASES,
    HUMAN_QID_OFFSET,
    SKB,
    SPLITS,
    aliases_from_fields,
    validate,
)
from grasp_core.skb.schema import Relation, Schema

STARK_NAMES = ("amazon", "mag", "prime")
MAX_ENTRIES = 25  # reviews / Q&A pairs kept per Amazon product (STaRK's AmazonSKB.max_entries)
UNKNOWN_NAME = "Unknown"

_PROCESSED = {"amazon": "processed/cache/brand-category-color", "mag": "processed", "prime": "processed"}
_GRAPH_FILES = ("node_info.pkl", "edge_index.pt", "edge_types.pt", "node_types.pt")
_TYPE_DICT_FILES = ("node_type_dict.pkl", "edge_type_dict.pkl")
_MAG_TYPE_DICTS = (  # stark_qa.skb.mag.MagSKB.node_type_dict / edge_type_dict
    {0: "author", 1: "institution", 2: "field_of_study", 3: "paper"},
    {
        0: "author___affiliated_with___institution",
        1: "paper___cites___paper",
        2: "paper___has_topic___field_of_study",
        3: "author___writes___paper",
    },
)
_BASE_COLUMNS = ("node_id", "key", "type", "name")
_GENE_DETAILS = {"interpro": "desc", "generif": "text"}  # gene/protein detail lists of dicts -> the text inside
QA_CSV = "stark_qa/stark_qa.csv"
HUMAN_CSV = "stark_qa/stark_qa_human_generated_eval.csv"


def load_stark_skb(name: str, skb_dir: str | Path, qa_dir: str | Path) -> SKB:
    """The STaRK SKB ``name`` with its queries (all four splits), validated."""
    _check_name(name)
    schema, nodes, edges = load_stark_graph(name, skb_dir)
    queries = load_stark_queries(name, qa_dir, nodes["key"].tolist())
    skb = SKB(schema, nodes, edges, queries)
    validate(skb)
    return skb


def find_stark_dirs(name: str, stark_root: str | Path, qa_root: str | Path) -> tuple[Path, Path]:
    """(skb_dir, qa_dir) of ``name`` under the two roots, in any layout stark-qa or the STaRK sources produce:

    - SKB: ``<stark_root>/<name>`` (stark-qa's ``load_skb(name, root)``) or ``<stark_root>/skb/<name>`` (the
      Hugging Face dataset ``snap-stanford/stark``, unzipped in place); the first that holds the processed files;
    - QA: ``<qa_root>/<name>`` (stark-qa's ``load_qa(name, root)``), ``<qa_root>/qa/<name>`` (the Hugging Face
      dataset) or, for prime, ``<qa_root>/primekg`` and ``<qa_root>/qa/primekg`` (the STaRK GitHub repository).
    """
    _check_name(name)
    skb_dirs, qa_dirs = skb_candidates(name, stark_root), qa_candidates(name, qa_root)
    found = [
        d for d in skb_dirs if (d / _PROCESSED[name] / "node_info.pkl").is_file() or (d / "node_info.pkl").is_file()
    ]
    qa = [d for d in qa_dirs if (d / QA_CSV).is_file()]
    if not qa:
        raise SKBFormatError(
            str(qa_root),
            f"no STaRK {name} QA files under {qa_root}: looked for {QA_CSV} in "
            f"{', '.join(str(d) for d in qa_dirs)}. `grasp data fetch {name}` downloads them there (or fetch them "
            f"elsewhere with stark-qa's load_qa({name!r}, root) and set $GRASP_STARK_QA_ROOT to that root)",
        )
    return (found or skb_dirs)[0], qa[0]


def skb_candidates(name: str, stark_root: str | Path) -> list[Path]:
    """Where :func:`find_stark_dirs` looks for ``name``'s processed files, first match wins: stark-qa's layout
    (``<root>/<name>``, where ``grasp data fetch`` puts them), then the Hugging Face dataset's (``<root>/skb/<name>``)."""
    return [Path(stark_root) / name, Path(stark_root) / "skb" / name]


def qa_candidates(name: str, qa_root: str | Path) -> list[Path]:
    """Where :func:`find_stark_dirs` looks for ``name``'s QA files, first match wins: stark-qa's layout
    (``<root>/<name>``, where ``grasp data fetch`` puts them), the Hugging Face dataset's (``<root>/qa/<name>``), and
    for prime the STaRK GitHub repository's (``primekg``)."""
    qa_root = Path(qa_root)
    qa_names = [name, "primekg"] if name == "prime" else [name]
    return [qa_root / n for n in qa_names] + [qa_root / "qa" / n for n in qa_names]


def expected_files(name: str, skb_dir: str | Path) -> list[Path]:
    """The processed files :func:`load_stark_graph` reads for ``name`` (type dictionaries optional for MAG)."""
    folder = Path(skb_dir) / _PROCESSED[name]
    names = _GRAPH_FILES if name == "mag" else _GRAPH_FILES + _TYPE_DICT_FILES
    return [folder / f for f in names]


def load_stark_graph(name: str, skb_dir: str | Path) -> tuple[Schema, pd.DataFrame, pd.DataFrame]:
    """Schema, nodes and edges of a STaRK SKB from its processed files (see the module docstring)."""
    _check_name(name)
    folder = _processed_folder(name, Path(skb_dir))
    node_info: dict = _load_pickle(folder / "node_info.pkl")
    node_type_dict, edge_type_dict = _type_dicts(name, folder)
    stark_ids = np.array(sorted(int(k) for k in node_info), dtype=np.int64)
    node_types = _load_tensor(folder / "node_types.pt", ndim=1)
    if len(stark_ids) and (stark_ids[0] < 0 or stark_ids[-1] >= len(node_types)):
        raise SKBFormatError(
            str(folder / "node_types.pt"),
            f"has {len(node_types)} entries but node_info.pkl has node id {stark_ids[-1]}",
        )
    codes, code_index = np.unique(node_types[stark_ids], return_inverse=True)
    type_names = [_lookup(node_type_dict, c, folder / "node_type_dict.pkl", "node type") for c in codes]
    types = np.asarray(type_names, dtype=object)[code_index].tolist()
    nodes = _nodes(name, node_info, stark_ids, types)
    edges = _edges(folder, stark_ids, edge_type_dict)
    schema = Schema(name, _type_fields(nodes, node_type_dict), _relations(edges, nodes["type"].to_numpy()))
    nodes[ALIASES] = aliases_from_fields(nodes, ALIAS_TEXT_FIELDS)  # prime's gene aliases; amazon, mag: none
    return schema, nodes, edges


def load_stark_queries(name: str, qa_dir: str | Path, node_keys: Sequence[str] | None = None) -> pd.DataFrame:
    """The STaRK queries of ``qa_dir`` (``stark_qa/stark_qa.csv``, ``split/{train,val,test}.index`` and
    ``stark_qa/stark_qa_human_generated_eval.csv``) as a queries table (qid, split, query, answer_ids).

    - ``answer_ids`` are node ids of the SKB whose ``key`` column is ``node_keys`` (STaRK ids as strings); with
      ``node_keys=None`` they stay STaRK ids, which equal node ids for a loaded STaRK SKB.
    - Amazon: the query ids of the original STaRK repository are product-like ids; today's release numbers them
      by rank, so the Amazon qid (and the ids in the split files) is the rank of the id among all query ids — the
      identity on files that already use today's ids. MAG and Prime ids are kept.
    - Human-written queries get split ``test-human`` and qid ``HUMAN_QID_OFFSET + id`` (their ids restart at 0).
    - Rows are ordered by split (train, val, test, test-human), then qid. A query of the csv in no split is
      dropped; a split id that is not in the csv, or one in two splits, is an error.
    """
    _check_name(name)
    qa_dir = Path(qa_dir)
    split_files = {s: qa_dir / "split" / f"{s}.index" for s in ("train", "val", "test")}
    files = [qa_dir / QA_CSV, *split_files.values(), qa_dir / HUMAN_CSV]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise SKBFormatError(
            missing[0],
            f"STaRK QA file(s) missing: {', '.join(missing)}. The {name} QA directory must hold {QA_CSV}, "
            f"split/train.index, split/val.index, split/test.index and {HUMAN_CSV} (`grasp data fetch {name}` downloads them)",
        )
    synth = _read_qa_csv(qa_dir / QA_CSV)
    qids = synth["id"].rank(method="first").astype(np.int64) - 1 if name == "amazon" else synth["id"]
    renumber = dict(zip(synth["id"].tolist(), qids.tolist()))
    split_of: dict[int, str] = {}
    for split, file in split_files.items():
        for row, qid in enumerate(_read_index(file)):
            if qid not in renumber:
                raise SKBFormatError(str(file), f"query id {qid} is not in {QA_CSV}", row)
            if qid in split_of:
                raise SKBFormatError(str(file), f"query id {qid} is already in split {split_of[qid]!r}", row)
            split_of[qid] = split
    synth = synth.assign(qid=qids.to_numpy(), split=synth["id"].map(split_of)).dropna(subset=["split"])
    if len(synth) and synth["qid"].max() >= HUMAN_QID_OFFSET:
        raise SKBFormatError(
            str(qa_dir / QA_CSV), f"query ids reach {HUMAN_QID_OFFSET} (human-written qids start there)"
        )
    human = _read_qa_csv(qa_dir / HUMAN_CSV)
    human = human.assign(qid=human["id"] + HUMAN_QID_OFFSET, split="test-human")
    queries = pd.concat([synth, human], ignore_index=True)
    if node_keys is not None:
        node_of = {str(k): i for i, k in enumerate(node_keys)}
        queries["answer_ids"] = [
            _map_answers(answers, node_of, file, row)
            for answers, file, row in zip(queries["answer_ids"], queries["file"], queries["row"])
        ]
    order = queries["split"].map({s: i for i, s in enumerate(SPLITS)})
    queries = queries.assign(order=order).sort_values(["order", "qid"], ignore_index=True)
    return queries[["qid", "split", "query", "answer_ids"]].astype({"qid": np.int64})


# ---------------------------------------------------------------------------------------------------- files


def _check_name(name: str) -> None:
    if name not in STARK_NAMES:
        raise UnknownDatasetError(f"unknown STaRK dataset {name!r}: expected one of {', '.join(STARK_NAMES)}")


def _processed_folder(name: str, skb_dir: Path) -> Path:
    expected = expected_files(name, skb_dir)
    folder = expected[0].parent
    if not (folder / "node_info.pkl").is_file() and (skb_dir / "node_info.pkl").is_file():
        folder = skb_dir
    missing = [folder / f.name for f in expected if not (folder / f.name).is_file()]
    if missing:
        raise SKBFormatError(
            str(folder),
            f"the STaRK {name} SKB is incomplete or absent: expected the stark-qa processed files "
            f"{', '.join(f.name for f in expected)} in {folder} (missing: {', '.join(m.name for m in missing)}). "
            f"`grasp data fetch {name}` downloads them (or copy the unzipped skb/{name}/processed.zip of the "
            f"snap-stanford/stark dataset to {skb_dir}).",
        )
    return folder


def _load_pickle(file: Path) -> Any:
    try:
        with open(file, "rb") as handle:
            obj = pickle.load(handle)
    except Exception as exc:  # pickle raises many types on a corrupt file
        raise SKBFormatError(str(file), f"not a readable pickle ({exc})") from exc
    if not isinstance(obj, dict):
        raise SKBFormatError(str(file), f"expected a dict, found {type(obj).__name__}")
    return obj


def _load_tensor(file: Path, ndim: int) -> np.ndarray:
    try:
        tensor = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise SKBFormatError(str(file), f"not a readable torch tensor file ({exc})") from exc
    if not isinstance(tensor, torch.Tensor) or tensor.dim() != ndim:
        raise SKBFormatError(str(file), f"expected a {ndim}-d tensor")
    return tensor.long().numpy()


def _type_dicts(name: str, folder: Path) -> tuple[dict, dict]:
    if name == "mag" and not all((folder / f).is_file() for f in _TYPE_DICT_FILES):
        return _MAG_TYPE_DICTS
    return tuple(_load_pickle(folder / f) for f in _TYPE_DICT_FILES)


def _lookup(mapping: dict, code: Any, file: Path, what: str) -> str:
    try:
        return str(mapping[int(code)])
    except KeyError:
        raise SKBFormatError(str(file), f"{what} code {int(code)} is not in {sorted(mapping)}") from None


# ---------------------------------------------------------------------------------------------------- nodes


def _nodes(name: str, node_info: dict, stark_ids: np.ndarray, types: list[str]) -> pd.DataFrame:
    describe = {"amazon": _amazon_node, "mag": _mag_node, "prime": _prime_node}[name]
    records = []
    for stark_id, node_type in zip(stark_ids.tolist(), types):
        info = node_info[stark_id]
        node_name, fields = describe(info if isinstance(info, dict) else {}, node_type)
        records.append({"key": str(stark_id), "type": node_type, "name": node_name or UNKNOWN_NAME, **fields})
    nodes = pd.DataFrame.from_records(records, columns=_columns(records))
    nodes.insert(0, "node_id", np.arange(len(nodes), dtype=np.int64))
    return nodes


def _columns(records: list[dict]) -> list[str]:
    seen: dict[str, None] = {}
    for r in records:
        seen.update(dict.fromkeys(r))
    return list(seen)


def _type_fields(nodes: pd.DataFrame, node_type_dict: dict) -> dict[str, tuple[str, ...]]:
    """Each type's text fields: the columns non-empty for at least one of its nodes, in column order."""
    fields = [c for c in nodes.columns if c not in _BASE_COLUMNS]
    out = {}
    for node_type in dict.fromkeys(str(t) for t in node_type_dict.values()):
        present = nodes.loc[nodes["type"] == node_type, fields].notna().any()
        out[node_type] = tuple(f for f in fields if present[f])
    return out


def _amazon_node(info: dict, node_type: str) -> tuple[Any, dict]:
    if node_type != "product":
        return _text(info.get(f"{node_type}_name")), {}
    dimensions = weight = None
    details = info.get("details")
    if isinstance(details, dict) and isinstance(details.get("product_dimensions"), str):
        parts = details["product_dimensions"].split(" ; ")
        if len(parts) == 2:
            dimensions, weight = parts
    features = [f for f in info.get("feature") or [] if isinstance(f, str) and "asin" not in f.lower()]
    reviews = sorted(info.get("review") or [], key=lambda r: -_votes(r.get("vote")))[:MAX_ENTRIES]
    qa = (info.get("qa") or [])[:MAX_ENTRIES]
    return _text(info.get("title")), {
        "brand": _text(info.get("brand")),
        "dimensions": _text(dimensions),
        "weight": _text(weight),
        "description": _text(" ".join(d for d in info.get("description") or [] if isinstance(d, str))),
        "features": _text(features),
        "reviews": _text([f'The review "{r.get("summary")}" states that "{r.get("reviewText")}".' for r in reviews]),
        "qa": _text([f'The question is "{q.get("question")}", and the answer is "{q.get("answer")}".' for q in qa]),
    }


def _votes(vote: Any) -> int:
    try:
        return int(str(vote).replace(",", ""))
    except ValueError:
        return 0


def _mag_node(info: dict, node_type: str) -> tuple[Any, dict]:
    def get(key: str) -> str | None:
        value = info.get(key)
        return None if str(value) == "-1" else _text(value)

    if node_type != "paper":
        return get("DisplayName"), {"paper_count": get("PaperCount"), "citation_count": get("CitationCount")}
    venues = ("OriginalVenue", "JournalDisplayName", "ConferenceSeriesDisplayName", "ConferenceInstancesDisplayName")
    venue = next((v for v in map(get, venues) if v), None)
    return get("title"), {"abstract": get("abstract"), "date": get("Date"), "venue": venue}


def _prime_node(info: dict, node_type: str) -> tuple[Any, dict]:
    fields = {"source": _text(info.get("source"))}
    details = info.get("details")
    for key, value in details.items() if isinstance(details, dict) else ():
        key = str(key)
        if key.startswith("_") or "_id" in key:
            continue
        if node_type == "gene/protein" and key in _GENE_DETAILS:
            items = value if isinstance(value, list) else [value]
            value = [v.get(_GENE_DETAILS[key]) for v in items if isinstance(v, dict)]
        if node_type == "gene/protein" and key == "genomic_pos" and isinstance(value, list) and value:
            value = value[0]
        fields[f"details_{key}" if key in (*_BASE_COLUMNS, "source") else key] = _text(value)
    return _text(info.get("name")), fields


def _text(value: Any) -> str | None:
    """Render a node_info value as text: lists ``; ``-joined, dicts as ``key: value``; empty/NaN -> None."""
    if value is None:
        return None
    if isinstance(value, str):
        value = value.strip()
        return value if value and value != "nan" else None
    if isinstance(value, (list, tuple, np.ndarray)):
        return _text("; ".join(t for t in map(_text, value) if t))
    if isinstance(value, dict):
        return _text(", ".join(f"{k}: {t}" for k, t in ((k, _text(v)) for k, v in value.items()) if t))
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return None
        return str(int(value)) if float(value).is_integer() else str(value)
    return str(value)


# ---------------------------------------------------------------------------------------------------- edges


def _edges(folder: Path, stark_ids: np.ndarray, edge_type_dict: dict) -> pd.DataFrame:
    edge_index = _load_tensor(folder / "edge_index.pt", ndim=2)
    edge_types = _load_tensor(folder / "edge_types.pt", ndim=1)
    if edge_index.shape[0] != 2 or edge_index.shape[1] != len(edge_types):
        raise SKBFormatError(
            str(folder / "edge_index.pt"),
            f"shape {tuple(edge_index.shape)} does not match edge_types.pt ({len(edge_types)} edges); expected [2, E]",
        )
    ends = np.searchsorted(stark_ids, edge_index).clip(0, max(len(stark_ids) - 1, 0))
    unknown = stark_ids[ends] != edge_index if len(stark_ids) else np.ones_like(edge_index, dtype=bool)
    if unknown.any():
        column = int(np.flatnonzero(unknown.any(axis=0))[0])
        raise SKBFormatError(
            str(folder / "edge_index.pt"),
            f"edge {column} ends at node {edge_index[:, column].tolist()} not in node_info.pkl",
        )
    codes, rel_index = np.unique(edge_types, return_inverse=True)
    rel_names = [_lookup(edge_type_dict, c, folder / "edge_type_dict.pkl", "edge type") for c in codes]
    n = max(len(stark_ids), 1)
    lo, hi = np.minimum(ends[0], ends[1]), np.maximum(ends[0], ends[1])
    _, first = np.unique((rel_index.astype(np.int64) * n + lo) * n + hi, return_index=True)
    keep = np.sort(first)
    return pd.DataFrame(
        {
            "src": ends[0, keep].astype(np.int64),
            "rel": np.asarray(rel_names, dtype=object)[rel_index[keep]],
            "dst": ends[1, keep].astype(np.int64),
        }
    )


def _relations(edges: pd.DataFrame, node_types: np.ndarray) -> tuple[Relation, ...]:
    triples = pd.DataFrame({"rel": edges["rel"], "src": node_types[edges["src"]], "dst": node_types[edges["dst"]]})
    out: list[Relation] = []
    for rel, src, dst in triples.drop_duplicates().itertuples(index=False):
        if Relation(rel, dst, src) not in out:
            out.append(Relation(rel, src, dst))
    return tuple(out)


# ---------------------------------------------------------------------------------------------------- queries


def _read_qa_csv(file: Path) -> pd.DataFrame:
    try:
        frame = pd.read_csv(file, dtype={"query": str}, keep_default_na=False)
    except Exception as exc:
        raise SKBFormatError(str(file), f"not a readable csv ({exc})") from exc
    missing = [c for c in ("id", "query", "answer_ids") if c not in frame.columns]
    if missing:
        raise SKBFormatError(str(file), f"missing columns {missing} (expected id,query,answer_ids)")
    ids = pd.to_numeric(frame["id"], errors="coerce")
    if ids.isna().any():
        row = int(ids.isna().idxmax())
        raise SKBFormatError(str(file), f"id {frame['id'][row]!r} is not an integer", row)
    answers = [_parse_answers(text, file, row) for row, text in enumerate(frame["answer_ids"])]
    return pd.DataFrame(
        {
            "id": ids.astype(np.int64),
            "query": frame["query"],
            "answer_ids": answers,
            "file": str(file),
            "row": np.arange(len(frame)),
        }
    )


def _parse_answers(text: str, file: Path, row: int) -> list[int]:
    try:
        answers = json.loads(text)
    except ValueError:
        answers = None
    if not isinstance(answers, list) or not answers or not all(isinstance(a, int) for a in answers):
        raise SKBFormatError(str(file), f"answer_ids {text!r} is not a non-empty list of integers", row)
    return answers


def _read_index(file: Path) -> list[int]:
    lines = file.read_text().split()
    try:
        return [int(x) for x in lines]
    except ValueError as exc:
        raise SKBFormatError(str(file), f"expected one integer query id per line ({exc})") from exc


def _map_answers(answers: list[int], node_of: dict[str, int], file: str, row: int) -> list[int]:
    try:
        return [node_of[str(a)] for a in answers]
    except KeyError as exc:
        raise SKBFormatError(file, f"answer id {exc.args[0]} is not a node of the SKB", row) from None

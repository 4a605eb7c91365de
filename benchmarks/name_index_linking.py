"""What the HNSW name index changes in entity linking, and what it saves per question, against the exact index.

Run: ``python benchmarks/name_index_linking.py hpo [--root DIR] [--profile cpu] [--hnsw-from 10000]
[--questions 100]``; writes ``benchmarks/results/name_index_linking_<dataset>.json`` (with the run's record: commit,
machine, load, profile, date).

From the dataset's node embeddings, both name indexes are built with the product's constructor: the exact one
(``IndexFlatIP`` for every type) and an HNSW one (HNSW for a type whose names and aliases reach ``--hnsw-from`` rows,
the rest of ``IndexConfig()`` as it is). The profile's gazetteer extracts and links every question of the evaluation splits
with each; per split it reports the share of linked mentions whose links (node ids, per type, in order) are
identical, of mentions whose best link is, and of questions whose whole entity table is (mentions, types and
linked ids; the cosines differ in their last bits, since HNSW and the exact scan sum a dot product differently). Then the first
``--questions`` test questions are extracted one at a time with each index, interleaved, the median kept: the time
of the extraction stage as the answer path runs it (one BLAS thread; ``extraction_ms_p50``,
:func:`interleaved.p50_ms`).
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import interleaved
from harness import RESULTS, Run, load_components

from grasp_core.embed.config import IndexConfig
from grasp_core.embed.vector_index import NodeIndex
from grasp_core.entities.gazetteer import GazetteerExtractor
from grasp_core.entities.table import EntityRow, EntityTable

SPLITS = ("val", "val-human", "test", "test-human")


def agreement(exact: list[EntityTable], ann: list[EntityTable]) -> dict:
    rows = same_links = same_best = same_tables = 0
    for a, b in zip(exact, ann, strict=True):
        same_tables += [_ids(r) for r in a.rows] == [_ids(r) for r in b.rows]
        for ra, rb in zip(a.rows, b.rows, strict=True):
            if not ra.links:
                continue
            rows += 1
            same_links += _ids(ra)[-1] == _ids(rb)[-1]
            best_a = max((link for ls in ra.links.values() for link in ls), key=lambda x: x.score, default=None)
            best_b = max((link for ls in rb.links.values() for link in ls), key=lambda x: x.score, default=None)
            same_best += (best_a and best_a.node_id) == (best_b and best_b.node_id)
    return {
        "questions": len(exact),
        "linked_mentions": rows,
        "same_links": round(same_links / max(rows, 1), 4),
        "same_best_link": round(same_best / max(rows, 1), 4),
        "same_tables": round(same_tables / max(len(exact), 1), 4),
    }


def _ids(row: EntityRow) -> tuple:
    """What a row says apart from the cosines' last bits (HNSW and the exact scan sum a dot product differently)."""
    return row.mention, row.types, {t: [link.node_id for link in ls] for t, ls in row.links.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--root", default=None)
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--hnsw-from", type=int, default=10_000, help="name-index rows from which a type gets HNSW")
    args = parser.parse_args()
    run = Run(profile=args.profile, questions=args.questions, hnsw_from=args.hnsw_from)
    components = load_components(args.dataset, args.root, args.profile)
    cfg = dataclasses.replace(IndexConfig(), name_hnsw_min_size=args.hnsw_from)
    built, seconds = {}, {}
    for name, index_cfg in (("exact", dataclasses.replace(cfg, name_hnsw_min_size=2**62)), ("hnsw", cfg)):
        start = time.perf_counter()
        built[name] = NodeIndex.build(components.graph, components.embeddings, index_cfg)
        seconds[name] = round(time.perf_counter() - start, 1)
        print(f"[names] {name} index built in {seconds[name]} s", flush=True)
    kinds = {
        t: type(built["hnsw"].indexes[t, "name"]).__name__ + f" ({built['hnsw'].indexes[t, 'name'].ntotal} rows)"
        for t in built["hnsw"].node_types
    }
    extractors = {
        n: GazetteerExtractor(components.graph, i, components.encoder, components.profile.gazetteer)
        for n, i in built.items()
    }
    splits = {}
    for split in SPLITS:
        questions = components.split(split)["query"].tolist()
        if not questions:
            continue
        tables = {n: e.extract(questions) for n, e in extractors.items()}
        splits[split] = agreement(tables["exact"], tables["hnsw"])
        print(f"[names] {split}: {splits[split]}", flush=True)
    test = components.split("test")["query"].tolist()[: args.questions]
    result = {
        "dataset": args.dataset,
        "config": dataclasses.asdict(cfg),
        "name_indexes": kinds,
        "build_seconds": seconds,
        "agreement": splits,
        "extraction_ms_p50": interleaved.p50_ms({n: e.extract for n, e in extractors.items()}, test, warm_up=3),
        "timed_questions": len(test),
    }
    print(f"[names] extraction p50 ms: {result['extraction_ms_p50']}", flush=True)
    run.write(RESULTS / f"name_index_linking_{args.dataset}.json", result, quiet=True)


if __name__ == "__main__":
    main()

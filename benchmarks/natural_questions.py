"""Natural questions on hpo: anchor linking recall on test-human and the asked-type model's accuracy.

    python benchmarks/natural_questions.py --root dagster_home/artifacts --label after
    python benchmarks/natural_questions.py --root dagster_home/artifacts --label names_view --asked-type-only

Reads a finished hpo pipeline's artifacts under ``--root`` (SKB, queries, node vectors, name index), runs the
profile's entity extractor on the ``test-human`` questions and reports, over the anchors of their stored graph
queries (every node key a condition names, nested ones included; for a "what is the term for …" question the
named node itself): the share linked by some entity-table row (any of its links), and by the top link of a row.
Then fits the asked-type model (:mod:`grasp_core.rerank.asked_type`, when the code has it) on the ``train``
queries' vectors, texts and gold types and reports its accuracy per split (test-human only measured, never used
to choose), with the query vector alone beside it (``cue_window`` 0) when the code has request words, and the
names view's settings grid (chosen by the mean of val and val-human) when it has that view. Extraction
is timed warm, all questions of a split in one call and one question per call (as served), the least of
``REPEATS`` runs each (the machine is shared). Runs with any checkout's code on ``PYTHONPATH`` (``--label before``
with the code the artifacts were built with; the record's ``pythonpath`` says which). Writes
``benchmarks/results/natural_questions_<label>.json`` with the run's record (commit, machine, load average at the
start and the end, ``OMP_NUM_THREADS`` as ``threads``).
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from harness import RESULTS, Run, load_components, timed  # noqa: E402

from grasp_core.components import Components  # noqa: E402
from grasp_core.questions.human_queries import shape  # noqa: E402

HUMAN_SPLITS = ("test-human", "val-human")
REPEATS = 3  # timed runs of each extraction measurement (the least is reported)


def anchor_keys(graph_query: dict) -> list[str]:
    """Every node key a graph query names (the node itself for a term question)."""
    if "node" in graph_query:
        return [graph_query["node"]]
    keys = []
    for cond in graph_query.get("all", []):
        if "node" in cond:
            keys.append(cond["node"])
        if "via" in cond:
            keys += anchor_keys(cond["via"])
    return keys


def questions_of(split: str) -> list[dict]:
    """The question file of this checkout (read directly, so that older code on PYTHONPATH can be measured)."""
    file = (
        Path(__file__).resolve().parent.parent / "grasp_core" / "skb" / "data" / f"hpo_{split.replace('-', '_')}.jsonl"
    )
    return [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]


def extractor(components: Components):
    """The profile's gazetteer over the artifacts' name index; code from before aliases cannot read an index with
    alias rows, so it gets one built in memory from the node names alone (what it had)."""
    from grasp_core.embed.node_embeddings import NodeEmbeddings
    from grasp_core.embed.vector_index import NodeIndex
    from grasp_core.entities.gazetteer import GazetteerExtractor
    from grasp_core.errors import GraspError

    try:
        index = components.index
    except GraspError:
        e = components.embeddings
        index = NodeIndex.build(components.graph, NodeEmbeddings(e.name, e.doc, e.identity, e.meta))
    return GazetteerExtractor(components.graph, index, components.encoder, components.profile.gazetteer)


def fastest(run, repeats: int = REPEATS) -> float:
    """The least wall time in seconds of ``repeats`` runs (the machine is shared: the minimum is the least
    disturbed)."""
    return min(timed(run, n=repeats)) / 1e3


def linking_recall(components: Components, split: str, gazetteer) -> dict:
    questions = questions_of(split)
    key_to_id = dict(zip(components.graph.nodes["key"], components.graph.nodes["node_id"].astype(int)))
    texts = [q["query"] for q in questions]
    tables = gazetteer.extract(texts)
    seconds = fastest(lambda: gazetteer.extract(texts))
    single = fastest(lambda: [gazetteer.extract([t]) for t in texts])  # as served: one question per call
    per_shape: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for q, table in zip(questions, tables):
        linked = {link.node_id for row in table.rows for links in row.links.values() for link in links}
        top = {links[0].node_id for row in table.rows for links in row.links.values() if links}
        for key in anchor_keys(q["graph"]):
            node = key_to_id[key]
            per_shape[shape(q["graph"])].append((node in linked, node in top))
    every = [x for xs in per_shape.values() for x in xs]

    def share(xs, i):
        return round(100.0 * float(np.mean([x[i] for x in xs])), 1) if xs else 0.0

    return {
        "questions": len(questions),
        "anchors": len(every),
        "recall_any_link": share(every, 0),
        "recall_top_link": share(every, 1),
        "by_shape": {s: {"anchors": len(xs), "any": share(xs, 0), "top": share(xs, 1)} for s, xs in per_shape.items()},
        "mean_rows": round(float(np.mean([len(t.rows) for t in tables])), 2),
        "extract_seconds_per_question": round(seconds / len(questions), 4),
        "extract_seconds_per_question_one_per_call": round(single / len(questions), 4),
    }


NAME_WINDOWS, NAME_COUNTS = (1, 2, 3, 4, 5), (3, 5, 10)


def asked_type_accuracy(components: Components) -> dict | None:
    try:
        from grasp_core.rerank.asked_type import fit_asked_type
    except ImportError:  # code from before the asked-type model
        return None
    from grasp_core.questions.human_queries import human_queries
    from grasp_core.skb.format import SKB
    from grasp_core.text.mfar import QUERY_MAX_TOKENS

    synthetic = components.skb.queries[~components.skb.queries["split"].str.endswith("-human")]
    human = [human_queries(components.graph, split=s) for s in HUMAN_SPLITS]  # from the question files, as written now
    queries = pd.concat([synthetic, *human], ignore_index=True)
    gold = SKB(components.graph.schema, components.graph.nodes, components.graph.edges, queries).query_target_types()
    types = list(components.skb.schema.node_types)
    data = {}
    for split in ("train", "val", "test", *HUMAN_SPLITS):
        rows = (queries["split"] == split).to_numpy()
        texts = queries["query"][rows].tolist()
        data[split] = (components.encoder.encode(texts, QUERY_MAX_TOKENS), texts, gold[rows].tolist())
    cfg = components.profile.asked_type
    texts_of = {split: texts for split, (_, texts, _) in data.items()}
    if "texts" not in inspect.signature(fit_asked_type).parameters:  # code from before the request words
        data = {split: (v, g) for split, (v, _, g) in data.items()}
    names = components.skb.type_names() if "names" in inspect.signature(fit_asked_type).parameters else None
    fit = (
        (lambda c: fit_asked_type(*data["train"], types, c, names))
        if names is not None
        else (lambda c: fit_asked_type(*data["train"], types, c))
    )
    model = fit(cfg)
    out, errors = {}, {}
    for split, (*inputs, labels) in data.items():
        predicted = model.predict(*inputs)
        out[split] = round(100.0 * float(np.mean([p == g for p, g in zip(predicted, labels)])), 1)
        if split in HUMAN_SPLITS:
            errors[split] = [(t, g, p) for t, g, p in zip(texts_of[split], labels, predicted) if g != p]
    if not hasattr(cfg, "cue_window"):
        return {"accuracy": out, "human_errors": errors}

    def accuracy(m) -> dict:
        return {
            split: round(100.0 * float(np.mean([p == g for p, g in zip(m.predict(*inputs), labels)])), 2)
            for split, (*inputs, labels) in data.items()
        }

    vector_only = accuracy(fit_asked_type(*data["train"], types, dataclasses.replace(cfg, cue_window=0)))
    result = {
        "config": dataclasses.asdict(cfg),
        "accuracy": out,
        "accuracy_vector_only": vector_only,
        "human_errors": errors,
    }
    if names is not None:  # the names view's settings, chosen by the mean of val and val-human
        grid = []
        for window, count in [(0, 3)] + [(w, c) for w in NAME_WINDOWS for c in NAME_COUNTS]:
            acc = accuracy(fit(dataclasses.replace(cfg, name_window=window, name_min_count=count)))
            grid.append(
                {"name_window": window, "name_min_count": count, "select": (acc["val"] + acc["val-human"]) / 2, **acc}
            )
            print("names view", grid[-1], flush=True)
        result["names_view_grid"] = grid
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True, help="artifacts root (DAGSTER_HOME/artifacts)")
    parser.add_argument("--label", required=True, help="before | after (names the results file)")
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--asked-type-only", action="store_true", help="skip linking and its timing")
    args = parser.parse_args()
    run = Run(
        profile=args.profile,
        threads=os.environ.get("OMP_NUM_THREADS", "default"),
        pythonpath=os.environ.get("PYTHONPATH"),
    )
    components = load_components("hpo", args.root, args.profile)
    linking: dict = {}
    result: dict = {"root": str(args.root)}
    if not args.asked_type_only:
        gazetteer = extractor(components)
        gazetteer.extract([q["query"] for q in questions_of("val-human")[:8]])  # warm: model, tokenizer, caches
        linking = {split: linking_recall(components, split, gazetteer) for split in HUMAN_SPLITS}
        result["linking"] = linking
    result["asked_type"] = asked_type_accuracy(components)
    run.write(RESULTS / f"natural_questions_{args.label}.json", result, quiet=True)
    for split, found in linking.items():
        print(split, json.dumps({k: v for k, v in found.items() if k != "by_shape"}))
    if result["asked_type"]:
        print("asked type accuracy:", result["asked_type"]["accuracy"])


if __name__ == "__main__":
    main()

"""Learning from use, measured: a simulated stream of questions with confirmed answers, fed to a real `grasp serve`
in batches, each followed by the retrain the `feedback_growth` sensor requests.

Run: ``python benchmarks/feedback_stream.py hpo [--root DIR] [--profile cpu] [--questions 400] [--batches 3]
[--held-out 0.25] [--seed 7] [--out FILE]`` with ``DAGSTER_HOME`` set to the instance that built the dataset (its
feedback store and its Dagster records change: run it on a dedicated instance or a copy). Writes
``benchmarks/results/feedback_stream_<dataset>.json`` (or ``--out``; with the run's record: commit, machine, load,
date, command) and prints it.

1. **The stream**: questions in registers people type (bare names with typos, symptom lists in lay words), generated
   from the knowledge base by :func:`grasp_core.questions.intent_queries.lookup_queries` / ``findings_queries`` with a
   seed and wrappers of their own (``STREAM_LOOKUP_FORMS``, ``STREAM_FINDINGS_FORMS``: no evaluation split uses
   them); a text equal to one of the dataset's questions is dropped. ``--held-out`` of it is never sent: the held-out
   part of the stream on which learning is measured.
2. **Each batch**: ``grasp serve`` answers every question of the batch (``POST /query``), and each gold answer is
   confirmed by ``POST /feedback`` with the answer's request id, as a person would. Then the `feedback_growth`
   sensor is evaluated in the instance (Dagster's own evaluation); when it requests a retrain, ``grasp pipeline``
   runs it (the same decision of what to rebuild), ending with the guarded release.
3. **After each batch** (and before the first): Hit@1 of the served release on the held-out stream (answered live by
   :class:`~grasp_core.retriever.GraspRetriever`), and on ``test`` and ``test-human`` (the served release's
   ``eval_metrics``, reranked); McNemar of the held-out stream against before the first batch.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
from harness import RESULTS, Run, start_serve

from grasp_core.eval.results import RERANKED, read_per_query
from grasp_core.eval.significance import mcnemar
from grasp_core.questions.intent_queries import findings_queries, lookup_queries
from grasp_core.releases import served_artifacts, served_record
from grasp_core.skb.format import read_skb
from grasp_core.textnorm import normalize

STREAM_LOOKUP_FORMS = ("looking for {x}", "{x} - what is it", "info {x} pls", "search {x}", "{x} meaning")
STREAM_FINDINGS_FORMS = (
    "my kid has {f}. what could it be?",
    "patient with {f}; which {t}?",
    "{f} -> {t}?",
    "symptoms: {f}. what {t} is this",
)


def stream(dataset: str, root: str, n: int, seed: int) -> list[tuple[str, list[int]]]:
    """``n`` questions (half look-ups, half findings lists) with their gold node ids, none a dataset question."""
    from grasp_core.artifacts import Artifacts

    art = Artifacts.for_dataset(dataset, root)
    skb = read_skb(art.require("skb"), queries_file=art.require("queries") / "queries.parquet")
    taken = set(skb.queries["query"].map(normalize))
    r = random.Random(f"{seed}-stream")
    rows = lookup_queries(skb, n - n // 2, r, STREAM_LOOKUP_FORMS) + findings_queries(
        skb, n // 2, r, STREAM_FINDINGS_FORMS
    )
    unique: dict[str, tuple[str, list[int]]] = {}
    for text, gold, _ in rows:
        if normalize(text) not in taken:
            unique.setdefault(normalize(text), (text, gold))
    out = list(unique.values())
    r.shuffle(out)
    return out


def _post(url: str, body) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as answer:
        return json.loads(answer.read())


def feed(dataset: str, root: str, profile: str, batch: list[tuple[str, list[int]]], keys: list[str]) -> int:
    """Ask every question of ``batch`` to a real ``grasp serve`` and confirm its gold answers by request id."""
    server, url, _ = start_serve(dataset, ["--profile", profile, "--root", root])
    confirmed = 0
    try:
        for text, gold in batch:
            answer = _post(f"{url}/query", {"query": text, "k": 10})
            records = [{"request_id": answer["request_id"], "answer_key": keys[g], "relevant": True} for g in gold]
            confirmed += _post(f"{url}/feedback", records[:100])["accepted"]
    finally:
        server.terminate()
        server.wait(timeout=60)
    return confirmed


def retrain(dataset: str, root: str, profile: str) -> dict:
    """Evaluate the `feedback_growth` sensor; run what it requests through `grasp pipeline`."""
    import dagster as dg

    from grasp_assets.automation import feedback_growth
    from grasp_assets.definitions import defs
    from grasp_assets.run import run_pipeline

    instance = dg.DagsterInstance.get()
    result = feedback_growth(dg.build_sensor_context(instance=instance, repository_def=defs.get_repository_def()))
    requests = [r for r in (result if isinstance(result, list) else []) if r.partition_key == dataset]
    if not requests:
        return {"requested": False, "why": str(getattr(result, "skip_message", result))}
    t0 = time.perf_counter()
    stages = run_pipeline(dataset, profile=profile, root=root)
    record = served_record(dataset, root) or {}
    return {
        "requested": True,
        "why": requests[0].tags["grasp/why"][:300],
        "seconds": round(time.perf_counter() - t0, 1),
        "stages": {k: round(v, 1) for k, v in stages.items()},
        "served_release": record.get("release"),
    }


def measure(dataset: str, root: str, profile: str, held: list[tuple[str, list[int]]]) -> tuple[dict, list[bool]]:
    """Hit@1 (%) of the served release on the held-out stream (live) and on test / test-human (its evaluation)."""
    from grasp_core.retriever import GraspRetriever

    retriever = GraspRetriever.from_artifacts(dataset, root, profile)
    try:
        results = retriever.retrieve([t for t, _ in held], k=1)
    finally:
        retriever.components.close()
    hits = [bool(res.answers) and res.answers[0].node_id in set(gold) for res, (_, gold) in zip(results, held)]
    out = {"held_out_stream": round(100.0 * float(np.mean(hits)), 2)}
    evaluation = served_artifacts(dataset, root).path("eval_metrics")
    for split in ("test", "test-human"):
        rows = read_per_query([evaluation], split)
        if len(rows):
            served = rows[rows["setting"] == RERANKED]
            out[split] = round(100.0 * float(served["hit@1"].mean()), 2)
    return out, hits


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--root", default=None, help="artifact root (default: the instance's)")
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--questions", type=int, default=400)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--held-out", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if "DAGSTER_HOME" not in os.environ:
        raise SystemExit("set DAGSTER_HOME to the instance that built the dataset (its feedback store changes)")
    run = Run(profile=args.profile)
    from grasp_core.artifacts import default_root

    root = str(args.root or default_root())
    questions = stream(args.dataset, root, args.questions, args.seed)
    cut = round(len(questions) * args.held_out)
    held, sent = questions[:cut], questions[cut:]
    keys = read_skb(served_artifacts(args.dataset, root).path("skb"), with_queries=False).nodes["key"].tolist()
    before, before_hits = measure(args.dataset, root, args.profile, held)
    rounds = [{"batch": 0, "hit1": before}]
    for b, batch in enumerate(np.array_split(np.arange(len(sent)), args.batches), start=1):
        confirmed = feed(args.dataset, root, args.profile, [sent[i] for i in batch], keys)
        retrained = retrain(args.dataset, root, args.profile)
        hit1, hits = measure(args.dataset, root, args.profile, held)
        _, p = mcnemar(hits, before_hits)
        rounds.append(
            {
                "batch": b,
                "questions": len(batch),
                "confirmed": confirmed,
                "retrain": retrained,
                "hit1": hit1,
                "held_out_mcnemar_p_vs_before": p,
            }
        )
        print(json.dumps(rounds[-1]), flush=True)
    doc = {
        "dataset": args.dataset,
        "profile": args.profile,
        "stream": {"questions": len(questions), "held_out": len(held), "sent": len(sent), "seed": args.seed},
        "rounds": rounds,
    }
    run.write(args.out or RESULTS / f"feedback_stream_{args.dataset}.json", doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())

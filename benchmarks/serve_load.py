"""Load test of ``grasp serve`` on loopback: throughput and latency at several concurrencies, answers vs the CLI.

Run: ``python benchmarks/serve_load.py hpo [--root DIR] [--profile cpu] [--questions 48]
[--concurrency 1 4 16] [--seconds 120] [--branches both] [--no-rerank] [--out FILE]``; writes
``benchmarks/results/serve_load.json`` (or ``--out``) and prints a table.

1. The first ``--questions`` test questions of the dataset are answered by the CLI,
   ``grasp retrieve --batch-size 1`` (each question alone, as the server answers a one-record request): that
   output is the reference.
2. ``grasp serve`` starts on a free 127.0.0.1 port (the time until ``/health`` answers is reported; its output is
   discarded).
3. At each concurrency ``c``, ``c`` clients send the questions, one ``POST /retrieve`` of one record each,
   until all are answered or ``--seconds`` have passed (then the level stops early and says so). Each
   answer must equal the CLI's line exactly (node ids, keys and scores); errors (non-200, error records,
   transport failures) and mismatches are counted. Latency is per request, client side; throughput is
   answered questions per second of the level's wall time.
4. The server is stopped (SIGINT). The results file's ``record`` holds the 1-minute load average at the start and
   the end (the machine is shared), the commit and the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pandas as pd
from harness import GRASP, RESULTS, Run, percentiles, start_serve

from grasp_core.artifacts import Artifacts


async def run_level(url: str, records: list[dict], reference: dict, concurrency: int, seconds: float) -> dict:
    todo = list(records)
    latencies, mismatches, errors, answered, sent = [], [], {}, 0, 0
    deadline = time.monotonic() + seconds

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal answered, sent
        while todo and time.monotonic() < deadline:
            record = todo.pop(0)
            sent += 1
            start = time.perf_counter()
            try:
                response = await http.post(f"{url}/retrieve", json=[record])
                latencies.append(time.perf_counter() - start)
                if response.status_code != 200:
                    errors[f"http {response.status_code}"] = errors.get(f"http {response.status_code}", 0) + 1
                    continue
                (out,) = response.json()
            except (httpx.HTTPError, ValueError) as exc:
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                continue
            if "error" in out:
                errors["error record"] = errors.get("error record", 0) + 1
                continue
            answered += 1
            if out != reference[out["qid"]]:
                mismatches.append(out["qid"])

    start = time.perf_counter()
    async with httpx.AsyncClient(timeout=600) as http:
        await asyncio.gather(*(client(http) for _ in range(concurrency)))
    wall = time.perf_counter() - start
    latency = percentiles((1e3 * s for s in latencies), digits=1)
    return {
        "concurrency": concurrency,
        "requests": sent,
        "answered": answered,
        "stopped_early": bool(todo),
        "errors": errors,
        "mismatches": len(mismatches),
        "mismatched_qids": mismatches[:10],
        "throughput_qps": round(answered / wall, 2),
        "p50_ms": latency.get("p50"),
        "p95_ms": latency.get("p95"),
        "wall_s": round(wall, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--root", default=None, help="artifact root (default: $GRASP_HOME or dagster_home/artifacts)")
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--questions", type=int, default=48, help="test questions sent at each concurrency")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--seconds", type=float, default=120, help="time limit of each concurrency level")
    parser.add_argument("--branches", choices=("text", "graph", "both"), default="both")
    parser.add_argument("--no-rerank", action="store_true", help="serve (and answer with the CLI) without reranker")
    parser.add_argument("--out", default=str(RESULTS / "serve_load.json"))
    args = parser.parse_args()
    run = Run(profile=args.profile, questions=args.questions, seconds_per_level=args.seconds)

    art = Artifacts.for_dataset(args.dataset, args.root)
    queries = pd.read_parquet(art.require("queries") / "queries.parquet")
    test = queries[queries["split"] == "test"].head(args.questions)
    records = [{"qid": int(q), "query": t} for q, t in zip(test["qid"], test["query"])]
    flags = ["--profile", args.profile, "--root", str(art.root)]
    served = ["--branches", args.branches] + (["--no-rerank"] if args.no_rerank else [])
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    with tempfile.TemporaryDirectory() as tmp:
        src, ref = Path(tmp) / "in.jsonl", Path(tmp) / "ref.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in records))
        start = time.perf_counter()
        subprocess.run(
            [
                *GRASP,
                *flags,
                "retrieve",
                args.dataset,
                *served,
                "--queries",
                str(src),
                "--out",
                str(ref),
                "--batch-size",
                "1",
            ],
            check=True,
            env=env,
        )
        cli_s = time.perf_counter() - start
        reference = {r["qid"]: r for r in map(json.loads, ref.read_text().splitlines())}

    start = time.perf_counter()
    proc, url, health = start_serve(args.dataset, flags, served, env=env, timeout=600)
    startup_s = time.perf_counter() - start
    try:
        levels = []
        for c in args.concurrency:
            levels.append(asyncio.run(run_level(url, records, reference, c, args.seconds)))
            print(json.dumps(levels[-1]), flush=True)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    result = {
        "dataset": args.dataset,
        "profile": args.profile,
        "questions": len(records),
        "served": {k: health[k] for k in ("branches", "rerank", "planner")},
        "cli_batch_size_1_s": round(cli_s, 1),
        "server_startup_s": round(startup_s, 1),
        "levels": levels,
    }
    run.write(Path(args.out), result, quiet=True)
    print("| concurrency | answered | errors | mismatches vs CLI | questions/s | p50 ms | p95 ms |")
    print("|---|---|---|---|---|---|---|")
    for lv in levels:
        print(
            f"| {lv['concurrency']} | {lv['answered']} | {sum(lv['errors'].values())} | {lv['mismatches']} "
            f"| {lv['throughput_qps']} | {lv['p50_ms']} | {lv['p95_ms']} |"
        )


if __name__ == "__main__":
    main()

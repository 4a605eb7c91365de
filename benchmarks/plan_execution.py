"""Plan execution at Prime scale (goals in ``docs/latency.md``): graph load speed, per-stage latency, peak memory.

Run: ``python benchmarks/plan_execution.py [--scale full] [--plans 200] [--backends ladybug|kuzu]
[--traversals arrays store] [--max-frontier none|N ...] [--no-exact] [--out FILE]``; writes
``benchmarks/results/plan_execution.json`` (runs of other backends/traversals/caps of the same setup are kept)
and prints a markdown table; ``benchmarks/results/plan_execution.md`` discusses them.

Setup and the decisions behind it:
- The SKB is ``build_synth_skb("prime", scale)`` (129k nodes / 8.1M edges at ``full``), cached with
  ``write_skb`` under ``benchmarks/.cache/`` (git-ignored); building it takes minutes, reading it seconds.
- Node vectors are random unit vectors (384-d, MiniLM's size): encoding 2x129k texts with MiniLM on 2 cores
  would take hours and cosine values do not change the work done. Query-side texts (anchor and relevance
  texts) ARE encoded with the real MiniLM in the cpu profile's encoder configuration (the one serving uses:
  bfloat16 where the CPU computes it natively), so the ``link`` stage includes a real encoder call. With random
  node vectors the top-k of an anchor are near-ties, so anchors bind ~k nodes (the worst case for traversal).
- Plans are random valid plans of 1-3 hops made from random walks on the real graph (so most reach
  something): a walk from a random target node ends at the anchor; a quarter of the plans get a second
  one-hop anchor that must meet at the same target (intersection). Anchor text = the end node's name,
  relevance text = the target's name. 10 warm-up plans run first and are not measured.
- Besides the executor's stages, two parts are timed on their own after each plan: ``encode`` (the encoder
  call for the plan's texts, the bulk of ``link``) and ``prepare`` (the engine's parse + plan of the
  compiled query, part of ``traverse``).
- ``kuzu`` (PyPI) is the engine LadybugDB continues; it is compared by running the same store code with the
  ``kuzu`` module in place of ``ladybug`` (same API). The two cannot share a process (their native modules
  clash), so each backend runs in its own process (``--backends kuzu``).
- Exactness: unless ``--no-exact``, every plan first runs as the graph store's Cypher query without a frontier
  cap (``traversal="store"``, ``max_frontier=None``: the exact result, timed as its own run); every other run
  (each ``--traversals`` x ``--max-frontier``; ``arrays`` is the executor's in-process traversal) then reports
  how much of each plan's exact top-100 it kept (``vs_exact``: mean and minimum recall, plans with an identical
  top-100 set, plans whose exact best answer is still in the top-100). The graph is loaded once per backend
  for all of them; an ``arrays`` run times building its executor's CSR arrays (``adjacency_build_s``).
- Peak RSS is the process maximum (``ru_maxrss``) after all stages; the machine is shared, so latencies are
  upper bounds and every run records the 1-minute load average (``os.getloadavg()``) before and after the
  load and after the plans.
"""

from __future__ import annotations

import os

# torch's OpenMP threads spin-wait by default; on this shared, oversubscribed 2-core machine (load avg 8-11)
# that made one encoder call of 2-4 short texts take ~1 s instead of ~35 ms. Must be set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import gc
import importlib
import json
import platform
import resource
import shutil
import time
import warnings
from pathlib import Path

import numpy as np

from grasp_core.embed.encoder import load_encoder
from grasp_core.embed.node_embeddings import NodeEmbeddings
from grasp_core.embed.vector_index import NodeIndex
from grasp_core.graph import ladybug_store
from grasp_core.graph.open import open_graph_store
from grasp_core.graph.store import GraphStoreConfig
from grasp_core.io import is_complete, write_json
from grasp_core.plan.execute import ExecutionConfig, PlanExecutor
from grasp_core.plan.model import TARGET, Anchor, Hop, Plan, Target
from grasp_core.plan.trace import STAGES
from grasp_core.profiles import get_profile
from grasp_core.skb.format import SKB, read_skb, write_skb
from grasp_core.skb.synth import build_synth_skb

ROOT = Path(__file__).parent
CACHE, RESULTS = ROOT / ".cache", ROOT / "results" / "plan_execution.json"
DIM = 384


def load_skb(scale: str) -> SKB:
    path = CACHE / f"synth-prime-{scale}"
    if not is_complete(path):
        write_skb(build_synth_skb("prime", scale, seed=0), path)
    return read_skb(path, with_queries=False)


def random_embeddings(n: int, seed: int = 0) -> NodeEmbeddings:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(2):
        v = rng.standard_normal((n, DIM), dtype=np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        out.append(v)
    return NodeEmbeddings(out[0], out[1], identity=f"random-unit-{DIM}", meta={})


class Walker:
    """Undirected adjacency (CSR, int32) with relation codes, for random walks."""

    def __init__(self, skb: SKB):
        n = skb.num_nodes
        src, dst = skb.edges["src"].to_numpy(np.int32), skb.edges["dst"].to_numpy(np.int32)
        codes, self.rels = skb.edges["rel"].factorize()
        ends = np.concatenate([src, dst])
        order = np.argsort(ends, kind="stable")
        self.nbr = np.concatenate([dst, src])[order]
        self.rel = np.concatenate([codes, codes]).astype(np.int16)[order]
        self.ptr = np.concatenate([[0], np.cumsum(np.bincount(ends, minlength=n))])
        self.types = skb.nodes["type"].to_numpy()
        self.names = skb.nodes["name"].astype(str).to_numpy()

    def step(self, node: int, rng: np.random.Generator) -> tuple[str, int] | None:
        lo, hi = self.ptr[node], self.ptr[node + 1]
        if lo == hi:
            return None
        j = int(rng.integers(lo, hi))
        return str(self.rels[self.rel[j]]), int(self.nbr[j])

    def plan(self, rng: np.random.Generator) -> Plan | None:
        target = int(rng.integers(len(self.types)))
        anchors, hops = [], []
        branches = [int(rng.integers(1, 4))] + ([1] if rng.random() < 0.25 else [])
        for a, depth in enumerate(branches):
            cur, var, walk = target, TARGET, []
            for d in range(depth):
                step = self.step(cur, rng)
                if step is None:
                    return None
                rel, nxt = step
                name = f"a{a}" if d == depth - 1 else f"x{a}_{d}"
                walk.append(Hop(**{"from": name, "rel": rel, "to": var, "to_type": str(self.types[cur])}))
                cur, var = nxt, name
            hops += reversed(walk)
            anchors.append(Anchor(var=f"a{a}", type=str(self.types[cur]), text=str(self.names[cur])))
        return Plan(
            target=Target(type=str(self.types[target])),
            anchors=tuple(anchors),
            hops=tuple(hops),
            relevance_text=str(self.names[target]),
        )


def rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def percentiles(values: list[float]) -> dict[str, float]:
    v = 1e3 * np.asarray(values)
    return {
        "p50_ms": round(float(np.percentile(v, 50)), 2),
        "p95_ms": round(float(np.percentile(v, 95)), 2),
        "mean_ms": round(float(v.mean()), 2),
    }


def run_plans(executor: PlanExecutor, encoder, store, plans: list[Plan]) -> tuple[dict, list[np.ndarray], dict]:
    """Time ``plans`` (after 10 warm-up plans) through ``executor``: per-stage seconds, each plan's top node
    ids, and the outcome counts with the first message of each error."""
    for plan in plans[:10]:  # warm-up: caches, lazy init
        executor.execute(plan, plan.relevance_text)
    stages = {s: [] for s in (*STAGES, "total", "encode", "prepare")}
    tops, candidates, errors, messages = [], [], {}, {}
    for plan in plans[10:]:
        start = time.perf_counter()
        ranking, trace = executor.execute(plan, plan.relevance_text)
        stages["total"].append(time.perf_counter() - start)
        tops.append(ranking.node_ids)
        for s in STAGES:
            stages[s].append(trace.seconds[s])
        candidates.append(trace.candidates)
        errors[trace.error or "ok"] = errors.get(trace.error or "ok", 0) + 1
        if trace.error and trace.error not in messages:
            messages[trace.error] = trace.message[:300]
        # the parts of link and traverse: the encoder call alone, and the engine's parse+plan (prepare) alone
        start = time.perf_counter()
        encoder.encode([a.text for a in plan.anchors] + [plan.relevance_text], executor.cfg.max_tokens)
        stages["encode"].append(time.perf_counter() - start)
        if trace.cypher and executor.cfg.traversal == "store":
            start = time.perf_counter()
            store._conn.prepare(trace.cypher, trace.params)
            stages["prepare"].append(time.perf_counter() - start)
    summary = {
        "latency": {s: percentiles(v) for s, v in stages.items() if v},
        "candidates": {"p50": float(np.median(candidates)), "max": int(max(candidates))},
        "outcomes": errors,
        "first_error_messages": messages,
    }
    return summary, tops, stages


def recall_vs_exact(tops: list[np.ndarray], exact: list[np.ndarray]) -> dict:
    """How much of each plan's exact top ``top_k`` a capped run keeps (plans whose exact ranking is non-empty)."""
    pairs = [(set(t.tolist()), e) for t, e in zip(tops, exact) if len(e)]
    return {
        "plans": len(pairs),
        "mean_recall": round(float(np.mean([len(t & set(e.tolist())) / len(e) for t, e in pairs])), 4),
        "min_recall": round(float(min(len(t & set(e.tolist())) / len(e) for t, e in pairs)), 4),
        "identical_top": int(sum(t == set(e.tolist()) for t, e in pairs)),
        "same_top1": int(sum(int(e[0]) in t and len(t) > 0 for t, e in pairs)),
    }


def bench_backend(
    backend: str,
    skb: SKB,
    index: NodeIndex,
    encoder,
    plans: list[Plan],
    runs: list[tuple[str, int | None]],
    exact: bool,
) -> list[dict]:
    """One graph load; then, if ``exact``, every plan as the store's uncapped query (the reference), then each
    (traversal, max_frontier) of ``runs``."""
    engine = importlib.import_module(backend)
    ladybug_store.ladybug = engine  # same API; the store code is shared
    path = CACHE / f"store-{backend}"
    shutil.rmtree(path, ignore_errors=True)
    store = open_graph_store(GraphStoreConfig(), path)
    load_avg = {"before_load": os.getloadavg()[0]}
    start = time.perf_counter()
    store.load(skb)
    load_s = time.perf_counter() - start
    load_avg["after_load"] = os.getloadavg()[0]
    print(
        f"{backend}: loaded {len(skb.edges):,} edges in {load_s:.1f} s, rss {rss_gib():.2f} GiB, "
        f"load avg {load_avg['after_load']:.1f}",
        flush=True,
    )
    base = {
        "encoder": encoder.identity,
        "backend": backend,
        "version": getattr(engine, "__version__", "?"),
        "load_s": round(load_s, 2),
        "load_edges_per_s": int(len(skb.edges) / load_s),
    }
    out, reference = [], None
    for traversal, cap in ([("store", None)] if exact else []) + [r for r in runs if not exact or r != ("store", None)]:
        start = time.perf_counter()
        executor = PlanExecutor(skb, index, encoder, store, ExecutionConfig(traversal=traversal, max_frontier=cap))
        extra = {}
        if executor.adjacency is not None:
            extra["adjacency_build_s"] = round(time.perf_counter() - start, 2)
            extra["adjacency_mib"] = round(sum(r.nbytes for r in executor.adjacency.relations.values()) / 2**20)
        summary, tops, _ = run_plans(executor, encoder, store, plans)
        run = {
            **base,
            "traversal": traversal,
            "max_frontier": cap,
            **extra,
            **summary,
            "load_avg_1min": {**load_avg, "after_plans": os.getloadavg()[0]},
        }
        if reference is None and exact:
            reference = tops
        elif reference is not None:
            run["vs_exact"] = recall_vs_exact(tops, reference)
        run["peak_rss_gib"] = round(rss_gib(), 2)
        print(f"{traversal}, cap {cap}: total {run['latency']['total']}, {run.get('vs_exact', '')}", flush=True)
        out.append(run)
    store.close()
    shutil.rmtree(path, ignore_errors=True)
    return out


def run_key(run: dict) -> tuple:
    """What a run measured (runs recorded before the in-process traversal existed ran on the store)."""
    return run["backend"], run.get("traversal", "store"), run.get("max_frontier")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", default="full")
    parser.add_argument("--plans", type=int, default=200)
    parser.add_argument("--backends", nargs="+", default=["ladybug"], help="one per process: ladybug and kuzu clash")
    parser.add_argument("--traversals", nargs="+", default=[ExecutionConfig().traversal], choices=["arrays", "store"])
    parser.add_argument(
        "--max-frontier",
        type=lambda v: None if v.lower() == "none" else int(v),
        nargs="+",
        default=[ExecutionConfig().max_frontier],
        help="caps to run (none = uncapped)",
    )
    parser.add_argument("--no-exact", action="store_true", help="skip the store's uncapped reference run (no recall)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results file (runs of the same setup are merged)")
    args = parser.parse_args()
    warnings.simplefilter("ignore", DeprecationWarning)  # the engine's prepare(), timed above on purpose
    start = time.perf_counter()
    skb = load_skb(args.scale)
    read_s = time.perf_counter() - start
    index = NodeIndex.build(skb, random_embeddings(skb.num_nodes))
    encoder = load_encoder(get_profile("cpu").encoder)
    rng, walker, plans = np.random.default_rng(0), Walker(skb), []
    while len(plans) < args.plans + 10:
        plan = walker.plan(rng)
        if plan is not None:
            plans.append(plan)
    del walker
    gc.collect()
    print(f"SKB read in {read_s:.1f} s, index + plans ready, rss {rss_gib():.2f} GiB", flush=True)
    runs = []
    for backend in args.backends:
        try:
            combos = [(t, cap) for t in args.traversals for cap in args.max_frontier]
            runs += bench_backend(backend, skb, index, encoder, plans, combos, not args.no_exact)
        except ImportError as exc:  # e.g. kuzu not installed, or it clashes with ladybug in one process
            print(f"skipping {backend}: {exc}")
    result = {
        "scale": args.scale,
        "nodes": skb.num_nodes,
        "edges": len(skb.edges),
        "plans": args.plans,
        "hops": dict(zip(*map(list, np.unique([len(p.hops) for p in plans[10:]], return_counts=True)))),
        "two_anchor_plans": sum(len(p.anchors) > 1 for p in plans[10:]),
        "skb_read_s": round(read_s, 1),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "encoder": encoder.identity,
        "peak_rss_gib": round(rss_gib(), 2),
        "machine": f"{platform.processor() or platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        "runs": runs,
    }
    result["hops"] = {int(k): int(v) for k, v in result["hops"].items()}
    if args.out.exists():  # keep other backends' runs of the same setup (one backend per process)
        old = json.loads(args.out.read_text())
        if (old.get("scale"), old.get("plans")) == (args.scale, args.plans):
            done = {run_key(r) for r in runs}
            result["runs"] = [r for r in old["runs"] if run_key(r) not in done] + runs
            result["peak_rss_gib"] = max(result["peak_rss_gib"], old.get("peak_rss_gib", 0))
    write_json(args.out, result)
    print("| backend | traversal | max_frontier | stage | p50 ms | p95 ms |\n|---|---|---|---|---|---|")
    for run in runs:
        for stage, p in run["latency"].items():
            print(
                f"| {run['backend']} {run['version']} | {run['traversal']} | {run['max_frontier']} | {stage} "
                f"| {p['p50_ms']} | {p['p95_ms']} |"
            )
        print(f"load avg (1 min): {run['load_avg_1min']}")
    print(
        f"peak RSS {result['peak_rss_gib']} GiB; outcomes {[(r['outcomes'], r['first_error_messages']) for r in runs]}"
    )


if __name__ == "__main__":
    main()

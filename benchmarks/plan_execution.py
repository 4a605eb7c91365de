"""Plan execution at Prime scale (goals in ``docs/latency.md``): graph load speed, per-stage latency, peak memory.

Run: ``python benchmarks/plan_execution.py [--scale full | --skb DIR] [--plans 200] [--backends ladybug|kuzu|neo4j
...] [--traversals arrays store] [--max-frontier none|N ...] [--no-exact] [--bolt-import SCALE] [--out FILE]``; writes
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
- ``neo4j`` is the Bolt backend: on the server at ``$NEO4J_URI``, else on a local ArcadeDB + Bolt server started
  for the run (``grasp_core/graph/bolt_server.py``, ``docs/bolt.md``). It shares a process with ``ladybug``, so
  ``--backends ladybug neo4j`` measures both in one run; the in-process traversal (which never touches a store)
  runs with the first backend only, and the later backends' runs are compared with the first one's exact
  reference (``vs_exact.identical_ranking``: plans whose whole top-100 is the same ids in the same order). Loading
  Prime's 8.1M edges with Cypher over Bolt would take hours on ArcadeDB here, so ``--bolt-import SCALE`` loads the
  graph with ArcadeDB's bulk ingest at server start instead (same layout; ``loaded_by`` says which) and measures
  the Bolt load (``Neo4jStore.load``) on synth-prime at ``SCALE`` in a server of its own (``bolt_load_sample``).
- Exactness: unless ``--no-exact``, every plan first runs as the graph store's Cypher query without a frontier
  cap (``traversal="store"``, ``max_frontier=None``: the exact result, timed as its own run); every other run
  (each ``--traversals`` x ``--max-frontier``; ``arrays`` is the executor's in-process traversal) then reports
  how much of each plan's exact top-100 it kept (``vs_exact``: mean and minimum recall, plans with an identical
  top-100 set, plans whose exact best answer is still in the top-100). The graph is loaded once per backend
  for all of them; an ``arrays`` run times building its executor's CSR arrays (``adjacency_build_s``).
- Peak RSS is the process maximum (``ru_maxrss``) after all stages; the machine is shared, so latencies are
  upper bounds. Every run this process adds carries its ``record`` (commit, machine, the 1-minute load average
  at the process's start and end, ``OMP_WAIT_POLICY``, command): runs kept from other processes keep theirs.
"""

from __future__ import annotations

import os

# torch's OpenMP threads spin-wait by default; on this shared, oversubscribed 2-core machine (load avg 8-11)
# that made one encoder call of 2-4 short texts take ~1 s instead of ~35 ms. Must be set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import gc
import importlib
import importlib.metadata
import resource
import shutil
import time
import warnings
from pathlib import Path

import numpy as np
from harness import RESULTS, Run, load_average, percentiles, read_result, write_result

from grasp_core.embed.encoder import load_encoder
from grasp_core.embed.node_embeddings import NodeEmbeddings
from grasp_core.embed.vector_index import NodeIndex
from grasp_core.graph import ladybug_store
from grasp_core.graph.config import GraphStoreConfig
from grasp_core.graph.open import open_graph_store
from grasp_core.io import is_complete
from grasp_core.plan.config import ExecutionConfig
from grasp_core.plan.execute import PlanExecutor
from grasp_core.plan.model import TARGET, Anchor, Hop, Plan, Target
from grasp_core.plan.trace import EXECUTION_STAGES
from grasp_core.profiles import get_profile
from grasp_core.skb.format import SKB, read_skb, write_skb
from grasp_core.sources.synth import build_synth_skb

CACHE, OUT = Path(__file__).parent / ".cache", RESULTS / "plan_execution.json"
# the neo4j backend's server: started by main (local) or $NEO4J_URI; imported_s: seconds of its bulk import
BOLT: dict = {"local": False, "database": None, "batch_size": GraphStoreConfig().batch_size, "imported_s": None}
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


def latency_ms(seconds: list[float]) -> dict[str, float]:
    """p50, p95 and mean of timings in seconds, in milliseconds (keys ``p50_ms``, ``p95_ms``, ``mean_ms``, ``n``)."""
    return {k if k == "n" else f"{k}_ms": v for k, v in percentiles(1e3 * np.asarray(seconds)).items()}


def run_plans(executor: PlanExecutor, encoder, store, plans: list[Plan]) -> tuple[dict, list[np.ndarray], dict]:
    """Time ``plans`` (after 10 warm-up plans) through ``executor``: per-stage seconds, each plan's top node
    ids, and the outcome counts with the first message of each error."""
    for plan in plans[:10]:  # warm-up: caches, lazy init
        executor.execute(plan, plan.relevance_text)
    stages = {s: [] for s in (*EXECUTION_STAGES, "total", "encode", "prepare")}
    tops, candidates, errors, messages = [], [], {}, {}
    for plan in plans[10:]:
        start = time.perf_counter()
        ranking, trace = executor.execute(plan, plan.relevance_text)
        stages["total"].append(time.perf_counter() - start)
        tops.append(ranking.node_ids)
        for s in EXECUTION_STAGES:
            stages[s].append(trace.seconds[s])
        candidates.append(trace.candidates)
        errors[trace.error or "ok"] = errors.get(trace.error or "ok", 0) + 1
        if trace.error and trace.error not in messages:
            messages[trace.error] = trace.message[:300]
        # the parts of link and traverse: the encoder call alone, and the engine's parse+plan (prepare) alone
        start = time.perf_counter()
        encoder.encode([a.text for a in plan.anchors] + [plan.relevance_text], executor.cfg.max_tokens)
        stages["encode"].append(time.perf_counter() - start)
        if trace.cypher and executor.cfg.traversal == "store" and hasattr(store, "_conn"):  # embedded engines
            start = time.perf_counter()
            store._conn.prepare(trace.cypher, trace.params)
            stages["prepare"].append(time.perf_counter() - start)
    summary = {
        "latency": {s: latency_ms(v) for s, v in stages.items() if v},
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


def open_backend(backend: str, path: Path) -> tuple[object, str]:
    """(an empty store, its engine's version): ladybug or kuzu (embedded, in ``path``), or neo4j (the Bolt server
    in $NEO4J_URI: :func:`main` starts a local ArcadeDB one when it is unset)."""
    if backend == "neo4j":
        import neo4j

        server = "ArcadeDB " + importlib.metadata.version("arcadedb-embedded") if BOLT["local"] else "NEO4J_URI"
        cfg = GraphStoreConfig(backend="neo4j", database=BOLT["database"], batch_size=BOLT["batch_size"])
        return open_graph_store(cfg), f"{server}, driver {neo4j.__version__}"
    engine = importlib.import_module(backend)
    ladybug_store.ladybug = engine  # same API; the store code is shared
    shutil.rmtree(path, ignore_errors=True)
    return open_graph_store(GraphStoreConfig(), path), getattr(engine, "__version__", "?")


def bench_backend(
    backend: str,
    skb: SKB,
    index: NodeIndex,
    encoder,
    plans: list[Plan],
    runs: list[tuple[str, int | None]],
    exact: bool,
    reference: list[np.ndarray] | None = None,
) -> tuple[list[dict], list[np.ndarray] | None]:
    """One graph load; then, if ``exact``, every plan as the store's uncapped query (the reference, unless an
    earlier backend's is given), then each (traversal, max_frontier) of ``runs``. Returns the runs and the
    reference."""
    path = CACHE / f"store-{backend}"
    store, version = open_backend(backend, path)
    start = time.perf_counter()
    if backend == "neo4j" and BOLT["imported_s"] is not None:  # bulk-imported by the server at its start (main)
        load_s, how = BOLT["imported_s"], "ArcadeDB GraphBatch import (server start included)"
    else:
        store.load(skb)
        load_s, how = time.perf_counter() - start, "store.load"
    print(
        f"{backend}: loaded {len(skb.edges):,} edges in {load_s:.1f} s, rss {rss_gib():.2f} GiB, "
        f"load avg {load_average():.1f}",
        flush=True,
    )
    base = {
        "encoder": encoder.identity,
        "backend": backend,
        "version": version,
        "load_s": round(load_s, 2),
        "load_edges_per_s": int(len(skb.edges) / load_s),
        "loaded_by": how,
    }
    out, own_reference = [], reference is None
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
        }
        if reference is None and exact:
            reference = tops
        elif reference is not None:
            run["vs_exact"] = recall_vs_exact(tops, reference)
            if not own_reference or (traversal, cap) != ("store", None):
                run["vs_exact"]["identical_ranking"] = sum(np.array_equal(t, e) for t, e in zip(tops, reference))
        run["peak_rss_gib"] = round(rss_gib(), 2)
        print(f"{traversal}, cap {cap}: total {run['latency']['total']}, {run.get('vs_exact', '')}", flush=True)
        out.append(run)
    store.close()
    shutil.rmtree(path, ignore_errors=True)
    return out, reference


def bolt_load_sample(scale: str, heap: str) -> dict:
    """Load synth-prime at ``scale`` over Bolt (:meth:`Neo4jStore.load`) into a fresh local server: edges/s."""
    from grasp_core.graph.bolt_server import start_bolt_server

    sample = build_synth_skb("prime", scale, seed=0)
    server = start_bolt_server(CACHE / "bolt-sample", heap=heap)
    try:
        os.environ.update(server.env())
        store = open_graph_store(
            GraphStoreConfig(backend="neo4j", database=server.database, batch_size=BOLT["batch_size"])
        )
        start = time.perf_counter()
        store.load(sample)
        seconds = time.perf_counter() - start
        store.close()
    finally:
        server.stop()
        shutil.rmtree(CACHE / "bolt-sample", ignore_errors=True)
    out = {"scale": scale, "nodes": sample.num_nodes, "edges": len(sample.edges), "load_s": round(seconds, 1)}
    out["edges_per_s"] = int(len(sample.edges) / seconds)
    print(f"Bolt load of synth-prime {scale}: {out}", flush=True)
    return out


def run_key(run: dict) -> tuple:
    """What a run measured (runs recorded before the in-process traversal existed ran on the store)."""
    return run["backend"], run.get("traversal", "store"), run.get("max_frontier")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="full")
    parser.add_argument("--skb", type=Path, default=None, help="an SKB directory instead of synth-prime at --scale")
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
    parser.add_argument("--bolt-heap", default="4g", help="JVM heap of the local ArcadeDB Bolt server (neo4j)")
    parser.add_argument("--bolt-batch", type=int, default=GraphStoreConfig().batch_size, help="rows per Bolt write")
    parser.add_argument(
        "--bolt-import",
        default=None,
        help="neo4j on the local server: bulk-import the SKB at server start (ArcadeDB GraphBatch) instead of loading "
        "it over Bolt, and measure the Bolt load on synth-prime at this scale instead (e.g. 0.01)",
    )
    parser.add_argument("--out", type=Path, default=OUT, help="results file (runs of the same setup are merged)")
    args = parser.parse_args()
    bench = Run(profile="cpu", omp_wait_policy=os.environ.get("OMP_WAIT_POLICY"))
    warnings.simplefilter("ignore", DeprecationWarning)  # the engine's prepare(), timed above on purpose
    start = time.perf_counter()
    skb_dir = args.skb or CACHE / f"synth-prime-{args.scale}"
    skb = read_skb(args.skb, with_queries=False) if args.skb else load_skb(args.scale)
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
    runs, reference, server, bolt_sample = [], None, None, None
    BOLT["batch_size"] = args.bolt_batch
    if "neo4j" in args.backends and not os.environ.get("NEO4J_URI"):
        from grasp_core.graph.bolt_server import start_bolt_server

        shutil.rmtree(CACHE / "bolt-server", ignore_errors=True)
        if args.bolt_import:
            bolt_sample = bolt_load_sample(args.bolt_import, args.bolt_heap)
            start = time.perf_counter()
            server = start_bolt_server(CACHE / "bolt-server", heap=args.bolt_heap, import_skb=skb_dir, timeout=7200)
            BOLT["imported_s"] = time.perf_counter() - start
            print(f"ArcadeDB: imported {len(skb.edges):,} edges in {BOLT['imported_s']:.1f} s", flush=True)
        else:
            server = start_bolt_server(CACHE / "bolt-server", heap=args.bolt_heap)
        os.environ.update(server.env())
        BOLT.update(local=True, database=server.database)
    try:
        for backend in args.backends:
            try:
                combos = [(t, cap) for t in args.traversals for cap in args.max_frontier]
                if runs:  # the in-process traversal does not touch the store: run it with the first backend only
                    combos = [(t, cap) for t, cap in combos if t != "arrays"]
                done, reference = bench_backend(
                    backend, skb, index, encoder, plans, combos, not args.no_exact, reference
                )
                runs += done
            except ImportError as exc:  # e.g. kuzu not installed, or it clashes with ladybug in one process
                print(f"skipping {backend}: {exc}")
    finally:
        if server is not None:
            server.stop()
            shutil.rmtree(CACHE / "bolt-server", ignore_errors=True)
    result = {
        "scale": args.scale,
        "skb": str(args.skb) if args.skb else f"synth-prime {args.scale}",
        "nodes": skb.num_nodes,
        "edges": len(skb.edges),
        "plans": args.plans,
        "hops": dict(zip(*map(list, np.unique([len(p.hops) for p in plans[10:]], return_counts=True)))),
        "two_anchor_plans": sum(len(p.anchors) > 1 for p in plans[10:]),
        "skb_read_s": round(read_s, 1),
        "encoder": encoder.identity,
        "peak_rss_gib": round(rss_gib(), 2),
        "runs": runs,
    }
    if bolt_sample is not None:
        result["bolt_load_sample"] = bolt_sample
    result["hops"] = {int(k): int(v) for k, v in result["hops"].items()}
    record = bench.finish()
    for run in runs:
        run["record"] = record
    old = read_result(args.out)  # keep other backends' runs of the same setup (one backend per process)
    if old and (old.get("scale"), old.get("plans")) == (args.scale, args.plans):
        done = {run_key(r) for r in runs}
        result["runs"] = [r for r in old["runs"] if run_key(r) not in done] + runs
        result["peak_rss_gib"] = max(result["peak_rss_gib"], old.get("peak_rss_gib", 0))
    write_result(args.out, result, quiet=True)
    print("| backend | traversal | max_frontier | stage | p50 ms | p95 ms |\n|---|---|---|---|---|---|")
    for run in runs:
        for stage, p in run["latency"].items():
            print(
                f"| {run['backend']} {run['version']} | {run['traversal']} | {run['max_frontier']} | {stage} "
                f"| {p['p50_ms']} | {p['p95_ms']} |"
            )
    print(f"load avg (1 min): {record['load_average_1m']}")
    print(
        f"peak RSS {result['peak_rss_gib']} GiB; outcomes {[(r['outcomes'], r['first_error_messages']) for r in runs]}"
    )


if __name__ == "__main__":
    main()

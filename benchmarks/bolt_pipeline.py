"""The whole DAG on the server graph store (Bolt), and its graph rankings against the embedded store's and the
in-process traversal's, on every test query.

Run: ``python benchmarks/bolt_pipeline.py hpo`` (``--profile``, ``--scale``, ``--queries`` as for ``grasp
pipeline``). Uses the Bolt server at ``$NEO4J_URI`` (``$NEO4J_USER``, ``$NEO4J_PASSWORD``) when set, else starts
ArcadeDB + Bolt from the ``arcadedb-embedded`` wheel (:mod:`grasp_core.graph.bolt_server`; its data and a
generated password kept in ``benchmarks/.cache/bolt-<dataset>/server``). Then:

1. ``grasp pipeline DATASET --graph-store neo4j --traversal store`` in its own Dagster home and artifact root
   (``benchmarks/.cache/bolt-<dataset>/``): every asset materializes through Dagster, the graph is loaded over
   Bolt, and every plan the pipeline executes (teacher candidates, rewards, RL samples, evaluation) runs as Cypher
   over Bolt (``--traversal arrays``: in process, for a server too slow for the ~20k plans of training; the
   parity step below still runs every test plan over Bolt). Rerunning resumes.
2. Parity: the served planner's plans of every query of each evaluated split (``eval_metrics``'
   ``plans_<split>.parquet``, whose graph rankings ``graph_<split>.parquet`` were computed over Bolt) are executed
   again (a) over Bolt, (b) on the embedded LadybugDB store (loaded here, ``traversal="store"``) and (c) by the
   in-process traversal (``traversal="arrays"``); each ranking must equal the pipeline's: the same node ids in
   the same order, scores within 1e-6 (float32 sums of a float64 anchor score and a cosine).

``--seed-from ROOT`` (explicit; for a machine too slow for the whole pipeline): ROOT is the artifact root of a
finished ``grasp pipeline DATASET`` run (e.g. ``dagster_home/artifacts``) of the same code. Step 1 is then not run:
every ``ROOT/DATASET`` artifact but ``graph_store`` is copied into this run's artifact root (replacing what is
there; ``seeded`` in the results lists them), and ``graph_store`` alone is materialized through Dagster with
``--graph-store neo4j`` (the load over Bolt and its counts check). Step 2 then checks the copied evaluation's
served plans and graph rankings (computed by that run, in process or on its store) over Bolt, embedded and in
process. So it shows ranking parity and the Bolt load at the dataset's scale, not the training steps on the
server store.

Writes ``benchmarks/results/bolt_pipeline_<dataset>.json``: the per-step seconds, the graph loads (edges/s over
Bolt and embedded), per split and path the queries whose ranking is identical, the largest score difference, the
execution seconds and the traverse p50/p95 in ms; and the run's ``record`` (commit, machine, load average, date,
profile: ``benchmarks/harness.py``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see benchmarks/plan_execution.py

import argparse
import dataclasses
import secrets
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
from harness import RESULTS, Run, percentiles

from grasp_core.artifacts import Artifacts
from grasp_core.components import Components
from grasp_core.graph.bolt_server import server_from_env, start_bolt_server
from grasp_core.graph.config import GraphStoreConfig
from grasp_core.graph.open import open_graph_store
from grasp_core.io import read_json
from grasp_core.plan.execute import PlanExecutor
from grasp_core.profiles import get_profile, with_graph_store
from grasp_core.ranking import Ranking
from grasp_core.text.rankings_io import read_rankings

ROOT = Path(__file__).parent
CACHE = ROOT / ".cache"
TOLERANCE = 1e-6


def bolt_server(root: Path):
    """The server at $NEO4J_URI, else a local ArcadeDB one whose data (and generated password) live in ``root``."""
    given = server_from_env()
    if given is not None:
        return given
    secret = root / "password"
    if not secret.exists():
        root.mkdir(parents=True, exist_ok=True)
        secret.touch(mode=0o600)
        secret.write_text(secrets.token_urlsafe(18))
    return start_bolt_server(root, password=secret.read_text().strip(), heap="2g")


def same(a: Ranking, b: Ranking) -> tuple[bool, float]:
    if len(a) != len(b) or not np.array_equal(a.node_ids, b.node_ids):
        return False, float("inf")
    diff = float(np.abs(a.scores.astype(np.float64) - b.scores.astype(np.float64)).max()) if len(a) else 0.0
    return diff <= TOLERANCE, diff


def parity(components: Components, embedded, split: str) -> dict:
    """Each execution path's rankings of the served plans of ``split`` against the pipeline's (over Bolt)."""
    from grasp_core.pipeline.evaluation import SplitRun

    eval_dir = components.art.require("eval_metrics")
    plans = pd.read_parquet(eval_dir / f"plans_{split}.parquet")
    want = read_rankings(eval_dir / f"graph_{split}.parquet")
    run = SplitRun(components, split)
    assert plans["qid"].astype(int).tolist() == run.qids
    paths = {
        "bolt": (components.store, "store"),
        "embedded": (embedded, "store"),
        "arrays": (components.store, "arrays"),
    }
    out = {"queries": len(run.qids), "non_empty": sum(len(want[q]) > 0 for q in run.qids)}
    for name, (store, traversal) in paths.items():
        cfg = dataclasses.replace(components.profile.execution, traversal=traversal)
        executor = PlanExecutor(components.graph, components.index, components.encoder, store, cfg)
        start = time.perf_counter()
        got = executor.execute_batch(plans["plan"].tolist(), run.queries, run.tables)
        seconds = time.perf_counter() - start
        checks = [same(r, want[q]) for (r, _), q in zip(got, run.qids)]
        out[name] = {
            "identical": sum(ok for ok, _ in checks),
            "max_score_diff": max((d for _, d in checks), default=0.0),
            "seconds": round(seconds, 2),
            "traverse_ms": percentiles((1e3 * t.seconds["traverse"] for _, t in got), digits=2),
        }
        print(f"{split} {name}: {out[name]}", flush=True)
    return out


def seed(source: Path, root: Path, dataset: str) -> list[str]:
    """Copy every artifact of ``source/dataset`` but ``graph_store`` into ``root/dataset``; the names copied."""
    src = source / dataset
    if not (src / "eval_metrics").is_dir():
        raise SystemExit(f"--seed-from: {src} holds no eval_metrics artifact; give the root of a finished run")
    names = sorted(p.name for p in src.iterdir() if p.is_dir() and p.name != "graph_store")
    for name in names:
        shutil.rmtree(root / dataset / name, ignore_errors=True)
        shutil.copytree(src / name, root / dataset / name, symlinks=True)
    print(f"seeded from {src}: {', '.join(names)}", flush=True)
    return names


def materialize_graph_store(args: argparse.Namespace, root: Path) -> None:
    """``graph_store`` alone through Dagster on the server store (the seeded run's other artifacts are kept)."""
    import dagster as dg

    from grasp_assets.definitions import build_definitions
    from grasp_assets.partitions import DATASET
    from grasp_assets.resources import MLflowTracking, SettingsResource

    settings = SettingsResource(
        profile=args.profile, artifacts_root=str(root), scale=args.scale, n_queries=args.queries, graph_store="neo4j"
    )
    instance = dg.DagsterInstance.get()
    if not instance.has_dynamic_partition(DATASET, args.dataset):
        instance.add_dynamic_partitions(DATASET, [args.dataset])
    result = dg.materialize(
        list(build_definitions(settings.get_profile()).assets),
        selection=dg.AssetSelection.assets("graph_store"),
        partition_key=args.dataset,
        instance=instance,
        resources={"settings": settings, "mlflow": MLflowTracking(tracking_uri=os.environ["MLFLOW_TRACKING_URI"])},
    )
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    if not result.success or not all(checks.values()):
        raise SystemExit(f"graph_store over Bolt failed (checks: {checks})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", nargs="?", default="hpo")
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--scale", default="")
    parser.add_argument("--queries", type=int, default=0)
    parser.add_argument(
        "--traversal",
        default="store",
        choices=("store", "arrays"),
        help="the pipeline's plan traversal: store = every plan over Bolt; arrays = in process (the graph still "
        "loaded into the server, and the parity runs over Bolt either way)",
    )
    parser.add_argument(
        "--seed-from",
        type=Path,
        default=None,
        metavar="ROOT",
        help="the artifact root of a finished `grasp pipeline DATASET` run: copy its artifacts but graph_store, "
        "materialize only graph_store (over Bolt), then the parity (see the module doc)",
    )
    args = parser.parse_args()
    run = Run(profile=args.profile)
    home = CACHE / f"bolt-{args.dataset}"
    os.environ["DAGSTER_HOME"] = str(home / "dagster_home")
    os.environ.setdefault("MLFLOW_TRACKING_URI", f"sqlite:///{home / 'dagster_home' / 'mlflow.db'}")
    (home / "dagster_home").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT.parent / "dagster_home" / "dagster.yaml", home / "dagster_home" / "dagster.yaml")
    root = home / "artifacts"
    server = bolt_server(home / "server")
    try:
        os.environ.update(server.env())
        from grasp_assets.run import run_pipeline
        from grasp_assets.run_records import step_seconds

        start = time.perf_counter()
        seeded = seed(args.seed_from, root, args.dataset) if args.seed_from is not None else None
        if seeded is None:
            run_pipeline(
                args.dataset,
                profile=args.profile,
                root=str(root),
                scale=args.scale,
                n_queries=args.queries,
                graph_store="neo4j",
                traversal=args.traversal,
            )
        else:
            materialize_graph_store(args, root)
        pipeline_s = time.perf_counter() - start
        profile = with_graph_store(get_profile(args.profile), "neo4j", "store")  # harness.components takes a name
        components = Components(Artifacts.for_dataset(args.dataset, root), profile)
        bolt_load = read_json(components.art.require("graph_store") / "server.json")
        embedded_dir = home / "embedded_store"
        shutil.rmtree(embedded_dir, ignore_errors=True)
        embedded = open_graph_store(GraphStoreConfig(), embedded_dir)
        start = time.perf_counter()
        embedded.load(components.graph)
        embedded_load_s = time.perf_counter() - start
        splits = [
            s
            for s in ("test", "test-human")
            if (components.art.require("eval_metrics") / f"plans_{s}.parquet").exists()
        ]
        result = {
            "dataset": args.dataset,
            "pipeline_traversal": args.traversal if seeded is None else None,
            "seeded_from": str(args.seed_from.resolve()) if seeded is not None else None,
            "seeded": seeded,
            "server": "ArcadeDB (arcadedb-embedded) + Bolt" if server.pid is not None else "NEO4J_URI",
            "nodes": components.graph.num_nodes,
            "edges": len(components.graph.edges),
            "pipeline_s_this_run": round(pipeline_s, 1),
            "steps_s": {k: v for k, v in step_seconds(args.dataset).items() if k.split("/")[0] not in (seeded or ())},
            "load": {
                "bolt_s": bolt_load["load_seconds"],
                "bolt_edges_per_s": round(len(components.graph.edges) / bolt_load["load_seconds"]),
                "embedded_s": round(embedded_load_s, 2),
                "embedded_edges_per_s": round(len(components.graph.edges) / embedded_load_s),
            },
            "tolerance": TOLERANCE,
            "parity": {s: parity(components, embedded, s) for s in splits},
        }
        embedded.close()
        components.close()
        run.write(RESULTS / f"bolt_pipeline_{args.dataset}.json", result)
    finally:
        server.stop()


if __name__ == "__main__":
    main()

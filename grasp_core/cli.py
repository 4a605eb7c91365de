"""The `grasp` command: build and inspect data, run the pipeline, query a trained retriever."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

from grasp_core.artifacts import Artifacts
from grasp_core.components import EXTRACTORS
from grasp_core.errors import GraspError
from grasp_core.profiles import PROFILE_NAMES, get_profile
from grasp_core.textnorm import check_unicode

RESULTS_DIR = Path(__file__).resolve().parent.parent / "benchmarks" / "results"


def _data_build(args: argparse.Namespace) -> None:
    from grasp_core.pipeline.data import build_queries_artifact, build_skb_artifact

    cfg = get_profile(args.profile).dataset
    if args.scale:
        cfg = dataclasses.replace(cfg, scale=args.scale)
    art = Artifacts.for_dataset(args.dataset, args.root)
    start = time.perf_counter()
    graph = build_skb_artifact(art, args.dataset, cfg)
    print(
        f"skb: {graph['num_nodes']:,} nodes, {graph['num_edges']:,} edges in {graph['build_seconds']:.1f}s -> {graph['path']}"
    )
    if not args.no_queries:
        q = build_queries_artifact(art, args.dataset, cfg)
        print(f"queries: {q['num_queries']:,} {q['queries_per_split']} -> {q['path']}")
    print(f"done in {time.perf_counter() - start:.1f}s")


def _data_stats(args: argparse.Namespace) -> None:
    import pandas as pd

    from grasp_core.datasets import check_dataset
    from grasp_core.skb.format import read_skb

    check_dataset(args.dataset)
    art = Artifacts.for_dataset(args.dataset, args.root)
    queries = art.path("queries") / "queries.parquet"
    skb = read_skb(art.require("skb"), queries_file=queries if queries.exists() else None)
    print(f"dataset {args.dataset}: {skb.num_nodes:,} nodes, {len(skb.edges):,} edges")
    print("nodes per type:")
    for t, n in skb.node_type_counts().items():
        print(f"  {t:<28} {n:>10,}")
    print("edges per relation:")
    for r, n in skb.edge_counts().items():
        print(f"  {r:<28} {n:>10,}")
    print("queries per split:" if len(skb.queries) else "queries: not built yet (grasp data build)")
    for s, n in skb.split_counts().items():
        print(f"  {s:<28} {n:>10,}")
    if len(skb.queries):
        mix = pd.crosstab(skb.query_target_types(), skb.queries["split"])
        splits = list(mix.columns)
        print("query target types:" + "".join(f" {s:>10}" for s in splits) + f" {'all':>10} {'share':>7}")
        for t, row in mix.iterrows():
            share = 100 * row.sum() / len(skb.queries)
            print(f"  {t:<17}" + "".join(f" {row[s]:>10,}" for s in splits) + f" {row.sum():>10,} {share:>6.1f}%")


def _pipeline(args: argparse.Namespace) -> None:
    import importlib

    run = importlib.import_module("grasp_assets.run")  # the orchestration layer (Dagster); grasp_core stays free of it
    start = time.perf_counter()
    timings = run.run_pipeline(
        args.dataset,
        profile=args.profile,
        root=args.root,
        force=args.force,
        scale=args.scale or "",
        n_queries=args.queries or 0,
    )
    total = time.perf_counter() - start
    from grasp_core.report import dataset_report, dataset_results

    steps = importlib.import_module("grasp_assets.run_records").step_seconds(args.dataset)
    print()
    print(dataset_report(dataset_results(Artifacts.for_dataset(args.dataset, args.root), steps)))
    print(f"\npipeline time: {total / 60:.1f} min ({', '.join(f'{k} {v:.0f}s' for k, v in timings.items())})")
    print(
        "\nInspect it:\n  Dagster UI:  DAGSTER_HOME=$PWD/dagster_home .venv/bin/dagster dev -w workspace.yaml   (http://127.0.0.1:3000)"
    )
    print(
        "  MLflow UI:   .venv/bin/mlflow ui --backend-store-uri sqlite:///dagster_home/mlflow.db   (http://127.0.0.1:5000)"
    )


def _retriever(args: argparse.Namespace):
    from grasp_core.retriever import GraspRetriever

    return GraspRetriever.from_artifacts(
        args.dataset,
        args.root,
        args.profile,
        extractor=args.extractor,
        branches=args.branches,
        rerank=not args.no_rerank,
        parallel_branches=args.parallel_branches,
    )


def _query(args: argparse.Namespace) -> None:
    from grasp_core.explain import format_result
    from grasp_core.textnorm import normalize_text

    text = normalize_text(args.text, "the question argument")
    if not text:
        raise GraspError("the query is empty: pass the question as the second argument")
    result = _retriever(args).query(text, k=args.k)
    print(format_result(result))


def _retrieve(args: argparse.Namespace) -> None:
    from grasp_core.batch import check_batch_args, retrieve_file

    check_batch_args(args.queries, args.out, args.batch_size)  # before the models load
    stats = retrieve_file(_retriever(args), args.queries, args.out, batch_size=args.batch_size)
    print(
        f"answered {stats['answered']} queries -> {args.out}"
        + (f"; {stats['failed']} failed (error records in the output)" if stats["failed"] else "")
        + (f"; {stats['bad']} bad lines skipped (see above)" if stats["bad"] else "")
    )


def _serve(args: argparse.Namespace) -> None:
    from grasp_core.serve import serve

    serve(_retriever(args), Artifacts.for_dataset(args.dataset, args.root), args.profile, args.host, args.port)


def _report(args: argparse.Namespace) -> None:
    import importlib

    from grasp_core.report import cross_dataset_report, dataset_report, dataset_results, write_results

    step_seconds = importlib.import_module("grasp_assets.run_records").step_seconds  # Dagster's run records
    parts, tests = [], []
    for dataset in args.datasets:
        results = dataset_results(Artifacts.for_dataset(dataset, args.root), step_seconds(dataset))
        for path in write_results(results, args.results_dir):
            print(f"wrote {path}", file=sys.stderr)
        parts.append(dataset_report(results))
        tests += [results["test"]] if "test" in results else []
    text = "\n\n".join(parts)
    if len(args.datasets) > 1:
        text += "\n\n" + cross_dataset_report(tests)
    if args.out:
        from grasp_core.io import atomic_file

        with atomic_file(args.out) as handle:
            handle.write(text + "\n")
    if args.readme:
        from grasp_core.report import replace_readme_block

        replace_readme_block(args.readme, text)
    print(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grasp", description=__doc__)
    parser.add_argument("--profile", default="cpu", choices=PROFILE_NAMES, help="model/config profile (default: cpu)")
    parser.add_argument("--root", default=None, help="artifact root (default: $GRASP_HOME or dagster_home/artifacts)")
    sub = parser.add_subparsers(dest="command", required=True)

    data = sub.add_parser("data", help="build or inspect a dataset's SKB").add_subparsers(
        dest="data_command", required=True
    )
    build = data.add_parser("build", help="build the SKB and its queries")
    build.add_argument("dataset")
    build.add_argument("--scale", default=None, help="synthetic size: tiny | small | full | fraction")
    build.add_argument("--no-queries", action="store_true", help="build the graph only")
    build.set_defaults(func=_data_build)
    stats = data.add_parser("stats", help="print node/edge counts per type/relation and query counts per split")
    stats.add_argument("dataset")
    stats.set_defaults(func=_data_stats)

    pipe = sub.add_parser(
        "pipeline", help="materialize the whole DAG for a dataset through Dagster, then print its results"
    )
    pipe.add_argument("dataset", nargs="?", default="hpo")
    pipe.add_argument("--force", action="store_true", help="rebuild every asset, not only missing ones")
    pipe.add_argument("--scale", default=None, help="synthetic SKB size (tiny | small | full | fraction)")
    pipe.add_argument("--queries", type=int, default=None, help="number of synthesized queries")
    pipe.set_defaults(func=_pipeline)

    def retrieval_flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("dataset")
        p.add_argument("--branches", choices=("text", "graph", "both"), default="both", help="which branches to run")
        p.add_argument("--no-rerank", action="store_true", help="skip the reranker")
        p.add_argument(
            "--extractor",
            choices=EXTRACTORS,
            default=None,
            help="entity extractor (default: the profile's); llm asks $GRASP_EXTRACTOR_URL",
        )
        p.add_argument(
            "--parallel-branches",
            action="store_true",
            help="run the text branch in a thread beside the graph branch (slower on a busy 2-core machine)",
        )

    query = sub.add_parser("query", help="answer one question and explain every answer")
    retrieval_flags(query)
    query.add_argument("text")
    query.add_argument("-k", type=int, default=10, help="answers shown")
    query.set_defaults(func=_query)

    retrieve = sub.add_parser("retrieve", help="batch retrieval: JSONL in ({qid, query}), JSONL out (top 100)")
    retrieval_flags(retrieve)
    retrieve.add_argument("--queries", required=True, help='input JSONL, one {"qid", "query"} per line')
    retrieve.add_argument("--out", required=True, help='output JSONL, one {"qid", "ranking"} per line')
    retrieve.add_argument("--batch-size", type=int, default=32, help="queries answered together (at least 1)")
    retrieve.set_defaults(func=_retrieve)

    serve = sub.add_parser(
        "serve", help="HTTP API on loaded artifacts: POST /retrieve (batch), POST /query (explained), GET /health"
    )
    retrieval_flags(serve)
    serve.add_argument("--host", default="127.0.0.1", help="interface to bind (default: loopback only)")
    serve.add_argument("--port", type=int, default=8000, help="TCP port (default: 8000)")
    serve.set_defaults(func=_serve)

    report = sub.add_parser(
        "report",
        help="write datasets' results documents (JSON, from their evaluation assets and Dagster's run records) and "
        "print the tables rendered from them; with several datasets also the settings across them (Stouffer)",
    )
    report.add_argument("datasets", nargs="+")
    report.add_argument("--out", default=None, help="also write the markdown to this file")
    report.add_argument("--readme", default=None, help="also put the tables into this README's results block")
    report.add_argument(
        "--results-dir",
        default=str(RESULTS_DIR),
        help="where pipeline_<dataset>.json (and pipeline_<dataset>_test-human.json) are written "
        "(default: the checkout's benchmarks/results)",
    )
    report.set_defaults(func=_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    from grasp_core.quiet import quiet_libraries
    from grasp_core.redact import one_line_error

    args = build_parser().parse_args(argv)
    quiet_libraries()
    try:
        for name, value in vars(args).items():  # paths and names: refuse non-UTF-8 bytes before they reach a library
            if isinstance(value, str) and name != "text":
                check_unicode(value, f"argument {name}")
        args.func(args)
    except GraspError as exc:
        print(f"error: {one_line_error(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug, not bad input: one line, and the traceback only when asked for
        if os.environ.get("GRASP_DEBUG"):
            raise
        print(f"error: {one_line_error(exc)} (unexpected; GRASP_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: finished artifacts are kept, the unfinished one was discarded", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())

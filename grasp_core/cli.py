"""The library's commands of `grasp`: build and inspect data, query, batch-retrieve and serve a trained retriever.

The installed `grasp` command is :mod:`grasp_assets.cli`, which adds the two commands that drive Dagster
(`pipeline`, `report`) to these; this module never imports the orchestration layer.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

from grasp_core.artifacts import Artifacts
from grasp_core.components import EXTRACTORS
from grasp_core.errors import GraspError
from grasp_core.profiles import PROFILE_NAMES, get_profile
from grasp_core.textnorm import check_unicode


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


def _check(args: argparse.Namespace) -> None:
    from grasp_core.preflight import preflight

    problems = preflight(get_profile(args.profile), args.dataset)
    for problem in problems:
        print(f"  {problem}", file=sys.stderr)
    if problems:
        raise GraspError(
            f"{len(problems)} problem(s) above; profile {args.profile!r} is not ready for {args.dataset!r}"
        )
    print(f"profile {args.profile!r} is ready for {args.dataset!r}: models, devices and endpoints found")


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


def build_parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """The parser of the library's commands and its subcommand set, which :mod:`grasp_assets.cli` extends."""
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
    check = sub.add_parser(
        "check",
        help="preflight: the profile's model directories, devices and endpoints, and the dataset key; lists every "
        "problem with the setting to change (grasp pipeline runs it first)",
    )
    check.add_argument("dataset", nargs="?", default="hpo")
    check.set_defaults(func=_check)

    stats = data.add_parser("stats", help="print node/edge counts per type/relation and query counts per split")
    stats.add_argument("dataset")
    stats.set_defaults(func=_data_stats)

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

    return parser, sub


def main(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None) -> int:
    """Run one command; bad input ends with a one-line error and exit status 2 (``parser``: default the library's)."""
    from grasp_core.quiet import quiet_libraries
    from grasp_core.redact import one_line_error

    args = (parser or build_parser()[0]).parse_args(argv)
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

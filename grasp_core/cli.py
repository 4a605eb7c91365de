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
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from grasp_core.artifacts import Artifacts
from grasp_core.client import DEFAULT_SERVER
from grasp_core.environment import env, named_env
from grasp_core.errors import GraspError
from grasp_core.names import EXTRACTORS, GRAPH_STORES, PROFILE_NAMES, TRAVERSALS
from grasp_core.textnorm import check_unicode

if TYPE_CHECKING:
    from grasp_core.profiles import Profile

# Parsing a command line imports only light modules (grasp_core.names for the choices): the library, its configs
# and the model libraries load in the command that needs them, so `grasp query --server` and `--help` start fast.


def get_profile(name: str) -> Profile:
    """The profile ``name`` (:func:`grasp_core.profiles.get_profile`, imported by the commands that read one)."""
    from grasp_core.profiles import get_profile as profile

    return profile(name)


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


def _data_fetch(args: argparse.Namespace) -> None:
    from grasp_core.sources.stark_fetch import fetch_stark

    cfg = get_profile(args.profile).dataset
    fetch_stark(args.dataset, cfg.stark_root, cfg.stark_qa_root)
    if not args.no_build:
        _data_build(argparse.Namespace(**vars(args), scale=None, no_queries=False))


def _data_stats(args: argparse.Namespace) -> None:
    import pandas as pd

    from grasp_core.datasets import check_dataset
    from grasp_core.io import is_complete
    from grasp_core.skb.format import read_skb

    check_dataset(args.dataset)
    art = Artifacts.for_dataset(args.dataset, args.root)
    queries = art.require("queries") / "queries.parquet" if is_complete(art.path("queries")) else None
    skb = read_skb(art.require("skb"), queries_file=queries)
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
    if "template" in skb.queries:
        from grasp_core.questions.generic_queries import synthesis_mix

        for title, counts in synthesis_mix(skb.queries).items():
            print(f"queries per {title}:")
            for key, n in counts.items():
                print(f"  {key:<60} {n:>8,} {100 * n / len(skb.queries):>6.1f}%")


def _data_import(args: argparse.Namespace) -> None:
    from pathlib import Path

    from grasp_core.datasets import BUILTIN, DatasetConfig

    target = Path(args.target)
    if len(target.parts) == 1 and not args.target.startswith("."):  # a dataset key: the user SKB directory
        if args.target in BUILTIN:
            raise GraspError(f"{args.target!r} is a built-in dataset: import under another name")
        target = Path(DatasetConfig().user_skb_root) / args.target
    if args.bolt:
        from grasp_core.sources.bolt_import import import_bolt

        skb = import_bolt(target, args.bolt, args.bolt_user, named_env(args.bolt_password_env), args.bolt_database)
    elif args.nodes and args.edges:
        from grasp_core.sources.importer import import_files

        skb = import_files(target, args.nodes, args.edges, args.schema, args.wording)
    else:
        raise GraspError("give --nodes FILE and --edges FILE (CSV or JSON lines), or --bolt URI")
    print(
        f"imported {skb.num_nodes:,} nodes ({len(skb.schema.node_types)} types), {len(skb.edges):,} edges "
        f"({len(skb.schema.relations)} relations) -> {target}"
    )
    print(f"question wording to edit: {target / 'wording.json'}; next: grasp pipeline {target.name}")


def _verify(args: argparse.Namespace) -> None:
    from grasp_core.datasets import check_dataset
    from grasp_core.errors import CorruptArtifactError

    check_dataset(args.dataset)
    art = Artifacts.for_dataset(args.dataset, args.root)
    built = art.built()
    if not built:
        raise GraspError(f"no built artifact of {args.dataset!r} under {art.root}: build them with grasp pipeline")
    corrupt = 0
    for name, round_key in built:
        label = name if round_key is None else f"{name}/{round_key}"
        try:
            m = art.verify(name, round_key)
        except CorruptArtifactError as exc:
            corrupt += 1
            print(f"CORRUPT {label}: {exc}")
            continue
        size = sum(e.size for e in m.files.values())
        print(f"ok      {label}: {len(m.files)} files, {size / 2**20:.1f} MiB, digest {m.digest}")
    if corrupt:
        raise CorruptArtifactError(
            f"{corrupt} of {len(built)} artifacts of {args.dataset!r} are corrupt; rebuild them: grasp pipeline {args.dataset}"
        )
    print(f"{len(built)} artifacts of {args.dataset!r} verified (sizes and content hashes)")


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
        graph_store=args.graph_store or "",
        traversal=args.traversal or "",
        variant=getattr(args, "variant", None) or None,
    )


def _query(args: argparse.Namespace) -> None:
    from grasp_core.textnorm import normalize_text

    text = normalize_text(args.text, "the question argument")
    if not text:
        raise GraspError("the query is empty: pass the question as the second argument")
    if args.server:
        _query_server(args, text)
        return
    from grasp_core.gc_pause import collector_paused

    with collector_paused():  # a one-off process: importing, loading and answering leave nothing to collect
        from grasp_core.explain import format_result

        result = _retriever(args).query(text, k=args.k)
    print(format_result(result))
    if args.one_off:
        _exit_now()


def _exit_now() -> NoReturn:
    """End the ``grasp`` process now that the answer is printed, without the interpreter's teardown: freeing each
    of the objects torch, the indexes and the graph left takes longer than the answer did, and a question's
    process holds nothing to flush or close (no file open for writing, no run to record)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _query_server(args: argparse.Namespace, text: str) -> None:
    """``grasp query --server``: the running ``grasp serve``'s answer (:mod:`grasp_core.client`); this process loads
    no model, so the flags that configure a local retriever are refused rather than silently ignored."""
    from grasp_core.client import ask_server

    local = {"--extractor": args.extractor, "--parallel-branches": args.parallel_branches}
    local |= {
        "--graph-store": args.graph_store,
        "--traversal": args.traversal,
        "--variant": getattr(args, "variant", None),
    }
    if given := [flag for flag, value in local.items() if value]:
        verb = "configures" if len(given) == 1 else "configure"
        raise GraspError(
            f"{', '.join(given)} {verb} a local retriever, and with --server the server answers with its own settings: "
            "give them to grasp serve, or drop --server"
        )
    settings = {"profile": args.profile, "branches": args.branches, "rerank": not args.no_rerank}
    print(ask_server(args.server, args.dataset, text, args.k, settings))


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
    from grasp_core.experiments import variant_key
    from grasp_core.releases import served_artifacts
    from grasp_core.serve import serve

    art = served_artifacts(variant_key(args.dataset, args.variant), args.root)
    serve(_retriever(args), art, args.profile, args.host, args.port, log_questions=not args.no_log_questions)


def _feedback_store(args: argparse.Namespace):
    """The dataset's feedback store, checking answer keys against its built SKB (only the keys are read)."""
    from grasp_core.datasets import check_dataset
    from grasp_core.feedback import FeedbackStore, skb_keys

    check_dataset(args.dataset)
    return FeedbackStore(args.dataset, skb_keys(Artifacts.for_dataset(args.dataset, args.root)))


def _feedback_add(args: argparse.Namespace) -> None:
    record = {"answer_key": args.answer, "relevant": not args.irrelevant}
    record |= {"request_id": args.request_id} if args.request_id else {"query": args.query}
    with _feedback_store(args) as store:
        (fid,) = store.add([record], "cli")
    verdict = "irrelevant" if args.irrelevant else "relevant"
    print(f"feedback {fid} recorded: {args.answer!r} {verdict} -> {store.path}")


def _feedback_import(args: argparse.Namespace) -> None:
    import json

    from grasp_core.textnorm import decode_line

    path = Path(args.file)
    if not path.is_file():
        raise GraspError(f"feedback file {path} does not exist")
    good, bad, lines = [], 0, 0
    with _feedback_store(args) as store, path.open("rb") as f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            lines += 1
            try:
                line = decode_line(raw, f"line {n}")
                try:
                    record = json.loads(line)
                except ValueError as exc:
                    raise GraspError(f"line {n}: not JSON ({exc})") from None
                good.append(store.check(record, f"line {n}"))
            except GraspError as exc:
                bad += 1
                print(f"  {exc}", file=sys.stderr)
        ids = store.insert(good, "import")
    print(f"imported {len(ids)} feedback records from {path} -> {store.path}")
    if bad:
        raise GraspError(
            f"{bad} of {lines} lines of {path} were refused (listed above); the other {len(ids)} were kept"
        )


def _feedback_list(args: argparse.Namespace) -> None:
    import json

    from grasp_core.feedback import FeedbackStore, store_path

    if args.limit < 0:
        raise GraspError(f"--limit must be 0 (all) or more, not {args.limit}")
    store = FeedbackStore.existing(args.dataset)
    if store is None:
        print(f"no feedback for {args.dataset!r} yet (the store would be {store_path(args.dataset)})", file=sys.stderr)
        return
    with store:
        rows = store.rows(args.limit or None)
        counts = store.counts()
    for row in rows:
        if args.json:
            print(json.dumps(row, ensure_ascii=False))
        else:
            question = row["question"] if row["question"] is not None else f"(request {row['request_id']})"
            verdict = "relevant" if row["relevant"] else "irrelevant"
            print(
                f"{row['id']:>6}  {row['created_at']}  {row['source']:<6}  {verdict:<10}  {row['answer_key']}  {question}"
            )
    if not args.json:
        print(
            f"{counts['feedback']} feedback records ({counts['confirmed']} relevant) on {counts['requests']} served "
            f"questions in {store.path}",
            file=sys.stderr,
        )


def _compare(args: argparse.Namespace) -> None:
    import json

    from grasp_core.experiments import compare, render_comparison

    doc = compare(args.dataset, args.variants, args.root, args.profile)
    print(json.dumps(doc, indent=2) if args.json else render_comparison(doc))


def _mcp(args: argparse.Namespace) -> None:
    from grasp_core.integrations.mcp_server import serve_stdio  # the missing extra's one-line error comes first

    serve_stdio(lambda: _retriever(args))


def _bolt_server(args: argparse.Namespace) -> None:
    from grasp_core.graph.bolt_server import start_bolt_server
    from grasp_core.home import grasp_home

    root = (args.dir or grasp_home() / "bolt-server").resolve()
    password, shown = env("NEO4J_PASSWORD"), "$NEO4J_PASSWORD (yours)"
    if not password:  # a generated one, kept beside the database (which keeps the first password it is given)
        secret = root / "password"
        if not secret.exists():
            import secrets

            root.mkdir(parents=True, exist_ok=True)
            secret.touch(mode=0o600)
            secret.write_text(secrets.token_urlsafe(18))
        password, shown = secret.read_text().strip(), f"$(cat {secret})"
    server = start_bolt_server(root, port=args.port, password=password, heap=args.heap)
    print(f"ArcadeDB Bolt server on {server.uri} (database {server.database}, pid {server.pid}, data in {root})")
    print(f"  export NEO4J_URI={server.uri} NEO4J_USER={server.user} NEO4J_PASSWORD={shown}")
    print("Ctrl-C stops it.", flush=True)
    try:
        while server.running():
            time.sleep(1.0)
        raise GraspError(f"the Bolt server exited; see {root / 'server.log'}")
    except KeyboardInterrupt:
        print("stopping the Bolt server", file=sys.stderr)
    finally:
        server.stop()


def graph_store_flags(p: argparse.ArgumentParser) -> None:
    """``--graph-store`` and ``--traversal``: run on another graph store backend than the profile's."""
    p.add_argument(
        "--graph-store",
        choices=GRAPH_STORES,
        default=None,
        help="graph store backend (default: the profile's, ladybug); neo4j = any Bolt server at $NEO4J_URI "
        "($NEO4J_USER, $NEO4J_PASSWORD)",
    )
    p.add_argument(
        "--traversal",
        choices=TRAVERSALS,
        default=None,
        help="plan traversal (default: the profile's, arrays = in process); store = the plan's Cypher on the store",
    )


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
    fetch = data.add_parser(
        "fetch",
        help="download a STaRK dataset's processed SKB and questions from the Hugging Face hub (as stark-qa does) into "
        "$GRASP_STARK_ROOT (default: stark/ in the instance), verify them and build its SKB; offline, name the files "
        "to download by hand",
    )
    fetch.add_argument("dataset", choices=("amazon", "mag", "prime"))
    fetch.add_argument("--no-build", action="store_true", help="download and verify only (grasp data build later)")
    fetch.set_defaults(func=_data_fetch)
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
    imp = data.add_parser(
        "import",
        help="make a user SKB from CSV / JSON lines files or a Bolt graph database (queries are synthesized later)",
    )
    imp.add_argument("target", help="a dataset key (written under $GRASP_USER_SKBS) or a directory path")
    imp.add_argument("--nodes", help="nodes file: id, type, name, [aliases], one column per text field")
    imp.add_argument("--edges", help="edges file: src, rel, dst (node ids)")
    imp.add_argument("--schema", help="schema.json to check against (default: inferred from the files)")
    imp.add_argument(
        "--wording", help="wording.json to use for the synthesized questions (default: written from the names)"
    )
    imp.add_argument("--bolt", help="read a Bolt graph database instead (bolt://host:port or neo4j://...)")
    imp.add_argument("--bolt-user", default="neo4j", help="Bolt user (default: neo4j)")
    imp.add_argument(
        "--bolt-password-env",
        default="NEO4J_PASSWORD",
        help="variable holding the Bolt password (default: NEO4J_PASSWORD)",
    )
    imp.add_argument("--bolt-database", default=None, help="database name (default: the server's default)")
    imp.set_defaults(func=_data_import)

    verify = sub.add_parser(
        "verify", help="check every built artifact of a dataset against its manifest (sizes and content hashes)"
    )
    verify.add_argument("dataset")
    verify.set_defaults(func=_verify)

    compare = sub.add_parser(
        "compare",
        help="the evaluation of variants of a dataset side by side: per split, every setting's Hit@1/Hit@5/R@20/MRR "
        "per variant with McNemar p (per-query Hit@1, paired by query) against the first, then the settings that "
        "differ",
    )
    compare.add_argument("dataset")
    compare.add_argument(
        "variants",
        nargs="*",
        metavar="VARIANT",
        help="variants (experiments/VARIANT.toml) or partition keys (DATASET+VARIANT); `base` is the base profile "
        "(default: base)",
    )
    compare.add_argument("--json", action="store_true", help="print the comparison as JSON")
    compare.set_defaults(func=_compare)

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
        graph_store_flags(p)
        p.add_argument(
            "--variant",
            default=None,
            help="answer with a variant's artifacts and settings (experiments/VARIANT.toml, built by grasp pipeline "
            "DATASET --variant VARIANT; default: the base profile's)",
        )

    query = sub.add_parser("query", help="answer one question and explain every answer")
    retrieval_flags(query)
    query.add_argument("text")
    query.add_argument("-k", type=int, default=10, help="answers shown")
    query.add_argument(
        "--server",
        nargs="?",
        const=DEFAULT_SERVER,
        default=None,
        metavar="URL",
        help=f"ask the grasp serve running at URL (default: {DEFAULT_SERVER}) instead of loading the models here: "
        "the same answer and explanation in the server's warm time; it must serve DATASET with the same --profile, "
        "--branches and --no-rerank",
    )
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
    serve.add_argument(
        "--no-log-questions",
        action="store_true",
        help="keep only request ids and the answer keys served in the feedback store, not the questions' text",
    )
    serve.set_defaults(func=_serve)

    fb = sub.add_parser(
        "feedback",
        help="record, import or list feedback on answers (docs/feedback.md); grasp serve takes POST /feedback",
    ).add_subparsers(dest="feedback_command", required=True)
    fb_add = fb.add_parser("add", help="record that an answer is relevant (or not) to a question")
    fb_add.add_argument("dataset")
    asked = fb_add.add_mutually_exclusive_group(required=True)
    asked.add_argument("--query", help="the question")
    asked.add_argument("--request-id", help="the request id of an answer of grasp serve")
    fb_add.add_argument("--answer", required=True, help="the answer's key (the key field of an answer)")
    fb_add.add_argument("--irrelevant", action="store_true", help="the answer is wrong for the question")
    fb_add.set_defaults(func=_feedback_add)
    fb_import = fb.add_parser(
        "import",
        help='append a JSONL file of {"request_id" or "query", "answer_key", "relevant"}; bad lines are listed',
    )
    fb_import.add_argument("dataset")
    fb_import.add_argument("file")
    fb_import.set_defaults(func=_feedback_import)
    fb_list = fb.add_parser("list", help="print the recorded feedback, oldest first")
    fb_list.add_argument("dataset")
    fb_list.add_argument("--limit", type=int, default=50, help="the last N records (default: 50; 0: all)")
    fb_list.add_argument("--json", action="store_true", help="one JSON object per line")
    fb_list.set_defaults(func=_feedback_list)

    mcp = sub.add_parser(
        "mcp",
        help="MCP server over stdio (tools: search, explain) for agents and MCP clients; needs pip install 'grasp[mcp]'",
    )
    retrieval_flags(mcp)
    mcp.set_defaults(func=_mcp)

    dev = sub.add_parser("dev", help="development helpers").add_subparsers(dest="dev_command", required=True)
    bolt = dev.add_parser(
        "bolt-server", help="run a local Bolt server (ArcadeDB from the arcadedb-embedded wheel) for the neo4j backend"
    )
    bolt.add_argument("--dir", type=Path, default=None, help="data directory (default: <DAGSTER_HOME>/bolt-server)")
    bolt.add_argument("--port", type=int, default=7687, help="Bolt port on 127.0.0.1 (default: 7687; 0 = a free one)")
    bolt.add_argument("--heap", default="2g", help="the JVM's maximum heap (default: 2g)")
    bolt.set_defaults(func=_bolt_server)

    return parser, sub


def main(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None, one_off: bool = False) -> int:
    """Run one command; bad input ends with a one-line error and exit status 2 (``parser``: default the library's).
    ``one_off``: this is the process's only command (the ``grasp`` executable), so ``grasp query`` may end the
    process as soon as its answer is printed."""
    from grasp_core.quiet import quiet_libraries
    from grasp_core.redact import one_line_error

    args = (parser or build_parser()[0]).parse_args(argv)
    args.one_off = one_off
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
        if env("GRASP_DEBUG"):
            raise
        print(f"error: {one_line_error(exc)} (unexpected; GRASP_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: finished artifacts are kept, the unfinished one was discarded", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(one_off=True))

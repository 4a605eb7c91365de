"""The installed `grasp` command: the library's commands (:mod:`grasp_core.cli`) plus the two that drive Dagster.

- ``grasp pipeline DATASET`` materializes the whole DAG through Dagster (:mod:`grasp_assets.run`), then prints the
  dataset's results;
- ``grasp report DATASET...`` writes the results documents from the evaluation assets and Dagster's run records
  into the instance (``$DAGSTER_HOME/reports/``) or ``--results-dir``.

Dagster and the report code are imported only when one of these two runs, so ``grasp query`` starts as fast as the
library allows.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import NoReturn

from grasp_core import cli as core_cli
from grasp_core.artifacts import Artifacts


def results_dir(args: argparse.Namespace) -> Path:
    """Where ``grasp report`` writes and ``--recorded`` reads the results documents: ``--results-dir``, else the
    instance's ``reports/`` (``$DAGSTER_HOME/reports``); the checkout's shipped ones are ``benchmarks/results``."""
    from grasp_core.home import grasp_home

    return Path(args.results_dir) if args.results_dir else grasp_home() / "reports"


def _pipeline(args: argparse.Namespace) -> None:
    from grasp_assets.run import run_pipeline
    from grasp_assets.run_records import step_seconds
    from grasp_core.experiments import artifacts_for, split_key, variant_key
    from grasp_core.report import dataset_report, dataset_results

    start = time.perf_counter()
    timings = run_pipeline(
        args.dataset,
        profile=args.profile,
        root=args.root,
        force=args.force,
        scale=args.scale or "",
        n_queries=args.queries or 0,
        graph_store=args.graph_store or "",
        traversal=args.traversal or "",
        variant=args.variant,
    )
    total = time.perf_counter() - start
    print()
    key = variant_key(*split_key(args.dataset)) if args.variant is None else variant_key(args.dataset, args.variant)
    print(dataset_report(dataset_results(artifacts_for(key, args.root), step_seconds(key))))
    print(f"\npipeline time: {total / 60:.1f} min ({', '.join(f'{k} {v:.0f}s' for k, v in timings.items())})")
    print(
        "\nInspect it:\n  Dagster UI:  DAGSTER_HOME=$PWD/dagster_home .venv/bin/dagster dev -w workspace.yaml   (http://127.0.0.1:3000)"
    )
    print(
        "  MLflow UI:   .venv/bin/mlflow ui --backend-store-uri sqlite:///dagster_home/mlflow.db   (http://127.0.0.1:5000)"
    )


RESULTS_PAGE_HEAD = (
    "# Results\n\nEvery setting, ablation, latency stage and step time of each dataset, rendered by `grasp report` "
    "from the results files (do not edit: rerun the command in the README's Results section).\n\n"
)


def _report(args: argparse.Namespace) -> None:
    from grasp_assets.run_records import step_seconds
    from grasp_core.report import (
        cross_dataset_report,
        dataset_report,
        dataset_results,
        recorded_results,
        write_results,
    )

    parts, tests, by_dataset = [], [], {}
    for dataset in dict.fromkeys([*args.datasets, *args.recorded]):  # in the order first named, each once
        if dataset in args.recorded:  # an earlier run's documents, rendered again as they are
            results = recorded_results(results_dir(args), dataset)
            print(f"read the recorded results of {dataset} (commit {results['test']['commit']})", file=sys.stderr)
        else:
            results = dataset_results(Artifacts.for_dataset(dataset, args.root), step_seconds(dataset))
            for path in write_results(results, results_dir(args)):
                print(f"wrote {path}", file=sys.stderr)
        parts.append(dataset_report(results))
        by_dataset[dataset] = results
        tests += [results["test"]] if "test" in results else []
    text = "\n\n".join(parts)
    if len(by_dataset) > 1:
        text += "\n\n" + cross_dataset_report(tests)
    if args.out:
        from grasp_core.io import atomic_file

        with atomic_file(args.out) as handle:
            handle.write(RESULTS_PAGE_HEAD + text + "\n")
    if args.readme:
        from grasp_core.report import replace_readme_block, summary_report

        replace_readme_block(args.readme, summary_report(by_dataset))
    print(text)


def _gc(args: argparse.Namespace) -> None:
    """``grasp gc DATASET+VARIANT``: delete a variant's artifacts, its reuse records and its Dagster partition."""
    import os

    import dagster as dg

    from grasp_assets.partitions import DATASET
    from grasp_core.datasets import check_dataset
    from grasp_core.errors import GraspError
    from grasp_core.experiments import artifacts_for, split_key, variant_key
    from grasp_core.home import CHECKOUT_HOME
    from grasp_core.reuse import collect

    dataset, variant = split_key(args.key)
    if args.variant:
        variant = args.variant
    if not variant:
        raise GraspError(
            f"{args.key!r} is not a variant: give DATASET+VARIANT (or --variant); a dataset's own artifacts are "
            "removed by deleting its directory"
        )
    check_dataset(dataset)
    key = variant_key(dataset, variant)
    done = collect(artifacts_for(key, args.root).root, key)
    os.environ.setdefault("DAGSTER_HOME", str(CHECKOUT_HOME))
    with dg.DagsterInstance.get() as instance:
        if instance.has_dynamic_partition(DATASET, key):
            instance.delete_dynamic_partition(DATASET, key)
    print(
        f"removed {key}: {done.artifacts} artifacts, {done.files} files; freed {done.freed / 2**20:.1f} MiB, "
        f"{done.shared / 2**20:.1f} MiB stay (linked from other partitions); {done.index_entries} reuse records "
        f"updated; its Dagster partition was deleted (its run history stays)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser, sub = core_cli.build_parser()
    parser.description = "Build data, train GRASP through Dagster, query, retrieve and serve."
    pipe = sub.add_parser(
        "pipeline", help="materialize the whole DAG for a dataset through Dagster, then print its results"
    )
    pipe.add_argument("dataset", nargs="?", default="hpo")
    pipe.add_argument("--force", action="store_true", help="rebuild every asset, not only missing ones")
    pipe.add_argument("--scale", default=None, help="synthetic SKB size (tiny | small | full | fraction)")
    pipe.add_argument("--queries", type=int, default=None, help="number of synthesized queries")
    pipe.add_argument(
        "--variant",
        default=None,
        help="build a variant (experiments/VARIANT.toml: the profile with its overrides) as the partition "
        "DATASET+VARIANT; what it does not change is linked from the artifacts that have it (docs/experiments.md)",
    )
    core_cli.graph_store_flags(pipe)
    pipe.set_defaults(func=_pipeline)

    report = sub.add_parser(
        "report",
        help="write datasets' results documents (JSON, from their evaluation assets and Dagster's run records) and "
        "print the tables rendered from them; with several datasets also the settings across them (Stouffer)",
    )
    report.add_argument("datasets", nargs="+")
    report.add_argument(
        "--recorded",
        nargs="*",
        default=[],
        metavar="DATASET",
        help="datasets whose results documents an earlier report wrote into --results-dir (default: the instance's "
        "reports/; the shipped ones: --results-dir benchmarks/results): rendered beside the others as they are (their "
        "artifacts need not exist here)",
    )
    report.add_argument("--out", default=None, help="also write the markdown to this file")
    report.add_argument(
        "--readme",
        default=None,
        help="also put the summary tables (the answer path's Hit@1 per dataset and split, learned vs fixed parts) "
        "into this README's results block; --out takes the full tables",
    )
    report.add_argument(
        "--results-dir",
        default=None,
        help="where pipeline_<dataset>.json (and pipeline_<dataset>_test-human.json) are written and --recorded reads "
        "them (default: $DAGSTER_HOME/reports, the instance's; benchmarks/results: the checkout's shipped results)",
    )
    report.set_defaults(func=_report)

    gc = sub.add_parser(
        "gc",
        help="delete a variant (its artifacts, reuse records and Dagster partition): frees the files no other "
        "variant links to, prints what was freed",
    )
    gc.add_argument("key", metavar="DATASET+VARIANT", help="the variant's partition key, e.g. hpo+rerank-k20")
    gc.add_argument("--variant", default=None, help="the variant, when KEY is the dataset alone")
    gc.set_defaults(func=_gc)
    return parser


def main(argv: list[str] | None = None) -> int:
    return core_cli.main(argv, build_parser())


def run() -> NoReturn:
    """The ``grasp`` executable: one command, then the process ends (``grasp query`` as soon as it has answered)."""
    sys.exit(core_cli.main(None, build_parser(), one_off=True))


if __name__ == "__main__":
    run()

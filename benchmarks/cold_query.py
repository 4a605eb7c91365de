"""What a first answer costs: one ``grasp query`` from a cold shell, the part of it spent importing, and ``grasp query --server``.

Wall and CPU seconds and peak memory of each (the median of the runs), with the 1-minute load average at the start
and the end in the run's ``record`` (with the commit, machine and date: ``benchmarks/harness.py``).

Run: ``python benchmarks/cold_query.py hpo [--root DIR] [--runs 3] [--question TEXT] [--out FILE] [--no-server]
[--before DIR]``; writes ``benchmarks/results/cold_query.json`` (or ``--out``) and prints it.

Each run starts ``grasp query DATASET QUESTION`` as a new process (the installed command, as a user types it)
and times it to exit; CPU seconds and peak RSS are the child's own (``os.wait4``). ``imports_s`` is the part of
that spent importing modules, from one more run with ``-X importtime`` (the sum of its top-level imports'
cumulative times; the tracing itself adds a little), so the rest is loading the artifacts and answering. The
operating system's file cache is warm after the first run (the figures are the median of the runs); the load
average is recorded because the machine may be shared.

With ``--before DIR`` the same is timed for the code under DIR (``PYTHONPATH``; a copy of the package directories
is enough), run by run interleaved with this checkout's, as ``before``: on a shared machine only figures taken side
by side compare. That code runs as ``python -P -m grasp_assets.cli`` (its own entry point: the installed ``grasp``
command calls this checkout's; ``-P``, or the working directory's code would be imported first).

Then (unless ``--no-server``) it starts ``grasp serve DATASET`` on a free port (``harness.start_serve``; its feedback
store in a temporary instance directory, so the user's store gets no benchmark questions), waits until it answers
``/health`` (``server.startup_s``: the models loaded and warmed up once), and times ``grasp query DATASET QUESTION
--server URL`` the same way: the whole command, Python start included, with the server warm.

``bytecode_cached`` is the share of the modules a retriever import loads whose compiled bytecode (``.pyc``) was
found: with ``PYTHONDONTWRITEBYTECODE=1`` set and a virtual environment installed without it, every import
compiles its sources again and the imports take several times as long, which no change of ours would show.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import RESULTS, Run, percentiles, start_serve

from grasp_core.artifacts import Artifacts

GRASP = Path(sys.executable).with_name("grasp")  # the installed command a user types (not harness.GRASP's -m)
# the modules a bytecode check imports: the library's answer path
IMPORTS = "import grasp_core.retriever"
BYTECODE = (
    f"import os, sys\n{IMPORTS}\n"
    "ms = [m for m in list(sys.modules.values()) if isinstance(getattr(m, '__cached__', None), str)]\n"
    "print(sum(os.path.exists(m.__cached__) for m in ms) / len(ms))"
)


def child_usage(cmd: list[str], env: dict | None = None) -> dict:
    """Wall seconds, CPU seconds and peak RSS of one child process run to completion."""
    return _child(cmd, env)[0]


def import_seconds(cmd: list[str], env: dict | None = None) -> float:
    """Seconds ``cmd`` (a ``grasp`` command) spends importing: its top-level imports under ``-X importtime``."""
    _, err = _child([sys.executable, "-X", "importtime", *cmd], env)
    top = re.findall(r"^import time:\s+\d+ \|\s+(\d+) \| \S", err, flags=re.MULTILINE)  # not indented: top level
    return round(sum(map(int, top)) / 1e6, 2)


def _child(cmd: list[str], env: dict | None) -> tuple[dict, str]:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
        if proc.returncode:
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {stderr.strip()[-500:]}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "max_rss_mib": usage.ru_maxrss / 1024}, stderr


def median(runs: list[dict]) -> dict:
    """Per measure (wall and CPU seconds, peak MiB), its median over the runs."""
    return {k: percentiles((r[k] for r in runs), points=(50,))["p50"] for k in runs[0]}


def _side_env(directory: Path) -> dict:
    """The environment that makes a child import the grasp_core under ``directory`` (checked)."""
    env = {**os.environ, "PYTHONPATH": str(directory.resolve())}
    code = "import grasp_core, grasp_assets; print(grasp_core.__file__, grasp_assets.__file__)"
    found = subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True, text=True)
    if found.returncode or not all(Path(f).is_relative_to(directory.resolve()) for f in found.stdout.split()):
        raise SystemExit(f"--before {directory}: its grasp_core and grasp_assets are not what a child imports")
    return env


def server_runs(dataset: str, root: str, question: str, runs: int) -> dict:
    """Start ``grasp serve``, time ``grasp query --server`` against it ``runs`` times, stop it."""
    with tempfile.TemporaryDirectory() as instance:
        env = {**os.environ, "DAGSTER_HOME": instance}  # the server's feedback store goes there
        start = time.perf_counter()
        server, url, _ = start_serve(dataset, ["--root", root], env=env)
        startup = time.perf_counter() - start
        try:
            client = [str(GRASP), "query", dataset, question, "--server", url]
            child_usage(client, env)  # the server's first question after its warm-up one
            client_runs = []
            for i in range(runs):
                client_runs.append(child_usage(client, env))
                print(f"run {i + 1}: query --server {client_runs[-1]['wall_s']:.2f} s wall", flush=True)
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
    return {
        "command": " ".join(["grasp", "query", dataset, repr(question), "--server", "URL"]),
        "startup_s": round(startup, 2),
        "query": median(client_runs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", default="hpo")
    parser.add_argument("--root", default=None, help="artifact root (default: $GRASP_HOME or dagster_home/artifacts)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--question", default="Which genes are linked to Rett syndrome?")
    parser.add_argument(
        "--out", type=Path, default=RESULTS / "cold_query.json", help="results file (default: %(default)s)"
    )
    parser.add_argument("--no-server", action="store_true", help="skip the grasp serve / query --server part")
    parser.add_argument(
        "--before",
        type=Path,
        default=None,
        metavar="DIR",
        help="also time the grasp_core and grasp_assets under DIR (a checkout or a copy of the code before a change), "
        "interleaved with this checkout's run by run, under the results' `before`",
    )
    args = parser.parse_args()
    run = Run(profile="cpu")  # grasp query's and grasp serve's default
    root = ["--root", args.root] if args.root else []
    query = [str(GRASP), *root, "query", args.dataset, args.question]
    sides = {"after": None}
    if args.before is not None:
        sides = {"before": _side_env(args.before), "after": None}
    bytecode = subprocess.run([sys.executable, "-P", "-c", BYTECODE], capture_output=True, text=True, check=True).stdout
    runs: dict[str, dict[str, list[dict]]] = {side: {"query": []} for side in sides}
    # -P: the working directory (a checkout of this code) must not shadow the code under DIR
    commands = {"after": query, "before": [sys.executable, "-P", "-m", "grasp_assets.cli", *query[1:]]}
    for i in range(args.runs):  # the sides alternate, and which goes first alternates from run to run
        order = list(sides) if i % 2 == 0 else list(reversed(sides))
        for side in order:
            runs[side]["query"].append(child_usage(commands[side], sides[side]))
            print(f"run {i + 1}: {side} query {runs[side]['query'][-1]['wall_s']:.1f} s wall", flush=True)
    result = {
        "command": " ".join(["grasp", *root, "query", args.dataset, repr(args.question)]),
        "runs": args.runs,
        "query": median(runs["after"]["query"]),
        "imports_s": import_seconds([str(GRASP), *query[1:]]),
        "bytecode_cached": round(float(bytecode), 3),
    }
    if args.before is not None:
        pairs = zip(runs["before"]["query"], runs["after"]["query"])
        result["before"] = {
            "code": str(args.before),
            "query": median(runs["before"]["query"]),
            "imports_s": import_seconds(commands["before"][1:], sides["before"]),
            "query_wall_s_saved_per_run": [round(b["wall_s"] - a["wall_s"], 2) for b, a in pairs],
        }
    if not args.no_server:
        serve_root = str(Artifacts.for_dataset(args.dataset, args.root).root)  # before DAGSTER_HOME moves
        result["server"] = server_runs(args.dataset, serve_root, args.question, args.runs)
    run.write(args.out, result)


if __name__ == "__main__":
    main()

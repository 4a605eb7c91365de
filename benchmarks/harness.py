"""What every benchmark script shares: the record of where a result was measured, timed loops with percentiles,
loading a built system's components, starting ``grasp serve`` and writing the results file.

A results file is one JSON document under ``benchmarks/results/`` (or wherever ``--out`` says); :func:`write_result`
adds the :func:`record` (``commit``, ``machine``, ``load_average_1m`` at the start and the end, ``profile``,
``date``) under ``"record"``, so two files can be told apart without reading the script that wrote them.
Timings are taken with :func:`timed` (warm-up calls, then one wall time per call) and summarized by
:func:`percentiles` in milliseconds.

Usage in a script::

    from harness import RESULTS, Run, load_components, percentiles, timed

    run = Run(profile="cpu")                       # the start: commit, machine, load, date
    components = load_components("hpo", root, "cpu")
    ms = timed(lambda: retriever.query(q), n=100, warmup=5)
    run.write(RESULTS / "x.json", {"latency": percentiles(ms)})

The scripts run as ``python benchmarks/NAME.py``, so this module is importable as ``harness`` (the script's folder
is on ``sys.path``); ``tests/test_benchmarks.py`` runs every script's ``--help``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grasp_core.provenance import code_commit, machine_facts

if TYPE_CHECKING:
    from grasp_core.components import Components

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
GRASP = [sys.executable, "-m", "grasp_assets.cli"]  # the installed `grasp` command, in this interpreter


def load_average() -> float:
    """The 1-minute load average: this machine is shared, and timings move with it."""
    return round(os.getloadavg()[0], 2)


class Run:
    """One benchmark run: :func:`record` taken at the start, completed with the load at the end by :meth:`write`."""

    def __init__(self, profile: str | None = None, **settings: Any):
        self.record: dict[str, Any] = {
            "commit": code_commit(),
            "machine": machine_facts(),
            "profile": profile,
            "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
            "load_average_1m": {"start": load_average()},
            **settings,
        }
        self._start = time.perf_counter()

    def finish(self) -> dict[str, Any]:
        """The record, with the load average at the end and the run's wall seconds."""
        self.record["load_average_1m"]["end"] = load_average()
        self.record["wall_s"] = round(time.perf_counter() - self._start, 1)
        return self.record

    def write(self, path: Path, result: dict[str, Any], quiet: bool = False) -> Path:
        """Write ``result`` with this run's record to ``path`` (atomically), print it unless ``quiet``."""
        return write_result(path, {"record": self.finish(), **result}, quiet=quiet)


def write_result(path: Path, doc: dict[str, Any], quiet: bool = False) -> Path:
    """Write a results document as indented JSON (through :func:`grasp_core.io.atomic_file`: a crash never leaves
    half a file)."""
    from grasp_core.io import atomic_file

    path = Path(path)
    text = json.dumps(doc, indent=1, default=str) + "\n"
    with atomic_file(path) as handle:
        handle.write(text)
    if not quiet:
        print(text, end="")
    print(f"-> {path}", file=sys.stderr)
    return path


def read_result(path: Path) -> dict[str, Any]:
    """A results document written earlier, or ``{}`` when there is none (scripts that keep other runs' entries)."""
    path = Path(path)
    return json.loads(path.read_text()) if path.exists() else {}


PROBE_SETTINGS = {"text": {"branches": "text", "rerank": False}, "served": {}}


def probe_forms(served, forms: dict[str, list[tuple[str, set[int]]]]) -> dict[str, Any]:
    """A capability probe's questions (form -> (question, gold ids)) answered by the text branch alone and by the
    served system (``served``, a loaded ``GraspRetriever``; the text setting shares its components): per question
    hits at 1 (``hits[setting][form]``), Hit@1 and Hit@5 in percent, and each form's first questions."""
    from grasp_core.retriever import GraspRetriever

    out: dict[str, Any] = {"questions": {f: len(q) for f, q in forms.items()}, "hit@1": {}, "hit@5": {}, "hits": {}}
    for setting, options in PROBE_SETTINGS.items():
        retriever = served if not options else GraspRetriever(served.components, **options)
        for form, qs in forms.items():
            top = [[a.node_id for a in r.answers[:5]] for r in retriever.retrieve([q for q, _ in qs], k=5)]
            hits = [bool(t) and t[0] in gold for t, (_, gold) in zip(top, qs)]
            at5 = sum(any(i in gold for i in t) for t, (_, gold) in zip(top, qs))
            out["hits"].setdefault(setting, {})[form] = hits
            out["hit@1"].setdefault(setting, {})[form] = round(100 * sum(hits) / max(len(qs), 1), 1)
            out["hit@5"].setdefault(setting, {})[form] = round(100 * at5 / max(len(qs), 1), 1)
            print(
                f"{setting:7s} {form:10s} hit@1 {out['hit@1'][setting][form]} hit@5 {out['hit@5'][setting][form]}",
                file=sys.stderr,
            )
    out["examples"] = {f: [q for q, _ in qs[:8]] for f, qs in forms.items()}
    return out


def served_mcnemar(hits: dict[str, dict[str, list[bool]]], before: Path) -> dict[str, float]:
    """Per form, McNemar's p of the ``served`` hits against those of the results file ``before`` (a capability
    probe's per-question hits: ``hits[setting][form]``)."""
    from grasp_core.eval.significance import mcnemar

    earlier = json.loads(Path(before).read_text())["hits"]["served"]
    return {form: round(mcnemar(earlier[form], now)[1], 6) for form, now in hits["served"].items()}


def timed(fn: Callable[[], Any], n: int, warmup: int = 0) -> list[float]:
    """Call ``fn`` ``warmup`` times untimed, then ``n`` times; the wall time of each timed call in milliseconds."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append(1e3 * (time.perf_counter() - start))
    return out


def percentiles(values: Iterable[float], points: Iterable[int] = (50, 95), digits: int = 2) -> dict[str, float]:
    """``{"p50": …, "p95": …, "mean": …, "n": …}`` of ``values`` (in their unit, usually milliseconds)."""
    import numpy as np

    v = np.asarray(list(values), dtype=float)
    if v.size == 0:
        return {"n": 0}
    out = {f"p{p}": round(float(np.percentile(v, p)), digits) for p in points}
    return out | {"mean": round(float(v.mean()), digits), "n": int(v.size)}


def load_components(dataset: str, root: str | Path | None = None, profile: str = "cpu") -> Components:
    """A built system's components (lazy: each loads on first use) from an artifact root (default: the instance's)."""
    from grasp_core.artifacts import Artifacts
    from grasp_core.components import Components
    from grasp_core.profiles import get_profile

    return Components(Artifacts.for_dataset(dataset, root), get_profile(profile))


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_serve(url: str, proc: subprocess.Popen, timeout: float = 600) -> dict[str, Any]:
    """Wait until the ``grasp serve`` process ``proc`` answers ``{url}/health``; its health document. Raises with
    the process's exit code if it stops first, and TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"grasp serve exited with code {proc.returncode} before answering {url}/health")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                return dict(json.loads(response.read()))
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.5)
    raise TimeoutError(f"grasp serve did not answer {url}/health within {timeout:.0f} s")


def start_serve(
    dataset: str,
    options: Iterable[str] = (),
    serve_options: Iterable[str] = (),
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> tuple[subprocess.Popen, str, dict[str, Any]]:
    """Start ``grasp OPTIONS… serve DATASET --port <free> SERVE_OPTIONS…`` (``options`` are the global ones:
    ``--root``, ``--profile``) and wait until it is healthy: ``(process, url, health)``. Its output is discarded;
    the caller stops the process (``proc.terminate()``)."""
    port = free_port()
    cmd = [*GRASP, *options, "serve", dataset, "--host", "127.0.0.1", "--port", str(port), *serve_options]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        health = wait_for_serve(url, proc, timeout)
    except BaseException:
        proc.kill()
        raise
    return proc, url, health

"""How cost grows with the knowledge base: the whole pipeline of a synthetic dataset at two scales, asset by asset.

Run: ``python benchmarks/scale_pipeline.py [synth-prime] [--scales small full] [--profile cpu]``. Each scale runs
``grasp pipeline DATASET --scale S`` (same query counts and splits at every scale) from nothing, in its own Dagster
home and artifact root (``benchmarks/.cache/scale-<dataset>-<scale>/``, emptied first), while a sampler reads the
memory of this process and all its descendants (the stage children, the fork server) every ``SAMPLE_S`` seconds
from ``/proc``. Then, per asset (``asset`` or ``asset/round`` for the RL rounds):

* ``seconds``: the step's duration in the Dagster event log (its ``STEP_SUCCESS``);
* ``peak_rss_bytes``: the most memory the process tree held while the step ran (between its ``STEP_START`` and
  ``STEP_SUCCESS`` events, give or take one sample): the sum of the processes' proportional set sizes, so pages the
  stage children share with the fork server they come from count once (the tree includes this process and the fork
  server); ``peak_process_rss_bytes``: the largest single process's resident set meanwhile;
* ``artifact_bytes``: the size of its artifact directory, and ``files``: each of its files' size.

Beside them, the inputs each scale had: nodes, edges, aliases, queries, and the candidate plans the teacher executed
(``n_tried`` of ``teacher_plans``); and, in ``ratios``, full / small of every asset's seconds, memory and artifact
size next to the inputs' ratios, so a step that grows faster than what it reads stands out. Writes
``benchmarks/results/scale_<dataset>.json`` (``{"small": {...}, "full": {...}, "ratios": {...}}``) after each
scale, so a later scale's failure keeps the earlier ones; a run of some scales keeps the file's other scales (each
scale carries its own ``record``: commit, machine, load average at its start and end, so one can be rerun on a quieter
machine; ``load_avg_1min_at_end`` repeats the load at its end).
"""

from __future__ import annotations

import argparse
import os
import shutil
import threading
import time
import warnings
from pathlib import Path

from harness import RESULTS, ROOT, Run, load_average, load_components, read_result, write_result

from grasp_core.io import read_json

CACHE = ROOT / "benchmarks" / ".cache"
SAMPLE_S = 0.5
PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_pss(pid: int) -> tuple[int, int]:
    """(proportional set size summed over ``pid`` and all its descendants, the largest one process's resident set),
    in bytes, from /proc. PSS counts a page shared by several processes (the stage children fork from a server that
    imported torch) once in all, so the sum is what the machine holds; processes that end meanwhile count 0."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    total, largest, todo = 0, 0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            rollup = dict(line.split(":", 1) for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines()[1:])
        except (OSError, ValueError):
            continue
        total += int(rollup["Pss"].split()[0]) * 1024
        largest = max(largest, int(rollup["Rss"].split()[0]) * 1024)
    return total, largest


class Sampler(threading.Thread):
    """(time, PSS of this process tree, largest process RSS) every ``SAMPLE_S`` seconds until :meth:`stop`."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, int, int]] = []
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.samples.append((time.time(), *tree_pss(os.getpid())))
            self._done.wait(SAMPLE_S)

    def stop(self) -> list[tuple[float, int, int]]:
        self._done.set()
        self.join()
        return self.samples

    def peak(self, start: float, end: float) -> tuple[int, int]:
        """The most memory while a step ran: the samples within one sampling period of its window (a step shorter
        than the period still gets the samples around it)."""
        near = [(pss, rss) for t, pss, rss in self.samples if start - SAMPLE_S <= t <= end + SAMPLE_S]
        return max((p for p, _ in near), default=0), max((r for _, r in near), default=0)


def step_windows(dataset: str) -> dict[str, tuple[float, float, float]]:
    """asset (``asset/round``) -> (start, end, seconds) of its latest successful step, from the Dagster instance."""
    import dagster as dg

    from grasp_assets.run_records import PARTITION_TAG, step_seconds

    warnings.filterwarnings("ignore", category=DeprecationWarning, module=__name__)  # get_event_records: as run_records
    instance = dg.DagsterInstance.get()
    seconds = step_seconds(dataset, instance)
    starts: dict[tuple[str, str], float] = {}  # (run id, step) -> its start
    out: dict[str, tuple[float, float, float]] = {}
    for kind in (dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS):
        for record in instance.get_event_records(dg.EventRecordsFilter(event_type=kind), ascending=True):
            entry = record.event_log_entry
            step = entry.dagster_event.step_key if entry.dagster_event is not None else None
            if step is None:
                continue
            if kind == dg.DagsterEventType.STEP_START:
                starts[entry.run_id, step] = entry.timestamp
                continue
            run = instance.get_run_by_id(entry.run_id)
            round_key = run.tags.get(f"{PARTITION_TAG}/round") if run is not None else None
            name = step if round_key is None else f"{step}/{round_key}"
            out[name] = (starts[entry.run_id, step], entry.timestamp, seconds.get(name, 0.0))
    return out


def dir_bytes(path: Path) -> int:
    return sum(file_bytes(path).values())


def file_bytes(path: Path) -> dict[str, int]:
    """Each file under ``path`` (relative name -> bytes): what the memory model attributes to nodes or edges."""
    return {str(f.relative_to(path)): f.stat().st_size for f in path.rglob("*") if f.is_file()} if path.exists() else {}


def inputs(root: Path, dataset: str, profile: str) -> dict:
    """What the scale's pipeline read: the SKB's size and the teacher's executed candidates."""
    import pandas as pd

    components = load_components(dataset, root, profile)
    graph = components.graph
    teacher = pd.concat([pd.read_parquet(f) for f in sorted(components.art.require("teacher_plans").glob("*.parquet"))])
    tried = int(teacher["n_tried"].sum()) if "n_tried" in teacher else 0
    return {
        "nodes": int(graph.num_nodes),
        "edges": int(len(graph.edges)),
        "aliases": len(graph.alias_pairs()),
        "queries": int(len(components.skb.queries)),
        "candidates_executed": tried,
    }


def run_scale(dataset: str, scale: str, profile: str, stages: tuple[str, ...]) -> dict:
    home = CACHE / f"scale-{dataset}-{scale}"
    shutil.rmtree(home, ignore_errors=True)
    (home / "dagster_home").mkdir(parents=True)
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", home / "dagster_home" / "dagster.yaml")
    os.environ["DAGSTER_HOME"] = str(home / "dagster_home")
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{home / 'dagster_home' / 'mlflow.db'}"
    root = home / "artifacts"
    from grasp_assets.run import run_pipeline

    sampler = Sampler()
    sampler.start()
    start = time.perf_counter()
    try:
        stage_seconds = run_pipeline(dataset, profile=profile, root=str(root), scale=scale, stages=stages)
    finally:
        samples = sampler.stop()
    total = time.perf_counter() - start
    assets = {}
    for name, (t0, t1, seconds) in sorted(step_windows(dataset).items(), key=lambda kv: kv[1][0]):
        asset, _, round_key = name.partition("/")
        pss, rss = sampler.peak(t0, t1)
        files = file_bytes(root / dataset / asset / round_key if round_key else root / dataset / asset)
        assets[name] = {
            "seconds": seconds,
            "peak_rss_bytes": pss,
            "peak_process_rss_bytes": rss,
            "artifact_bytes": sum(files.values()),
            "files": files,
        }
    latency = root / dataset / "latency" / "latency.json"
    return {
        "scale": scale,
        "inputs": inputs(root, dataset, profile),
        "total_seconds": round(total, 1),
        "stage_seconds": {k: round(v, 1) for k, v in stage_seconds.items()},
        "peak_rss_bytes": max((pss for _, pss, _ in samples), default=0),
        "peak_process_rss_bytes": max((rss for _, _, rss in samples), default=0),
        "artifacts_bytes": dir_bytes(root / dataset),
        "assets": assets,
        "latency": read_json(latency)["stages"]["total"] if latency.exists() else None,  # None: no finish stage
        "load_avg_1min_at_end": load_average(),
    }


def ratios(small: dict, full: dict) -> dict:
    def ratio(a: float, b: float) -> float | None:
        return round(b / a, 2) if a else None

    out: dict[str, object] = {"inputs": {k: ratio(small["inputs"][k], v) for k, v in full["inputs"].items()}}
    out["total_seconds"] = ratio(small["total_seconds"], full["total_seconds"])
    out["peak_rss_bytes"] = ratio(small["peak_rss_bytes"], full["peak_rss_bytes"])
    out["assets"] = {
        name: {k: ratio(small["assets"][name][k], v) for k, v in row.items() if k != "files"}
        for name, row in full["assets"].items()
        if name in small["assets"]
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", nargs="?", default="synth-prime")
    parser.add_argument("--scales", nargs="+", default=["small", "full"])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument(
        "--stages", nargs="+", default=["prepare", "rl", "finish"], help="pipeline stages to run (default: all)"
    )
    args = parser.parse_args()
    out_file = RESULTS / f"scale_{args.dataset}.json"
    result: dict = {"dataset": args.dataset, "profile": args.profile, "stages": args.stages}
    earlier = read_result(out_file)
    if earlier.get("stages") == args.stages:  # the other scales of an earlier run of the same stages stay
        result |= {k: v for k, v in earlier.items() if isinstance(v, dict) and "assets" in v}
    for scale in args.scales:
        print(f"[scale] {args.dataset} at {scale}", flush=True)
        run = Run(profile=args.profile, scale=scale, stages=args.stages)
        entry = run_scale(args.dataset, scale, args.profile, tuple(args.stages))
        result[scale] = {"record": run.finish(), **entry}
        if "small" in result and "full" in result:
            result["ratios"] = ratios(result["small"], result["full"])
        write_result(out_file, result, quiet=True)
        print(
            f"[scale] {scale}: {result[scale]['total_seconds']:.0f} s, peak RSS "
            f"{result[scale]['peak_rss_bytes'] / 2**30:.2f} GiB -> {out_file}",
            flush=True,
        )


if __name__ == "__main__":
    main()

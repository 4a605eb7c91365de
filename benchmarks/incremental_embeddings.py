"""Incremental node embeddings after a 1% edit, and what verifying artifacts on read costs a cold ``grasp query``.

Run: ``python benchmarks/incremental_embeddings.py hpo [--root DIR] [--fraction 0.01] [--skip-query]``; writes
``benchmarks/results/incremental_embeddings.json`` and prints it. ``--root`` is a finished artifact root (read
only: everything is copied into a temporary directory first). ``--skip-query`` / ``--skip-embeddings`` keep that
section from the file's last run; each section this run writes (and the file, for ``hash_gbps``) carries the
run's ``record`` (commit, machine, load at start and end, date, command).

1. Node embeddings (the cpu profile's encoder): a full build of the dataset's SKB (``--nodes``: a seeded
   sample of that many nodes, for a machine where the whole takes too long; a node's texts do not depend on
   the others); then the names of ``--fraction`` of the nodes (seeded) are edited, which changes their name and
   document texts, and the artifact is rebuilt in place (incremental: unchanged texts reuse their vectors).
   Equality with a full rebuild: the edited rows and ``--check`` unchanged rows are encoded again from scratch
   (alone, as a full build would) and compared bit for bit. Wall and CPU seconds of both builds.
2. Hash throughput on 256 MiB (XXH3-128, the manifests' hash, against the stdlib's BLAKE2b and SHA-256).
3. Verification on read: ``grasp query`` in a new process on a copy of the artifacts, timed to exit, and the
   seconds its :func:`grasp_core.manifest.verify` calls took inside it (deep, the first time each artifact is
   required; counted by a wrapper). Artifacts of a build older than the manifests (an empty ``_COMPLETE``
   marker) are sealed on the copy first. The first query warms the file cache; the figures are medians (p50).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from harness import RESULTS, Run, percentiles, read_result, write_result

from grasp_core import manifest
from grasp_core.artifacts import Artifacts

RESULT = RESULTS / "incremental_embeddings.json"
QUESTION = "Which genes are linked to Rett syndrome?"
LEGACY_MARKER = "_COMPLETE"

# runs `grasp query` in this child, with manifest.verify timed (the CLI's own code path otherwise)
CHILD = """
import json, sys, time
from grasp_core import manifest
spent, calls = [0.0], []
real = manifest.verify
def timed(path, deep=False):
    t = time.perf_counter()
    try:
        return real(path, deep)
    finally:
        spent[0] += time.perf_counter() - t
        calls.append(str(path))
manifest.verify = timed
from grasp_core.cli import main
code = main(sys.argv[1:])
print("@@" + json.dumps({"verify_s": spent[0], "artifacts": sorted(set(calls)), "code": code}))
"""


def embeddings(dataset: str, art: Artifacts, work: Path, fraction: float, seed: int, nodes: int, check: int) -> dict:
    from grasp_core.embed.encoder import load_encoder
    from grasp_core.embed.node_embeddings import build_node_embeddings, node_texts
    from grasp_core.profiles import get_profile
    from grasp_core.skb.format import SKB, empty_queries, read_skb

    cfg = get_profile("cpu").encoder
    encoder = load_encoder(cfg)
    skb = read_skb(art.require("skb"), with_queries=False)
    total = skb.num_nodes
    if nodes and nodes < total:
        keep = np.sort(np.random.default_rng(seed).choice(total, nodes, replace=False))
        sample = skb.nodes.iloc[keep].reset_index(drop=True).assign(node_id=np.arange(nodes))
        skb = SKB(skb.schema, sample, skb.edges.iloc[:0], empty_queries())
    encoded = [0]
    real_encode = encoder.encode

    def counting(texts, max_tokens, show_progress=False):
        encoded[0] += len(texts)
        return real_encode(texts, max_tokens, show_progress)

    encoder.encode = counting  # type: ignore[method-assign]
    out = work / "node_embeddings"
    t0, c0 = time.perf_counter(), time.process_time()
    build_node_embeddings(skb, encoder, out, cfg)
    full_s, full_cpu, full_texts = time.perf_counter() - t0, time.process_time() - c0, encoded[0]
    rng = np.random.default_rng(seed + 1)
    edited = np.sort(rng.choice(skb.num_nodes, max(1, round(fraction * skb.num_nodes)), replace=False))
    skb.nodes.loc[edited, "name"] = skb.nodes.loc[edited, "name"].astype(str) + " (revised)"
    encoded[0] = 0
    t0, c0 = time.perf_counter(), time.process_time()
    build_node_embeddings(skb, encoder, out, cfg)
    inc_s, inc_cpu, inc_texts = time.perf_counter() - t0, time.process_time() - c0, encoded[0]
    unchanged = np.setdiff1d(np.arange(skb.num_nodes), edited)
    rows = np.concatenate([edited, rng.choice(unchanged, min(check, len(unchanged)), replace=False)])
    texts = node_texts(skb)
    equal = True
    for kind, limit in (("name", cfg.name_max_tokens), ("doc", cfg.doc_max_tokens)):
        stored = np.load(out / f"{kind}.npy")[rows]
        fresh = real_encode([texts[kind][i] for i in rows], limit).astype(np.float16)
        equal &= bool(np.array_equal(stored, fresh))
    return {
        "dataset": dataset,
        "dataset_nodes": total,
        "nodes": skb.num_nodes,
        "edited_nodes": len(edited),
        "full_build_s": round(full_s, 1),
        "full_build_cpu_s": round(full_cpu, 1),
        "full_texts_encoded": full_texts,
        "incremental_s": round(inc_s, 2),
        "incremental_cpu_s": round(inc_cpu, 2),
        "incremental_texts_encoded": inc_texts,
        "incremental_vs_full": round(inc_s / full_s, 4),
        "incremental_vs_full_cpu": round(inc_cpu / full_cpu, 4),
        "rows_compared_with_a_fresh_encoding": len(rows),
        "equal_to_a_full_rebuild_bit_for_bit": equal,
    }


def hash_speed() -> dict:
    import xxhash

    data = memoryview(os.urandom(256 * 2**20))
    out = {}
    for name, make in (
        ("xxh3_128", xxhash.xxh3_128),
        ("blake2b", lambda: hashlib.blake2b(digest_size=16)),
        ("sha256", hashlib.sha256),
    ):
        best = float("inf")
        for _ in range(3):
            h, t0 = make(), time.perf_counter()
            for i in range(0, len(data), 1 << 22):
                h.update(data[i : i + (1 << 22)])
            h.hexdigest()
            best = min(best, time.perf_counter() - t0)
        out[name] = round(len(data) / best / 1e9, 2)
    return out


def sealed_copy(source: Path, dataset: str, dest: Path) -> Path:
    """Copy ``source/dataset`` to ``dest/dataset``; seal each legacy-marked artifact directory with a manifest."""
    target = dest / dataset
    shutil.copytree(source / dataset, target, ignore=shutil.ignore_patterns(".*"))
    for marker in sorted(target.glob(f"**/{LEGACY_MARKER}")):
        marker.unlink()
        manifest.write(marker.parent)
    return dest


def cold_query(dataset: str, root: Path, runs: int) -> dict:
    cmd = [sys.executable, "-c", CHILD, "--root", str(root), "query", dataset, QUESTION]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    samples = []
    for _ in range(runs + 1):  # the first warms the file cache
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t0
        lines = [x for x in proc.stdout.splitlines() if x.startswith("@@")]
        if proc.returncode or not lines or json.loads(lines[-1][2:])["code"]:
            raise SystemExit(f"grasp query failed: {proc.stderr.strip()[-800:]}")
        info = json.loads(lines[-1][2:])
        samples.append({"wall_s": wall, "verify_s": info["verify_s"], "artifacts": info["artifacts"]})
    samples = samples[1:]
    wall = percentiles([s["wall_s"] for s in samples], points=(50,), digits=6)["p50"]
    verify = percentiles([s["verify_s"] for s in samples], points=(50,), digits=6)["p50"]
    names = [Path(p).relative_to(root / dataset).as_posix() for p in samples[0]["artifacts"]]
    size = sum(e.size for p in samples[0]["artifacts"] if (m := manifest.read(p)) for e in m.files.values())
    return {
        "runs": runs,
        "cold_query_wall_s": round(wall, 2),
        "verify_s": round(verify, 3),
        "verify_share": round(verify / wall, 4),
        "verified_artifacts": names,
        "verified_mib": round(size / 2**20, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", default="hpo")
    parser.add_argument(
        "--root", default=None, help="finished artifact root (default: $GRASP_HOME or dagster_home/artifacts)"
    )
    parser.add_argument("--fraction", type=float, default=0.01, help="share of the nodes whose name is edited")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nodes", type=int, default=0, help="embed a seeded sample of this many nodes (0: all)")
    parser.add_argument("--check", type=int, default=200, help="unchanged rows re-encoded to compare bit for bit")
    parser.add_argument("--runs", type=int, default=3, help="cold queries timed (after one warm-up)")
    parser.add_argument("--skip-query", action="store_true", help="no cold-query figures (kept from the last run)")
    parser.add_argument("--skip-embeddings", action="store_true", help="no embeddings figures (kept from the last run)")
    args = parser.parse_args()
    run = Run(profile="cpu")  # the encoder's profile, and `grasp query`'s default
    source = Artifacts.for_dataset(args.dataset, args.root).root
    result: dict = read_result(RESULT)  # sections a skip keeps
    written: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="grasp-incremental-") as tmp:
        root = sealed_copy(source, args.dataset, Path(tmp) / "artifacts")
        art = Artifacts.for_dataset(args.dataset, root)
        result["hash_gbps"] = hash_speed()
        if not args.skip_query:
            written["verification"] = cold_query(args.dataset, root, args.runs)
        if not args.skip_embeddings:
            work = Path(tmp) / "work"
            written["node_embeddings"] = embeddings(
                args.dataset, art, work, args.fraction, args.seed, args.nodes, args.check
            )
    record = run.finish()
    result.update({name: {"record": record, **section} for name, section in written.items()})
    result.pop("record", None)  # the last run's: this run wrote hash_gbps
    write_result(RESULT, {"record": record, **result})


if __name__ == "__main__":
    main()

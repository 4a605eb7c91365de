"""Does a text's vector depend on how many texts share its batch? MiniLM in bfloat16 with oneDNN's default ISA (AMX
where the CPU has it) and with the cap ``grasp_core`` sets (``ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16``), and the speed of
both: documents per second and one query's encoding, one math thread, the two settings alternating ``ROUNDS`` times
(each setting needs its own process: oneDNN reads the variable once).

Run: ``python benchmarks/batch_invariance.py``; writes ``benchmarks/results/batch_invariance.json`` (per setting:
the differences by batch size from the first round, docs/s and ms per query of every round, sorted) with the run's
``record`` (commit, machine, load average, date: ``benchmarks/harness.py``). Each round of each setting is this
script run again as ``batch_invariance.py --child`` (an internal flag), which prints one JSON line of
:func:`measure`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from harness import RESULTS, Run, timed

SETTINGS = {"default (AMX)": "DEFAULT", "capped (grasp_core)": "AVX512_CORE_BF16"}
SIZES, ROUNDS = (2, 3, 8, 13, 16, 24, 64), 3


def measure() -> dict:
    """In this process: the max |difference| from each text encoded alone, per batch size; docs/s; ms per query."""
    import numpy as np

    from grasp_core.embed.config import EncoderConfig
    from grasp_core.embed.encoder import load_encoder

    enc = load_encoder(EncoderConfig(dtype="bfloat16"))
    texts = [f"which drug targets gene {i} and protein {3 * i} in the retina" for i in range(max(SIZES))]
    alone = np.stack([enc.encode([t], 64)[0] for t in texts])
    diff = {n: float(np.abs(enc.encode(texts[:n], 64) - alone[:n]).max()) for n in SIZES}
    docs = [f"a disorder of the retina in which the light-sensitive cells degenerate {i} " * 3 for i in range(512)]
    enc.encode(docs[:64], 256)
    start = time.perf_counter()
    enc.encode(docs, 256)
    docs_per_s = len(docs) / (time.perf_counter() - start)
    one = iter(texts)
    query_ms = timed(lambda: enc.encode([next(one)], 64), n=len(texts))  # each text once, as one query
    return {
        "max_abs_diff_by_batch": diff,
        "docs_per_s": docs_per_s,
        "query_ms": sum(query_ms) / len(query_ms),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # one round, in this process
    if parser.parse_args().child:
        print(json.dumps(measure()))
        return
    run = Run(rounds=ROUNDS, sizes=SIZES, omp_num_threads=1)
    runs: dict[str, list[dict]] = {name: [] for name in SETTINGS}
    for _ in range(ROUNDS):
        for name, isa in SETTINGS.items():
            env = {**os.environ, "ONEDNN_MAX_CPU_ISA": isa, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
            out = subprocess.run(
                [sys.executable, __file__, "--child"], env=env, capture_output=True, text=True, check=True
            )
            runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    result = {
        "settings": {
            name: {
                "max_abs_diff_by_batch": r[0]["max_abs_diff_by_batch"],
                "docs_per_s": sorted(x["docs_per_s"] for x in r),
                "query_ms": sorted(x["query_ms"] for x in r),
            }
            for name, r in runs.items()
        },
    }
    run.write(RESULTS / "batch_invariance.json", result)


if __name__ == "__main__":
    main()

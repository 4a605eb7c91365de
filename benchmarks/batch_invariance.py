"""Does a text's vector depend on how many texts share its batch? MiniLM in bfloat16 with oneDNN's default ISA (AMX
where the CPU has it) and with the cap ``grasp_core`` sets (``ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16``), and the speed of
both: documents per second and one query's encoding, one math thread, the two settings alternating ``ROUNDS`` times
(each setting needs its own process: oneDNN reads the variable once).

Run: ``python benchmarks/batch_invariance.py``; writes ``benchmarks/results/batch_invariance.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

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
    start = time.perf_counter()
    for t in texts:
        enc.encode([t], 64)
    return {
        "max_abs_diff_by_batch": diff,
        "docs_per_s": docs_per_s,
        "query_ms": 1e3 * (time.perf_counter() - start) / len(texts),
    }


def main() -> None:
    runs: dict[str, list[dict]] = {name: [] for name in SETTINGS}
    for _ in range(ROUNDS):
        for name, isa in SETTINGS.items():
            env = {**os.environ, "ONEDNN_MAX_CPU_ISA": isa, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
            out = subprocess.run(
                [sys.executable, __file__, "--child"], env=env, capture_output=True, text=True, check=True
            )
            runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    result = {
        "load_avg_1min": os.getloadavg()[0],
        "settings": {
            name: {
                "max_abs_diff_by_batch": r[0]["max_abs_diff_by_batch"],
                "docs_per_s": sorted(x["docs_per_s"] for x in r),
                "query_ms": sorted(x["query_ms"] for x in r),
            }
            for name, r in runs.items()
        },
    }
    path = Path(__file__).parent / "results" / "batch_invariance.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        print(json.dumps(measure()))
    else:
        main()

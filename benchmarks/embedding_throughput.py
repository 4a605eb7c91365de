"""MiniLM (cpu profile) throughput: ``Encoder.encode`` vs a plain ``SentenceTransformer.encode``.

Both encode the same 3,000 synthetic (or ``argv[1]``) node documents of mixed length (5 to ~400 words, log-normal) with
batch size 64 and the same 256-token truncation, in the same process, alternating, best of ``ROUNDS``.
Run: ``python benchmarks/embedding_throughput.py [n_texts]``; writes ``benchmarks/results/embedding_throughput.json``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from grasp_core.embed.encoder import EncoderConfig, load_encoder, minilm_path

N_TEXTS = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
MAX_TOKENS, BATCH, ROUNDS = 256, 64, 2
WORDS = ("gene protein disease drug pathway retina kidney binds expressed inhibits receptor enzyme syndrome "
         "chronic acute membrane transport signalling phenotype tissue cell nucleus mitochondria therapy").split()


def documents(rng: np.random.Generator) -> list[str]:
    lengths = np.clip(rng.lognormal(3.5, 1.0, N_TEXTS).astype(int), 5, 400)
    return [f"drug: node {i}\ndetails: " + " ".join(rng.choice(WORDS, n)) for i, n in enumerate(lengths)]


def timed(fn) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    texts = documents(np.random.default_rng(0))
    ours = load_encoder(EncoderConfig(batch_size=BATCH))
    plain = SentenceTransformer(str(minilm_path()), device="cpu")
    plain.max_seq_length = MAX_TOKENS
    ours.encode(texts[:64], MAX_TOKENS)
    plain.encode(texts[:64], batch_size=BATCH)
    seconds = {"grasp Encoder.encode": [], "SentenceTransformer.encode": []}
    for _ in range(ROUNDS):
        t, a = timed(lambda: ours.encode(texts, MAX_TOKENS))
        seconds["grasp Encoder.encode"].append(t)
        t, b = timed(lambda: plain.encode(texts, batch_size=BATCH, normalize_embeddings=True))
        seconds["SentenceTransformer.encode"].append(t)
    best = {k: min(v) for k, v in seconds.items()}
    result = {
        "texts": N_TEXTS, "max_tokens": MAX_TOKENS, "batch_size": BATCH, "threads": torch.get_num_threads(),
        "seconds_per_round": seconds, "texts_per_second": {k: N_TEXTS / v for k, v in best.items()},
        "ours_relative_time": best["grasp Encoder.encode"] / best["SentenceTransformer.encode"],
        "max_abs_diff": float(np.abs(a - b).max()),
    }
    out = Path(__file__).parent / "results" / "embedding_throughput.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print("| encoder | best s | texts/s |\n|---|---|---|")
    for k, v in best.items():
        print(f"| {k} | {v:.2f} | {N_TEXTS / v:.0f} |")
    print(f"ours / plain time: {result['ours_relative_time']:.3f}; max |diff| = {result['max_abs_diff']:.2e}")


if __name__ == "__main__":
    main()

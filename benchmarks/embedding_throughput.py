"""MiniLM (cpu profile) throughput: ``Encoder.encode`` vs a plain ``SentenceTransformer.encode``, and our encoder in
bfloat16 (the cpu profile's ``dtype=auto`` on a CPU with native bf16) vs float32, with the cosine between the two.

Both encode the same 3,000 synthetic (or ``n_texts``) node documents of mixed length (5 to ~400 words, log-normal)
with batch size 64 and the same 256-token truncation, in the same process, alternating, best of ``ROUNDS``.
Run: ``python benchmarks/embedding_throughput.py [n_texts]``; writes ``benchmarks/results/embedding_throughput.json``
(with the run's record: commit, machine, load, date) and prints a table.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from harness import RESULTS, Run
from sentence_transformers import SentenceTransformer

from grasp_core.embed.config import EncoderConfig
from grasp_core.embed.encoder import load_encoder, minilm_path

MAX_TOKENS, BATCH, ROUNDS = 256, 64, 2
WORDS = (
    "gene protein disease drug pathway retina kidney binds expressed inhibits receptor enzyme syndrome "
    "chronic acute membrane transport signalling phenotype tissue cell nucleus mitochondria therapy"
).split()


def documents(rng: np.random.Generator, n_texts: int) -> list[str]:
    lengths = np.clip(rng.lognormal(3.5, 1.0, n_texts).astype(int), 5, 400)
    return [f"drug: node {i}\ndetails: " + " ".join(rng.choice(WORDS, n)) for i, n in enumerate(lengths)]


def clocked(fn) -> tuple[float, np.ndarray]:
    """Seconds of one call of ``fn`` and what it returned (the rounds compare the outputs too)."""
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n_texts", nargs="?", type=int, default=3000, help="synthetic node documents encoded")
    args = parser.parse_args()
    n_texts = args.n_texts
    run = Run(profile="cpu")
    texts = documents(np.random.default_rng(0), n_texts)
    ours = load_encoder(EncoderConfig(batch_size=BATCH))
    bf16 = load_encoder(EncoderConfig(batch_size=BATCH, dtype="bfloat16"))
    plain = SentenceTransformer(str(minilm_path()), device="cpu")
    plain.max_seq_length = MAX_TOKENS
    ours.encode(texts[:64], MAX_TOKENS)
    bf16.encode(texts[:64], MAX_TOKENS)
    plain.encode(texts[:64], batch_size=BATCH)
    seconds = {"grasp Encoder.encode": [], "SentenceTransformer.encode": [], "grasp Encoder.encode bfloat16": []}
    for _ in range(ROUNDS):
        t, a = clocked(lambda: ours.encode(texts, MAX_TOKENS))
        seconds["grasp Encoder.encode"].append(t)
        t, b = clocked(lambda: plain.encode(texts, batch_size=BATCH, normalize_embeddings=True))
        seconds["SentenceTransformer.encode"].append(t)
        t, c = clocked(lambda: bf16.encode(texts, MAX_TOKENS))
        seconds["grasp Encoder.encode bfloat16"].append(t)
    best = {k: min(v) for k, v in seconds.items()}
    result = {
        "texts": n_texts,
        "max_tokens": MAX_TOKENS,
        "batch_size": BATCH,
        "threads": torch.get_num_threads(),
        "seconds_per_round": seconds,
        "texts_per_second": {k: n_texts / v for k, v in best.items()},
        "ours_relative_time": best["grasp Encoder.encode"] / best["SentenceTransformer.encode"],
        "max_abs_diff": float(np.abs(a - b).max()),
        "bfloat16_speedup": best["grasp Encoder.encode"] / best["grasp Encoder.encode bfloat16"],
        "bfloat16_cosine_to_float32": {
            "min": float(np.min(np.sum(a * c, 1))),
            "mean": float(np.mean(np.sum(a * c, 1))),
        },
    }
    run.write(RESULTS / "embedding_throughput.json", result, quiet=True)
    print("| encoder | best s | texts/s |\n|---|---|---|")
    for k, v in best.items():
        print(f"| {k} | {v:.2f} | {n_texts / v:.0f} |")
    print(f"ours / plain time: {result['ours_relative_time']:.3f}; max |diff| = {result['max_abs_diff']:.2e}")
    print(
        f"bfloat16: {result['bfloat16_speedup']:.2f}x faster, cosine to float32 min "
        f"{result['bfloat16_cosine_to_float32']['min']:.4f}"
    )


if __name__ == "__main__":
    main()

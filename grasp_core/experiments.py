"""Experiment variants: a named change of the settings, built as its own partition beside the base profile.

A variant is a file ``experiments/<name>.toml`` — in the instance (``$DAGSTER_HOME/experiments/``, looked up
first) or in the checkout (the shipped ones) — holding an optional base profile and overrides of any section of
:class:`~grasp_core.profiles.Profile`::

    description = "reranker K = 20: the paper's latency/quality trade-off"   # optional
    profile = "cpu"          # optional: the base profile (default: the run's, --profile / $GRASP_PROFILE)
    text_retriever = "dense" # a top-level setting of Profile
    [rerank]                 # a section: its fields, checked against the section's dataclass
    top_k = 20

Every key is checked against the dataclasses: an unknown section or key, or a value of the wrong type, is a
one-line :class:`~grasp_core.errors.GraspError` naming what is valid. A setting cannot be set to ``None`` (TOML has
no null).

A variant is built as the dataset partition ``<dataset>+<variant>`` (``hpo+rerank-k20``): its artifacts live under
``<root>/hpo+rerank-k20/``, while everything that dispatches on the dataset (the SKB's source, its queries, the
checks) sees the base dataset ``hpo`` (:class:`VariantArtifacts`). ``base`` names the base profile itself.

This module also renders ``grasp compare`` (:func:`compare`, :func:`render_comparison`): the evaluation assets
of several variants of one dataset side by side, with McNemar tests paired by query against the first.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grasp_core.artifacts import Artifacts, default_root
from grasp_core.errors import CorruptArtifactError, GraspError, MissingArtifactError
from grasp_core.home import LOCATION, grasp_home
from grasp_core.profiles import PROFILE_NAMES, Profile, get_profile

SEP = "+"  # partition key = <dataset>+<variant>; no dataset key holds it (grasp_core.datasets.USER_KEY)
BASE = "base"  # the variant nobody names: the base profile
VARIANT_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
CHECKOUT_EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"
TOP_LEVEL = ("profile", "description")  # keys of a variant file that are not settings


# ---------------------------------------------------------------------------------------------- partition keys
def split_key(key: str) -> tuple[str, str | None]:
    """``"hpo+rerank-k20"`` -> ``("hpo", "rerank-k20")``; ``"hpo"`` -> ``("hpo", None)``."""
    dataset, sep, variant = key.partition(SEP)
    return dataset, (variant if sep else None)


def base_dataset(key: str) -> str:
    return split_key(key)[0]


def variant_key(dataset: str, variant: str | None = None) -> str:
    """The partition key of ``variant`` of ``dataset`` (``None``, ``""`` or ``"base"``: the dataset itself). A
    variant given as a whole key (``hpo+rerank-k20``) must name the same dataset."""
    if variant and SEP in variant:
        named, variant = split_key(variant)
        if named != dataset:
            raise GraspError(f"variant {named}{SEP}{variant} is of dataset {named!r}, not {dataset!r}")
    if not variant or variant == BASE or variant == dataset:
        return dataset
    check_variant_name(variant)
    return f"{dataset}{SEP}{variant}"


def check_variant_name(name: str) -> None:
    if name == BASE or not VARIANT_NAME.match(name):
        raise GraspError(
            f"bad variant name {name!r}: lowercase letters, digits, '.', '_' and '-' (at most 64), not {BASE!r}"
        )


# ------------------------------------------------------------------------------------------------- artifacts
@dataclass(frozen=True)
class VariantArtifacts(Artifacts):
    """The artifacts of a variant partition: stored under ``<root>/<dataset>+<variant>/``, while ``dataset`` (what
    the steps read as ``components.dataset``) stays the base dataset the SKB and its queries are built from."""

    key: str = ""

    def path(self, name: str, round_key: str | None = None) -> Path:
        base = self.root / self.key / name
        return base / round_key if round_key else base

    def require(self, name: str, round_key: str | None = None) -> Path:
        try:
            return super().require(name, round_key)
        except MissingArtifactError as exc:
            raise MissingArtifactError(self._own(str(exc))) from None

    def corrupt(self, name: str, round_key: str | None, problem: str) -> CorruptArtifactError:
        return CorruptArtifactError(self._own(str(super().corrupt(name, round_key, problem))))

    def built(self) -> list[tuple[str, str | None]]:
        return Artifacts(self.key, self.root).built()

    def _own(self, message: str) -> str:
        """A base dataset's message about this variant: its key, and the commands that build it."""
        dataset, variant = split_key(self.key)
        return (
            message.replace(f"--partition {dataset}", f"--partition {self.key}")
            .replace(f"grasp pipeline {dataset}", f"grasp pipeline {dataset} --variant {variant}")
            .replace(f"dataset {dataset!r}", f"dataset {dataset!r} (variant {variant!r})")
        )


def artifacts_for(key: str, root: str | Path | None = None) -> Artifacts:
    """The artifacts of a partition key: the dataset's own, or a variant's (:class:`VariantArtifacts`)."""
    root = Path(root) if root is not None else default_root()
    dataset, variant = split_key(key)
    if variant is None:
        return Artifacts(dataset, root)
    return VariantArtifacts(dataset, root, key=variant_key(dataset, variant))


def partition_of(art: Artifacts) -> str:
    """The partition key (and directory name under the root) of ``art``."""
    return getattr(art, "key", "") or art.dataset  # a variant's, or a served release's (ReleaseArtifacts.key)


# ------------------------------------------------------------------------------------------------ variant files
@dataclass(frozen=True)
class Variant:
    name: str
    file: Path
    profile: str | None  # the base profile the file names (None: the run's)
    description: str
    overrides: dict[str, Any]  # Profile field -> value, or section -> {field: value (or a nested table)}

    def apply(self, profile: Profile) -> Profile:
        """``profile`` with this variant's overrides (already checked against the dataclasses)."""
        return _apply(profile, self.overrides, self.file, "")


def variant_dirs() -> list[Path]:
    """Where variant files are looked up, in order: the instance's ``experiments/``, then the checkout's."""
    return [grasp_home() / "experiments", CHECKOUT_EXPERIMENTS]


def available_variants() -> list[str]:
    return sorted({p.stem for d in variant_dirs() if d.is_dir() for p in d.glob("*.toml")})


def variant_file(name: str) -> Path:
    check_variant_name(name)
    for directory in variant_dirs():
        if (directory / f"{name}.toml").is_file():
            return directory / f"{name}.toml"
    known = ", ".join(available_variants()) or "none"
    where = " or ".join(str(d) for d in variant_dirs())
    raise GraspError(f"no variant {name!r}: write {name}.toml in {where} (variants found: {known})")


def load_variant(name: str) -> Variant:
    """The variant ``name``, read from its file and checked against the config dataclasses."""
    return read_variant(variant_file(name), name)


def read_variant(file: str | Path, name: str | None = None) -> Variant:
    file = Path(file)
    try:
        data = tomllib.loads(file.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise GraspError(f"{file}: not TOML: {exc}") from None
    base = data.pop("profile", None)
    if base is not None and base not in PROFILE_NAMES:
        raise GraspError(f"{file}: profile = {base!r} is not a profile; choose one of {', '.join(PROFILE_NAMES)}")
    description = data.pop("description", "")
    if not isinstance(description, str):
        raise GraspError(f"{file}: description must be a string")
    variant = Variant(name or file.stem, file, base, description, data)
    variant.apply(get_profile(base or "cpu"))  # every key and type checked now, not when a step runs
    return variant


def resolve_profile(key: str, profile: str = "cpu") -> Profile:
    """The profile of a partition key: ``profile`` (or the variant file's own base) with the variant's overrides."""
    _, variant = split_key(key)
    if variant is None:
        return get_profile(profile)
    found = load_variant(variant)
    return found.apply(get_profile(found.profile or profile))


def _apply(obj: Any, table: dict, file: Path, where: str) -> Any:
    """``obj`` (Profile or a config dataclass) with ``table``'s values; every key and type checked."""
    hints = typing.get_type_hints(type(obj))
    fields = {f.name: f for f in dataclasses.fields(obj) if f.name != "name"}
    changes = {}
    for key, value in table.items():
        if key not in fields:
            raise GraspError(f"{file}: {_unknown(obj, key, where, fields)}")
        target, path = getattr(obj, key), f"{where}{key}"
        if dataclasses.is_dataclass(target):
            if not isinstance(value, dict):
                raise GraspError(f"{file}: {path} is a section: write its fields under [{path}]")
            changes[key] = _apply(target, value, file, f"{path}.")
        elif isinstance(value, dict):
            raise GraspError(f"{file}: {path} is a setting, not a section: write {path.split('.')[-1]} = VALUE")
        else:
            changes[key] = _coerce(value, hints[key], file, path)
            _check_choice(path, changes[key], file)
    return dataclasses.replace(obj, **changes) if changes else obj


def _unknown(obj: Any, key: str, where: str, fields: dict) -> str:
    if isinstance(obj, Profile):
        sections = sorted(k for k in fields if dataclasses.is_dataclass(getattr(obj, k)))
        scalars = sorted(k for k in fields if k not in sections)
        return (
            f"unknown setting {key!r}; sections: {', '.join(sections)}; top-level settings: "
            f"{', '.join([*TOP_LEVEL, *scalars])}"
        )
    return f"[{where.rstrip('.')}] has no setting {key!r}; its settings: {', '.join(sorted(fields))}"


def _type_name(t: Any) -> str:
    if typing.get_origin(t) is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(t))
    return getattr(t, "__name__", None) or str(t).replace("typing.", "")


def _coerce(value: Any, t: Any, file: Path, path: str) -> Any:
    """``value`` (from TOML) as a value of the annotated type ``t``, or a one-line error."""
    out = _as(value, t)
    if out is _BAD:
        wanted = " or ".join(_type_name(a) for a in _options(t))
        raise GraspError(f"{file}: {path} must be {wanted}, got {value!r}")
    return out


_BAD = object()


def _options(t: Any) -> list[Any]:
    """The types a value may take (a union's members but None, which TOML cannot write)."""
    if typing.get_origin(t) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(t) if a is not type(None)]
    return [t]


def _as(value: Any, t: Any) -> Any:
    for option in _options(t):
        origin, args = typing.get_origin(option), typing.get_args(option)
        if origin is typing.Literal:
            if value in args:
                return value
        elif origin is tuple and isinstance(value, list):
            kinds = [args[0]] * len(value) if len(args) == 2 and args[1] is Ellipsis else list(args)
            if len(kinds) == len(value):
                items = [_as(v, k) for v, k in zip(value, kinds)]
                if all(i is not _BAD for i in items):
                    return tuple(items)
        elif option is bool:
            if isinstance(value, bool):
                return value
        elif option is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        elif option is float:
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
        elif option is str:
            if isinstance(value, str):
                return value
    return _BAD


def _check_choice(path: str, value: Any, file: Path) -> None:
    """The top-level settings that name a component: one of the components that exist."""
    from grasp_core.components import EXTRACTORS, RERANKER_KINDS, TEXT_RETRIEVERS
    from grasp_core.planner.interface import PLANNER_KINDS

    choices = {
        "text_retriever": TEXT_RETRIEVERS,
        "reranker_kind": RERANKER_KINDS,
        "extractor": EXTRACTORS,
        "planner": PLANNER_KINDS,
    }.get(path)
    if choices is not None and value not in choices:
        raise GraspError(f"{file}: {path} must be one of {', '.join(choices)}, got {value!r}")


# ------------------------------------------------------------------------------------------------ settings
def flat_settings(profile: Profile) -> dict[str, Any]:
    """Every setting of ``profile`` as ``section.field`` (nested: ``section.sub.field``) -> value, without the
    fields that say where a source or store lies (:data:`grasp_core.home.LOCATION`): MLflow params, and what
    differs between two variants."""
    out: dict[str, Any] = {}

    def walk(obj: Any, prefix: str) -> None:
        for f in dataclasses.fields(obj):
            if f.metadata.get(LOCATION):
                continue
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value) and not isinstance(value, type):
                walk(value, f"{prefix}{f.name}.")
            else:
                out[f"{prefix}{f.name}"] = list(value) if isinstance(value, tuple) else value

    walk(profile, "")
    return out


def differing(profiles: Sequence[Profile]) -> dict[str, list[Any]]:
    """The settings whose values are not the same in all ``profiles``: ``{setting: [value in each]}``."""
    flat = [flat_settings(p) for p in profiles]
    keys = list(dict.fromkeys(k for f in flat for k in f))
    return {k: [f.get(k) for f in flat] for k in keys if any(f.get(k) != flat[0].get(k) for f in flat[1:])}


# ------------------------------------------------------------------------------------------------ comparison
HEADLINE_SETTINGS = ("served", "served+rerank", "text")


def headline_metrics(art: Artifacts) -> dict[str, float]:
    """``<split>/<setting>/<metric>`` -> percent, for the served system with and without the reranker and the text
    branch alone, of every evaluated split (empty when the evaluation is not built)."""
    from grasp_core.io import is_complete
    from grasp_core.report import dataset_results

    if not is_complete(art.path("eval_metrics")):
        return {}
    out = {}
    for split, doc in dataset_results(art).items():
        for setting in HEADLINE_SETTINGS:
            for metric, value in doc["settings"].get(setting, {}).items():
                out[f"{split}/{setting}/{metric}"] = value
    return out


def _label(key: str) -> str:
    return split_key(key)[1] or BASE


def compare(dataset: str, variants: Iterable[str], root: str | Path | None = None, profile: str = "cpu") -> dict:
    """The evaluation of several variants of ``dataset`` side by side: per evaluated split (one every variant
    evaluated), every setting's Hit@1/Hit@5/R@20/MRR per variant and the two-sided McNemar p of its per-query Hit@1
    against the first variant's, paired by query id; then the settings that differ. ``profile``: the base profile
    of variants whose evaluation does not record one."""
    import numpy as np

    from grasp_core.datasets import check_dataset
    from grasp_core.eval.results import SPLITS, percentages, read_per_query
    from grasp_core.eval.significance import mcnemar
    from grasp_core.io import is_complete, read_json
    from grasp_core.report import evaluation_dirs

    check_dataset(dataset)
    keys = list(dict.fromkeys(variant_key(dataset, v) for v in (list(variants) or [BASE])))
    for key in keys:  # every variant file found and checked before any evaluation is read
        if (variant := split_key(key)[1]) is not None:
            load_variant(variant)
    arts = [artifacts_for(k, root) for k in keys]
    profiles = []
    for key, art in zip(keys, arts):
        if not is_complete(art.path("eval_metrics")):
            dataset_, variant = split_key(key)
            build = f"grasp pipeline {dataset_}" + (f" --variant {variant}" if variant else "")
            raise GraspError(f"{key!r} has no evaluation under {art.root}: build it with `{build}`")
        built_with = read_json(art.require("eval_metrics") / "metrics.json").get("profile") or profile
        profiles.append(resolve_profile(key, built_with if built_with in PROFILE_NAMES else profile))
    labels = [_label(k) for k in keys]
    splits = {}
    for split in SPLITS:
        rows = [read_per_query(evaluation_dirs(a), split) for a in arts]
        if any(len(r) == 0 for r in rows):
            continue
        names = list(dict.fromkeys(s for r in rows for s in r["setting"]))
        table: dict[str, dict] = {}
        paired: set[int] = set()
        for name in names:
            parts = [r[r["setting"] == name].set_index("qid").sort_index() for r in rows]
            cells: dict[str, dict[str, Any]] = {}
            for label, part in zip(labels, parts):
                if len(part) == 0:
                    continue
                cells[label] = percentages(part) | {"n": len(part)}
            first = parts[0]
            for label, part in zip(labels[1:], parts[1:]):
                if label in cells and len(first):
                    common = first.index.intersection(part.index)
                    paired.add(len(common))
                    a = first.loc[common, "hit@1"].to_numpy() > 0.5
                    b = part.loc[common, "hit@1"].to_numpy() > 0.5
                    cells[label]["p"] = float(f"{mcnemar(a, b)[1]:.4g}") if len(common) else None
            table[name] = cells
        n = int(np.max([r["qid"].nunique() for r in rows]))
        splits[split] = {"n_queries": n, "paired": sorted(paired), "settings": table}
    if not splits:
        raise GraspError(f"no split of {dataset!r} was evaluated in every one of {', '.join(keys)}")
    return {
        "dataset": dataset,
        "variants": labels,
        "partitions": keys,
        "reference": labels[0],
        "splits": splits,
        "differ": {k: [_plain(v) for v in vs] for k, vs in differing(profiles).items()},
    }


def _plain(value: Any) -> Any:
    """A setting's value as JSON can hold it (infinity as a string)."""
    if isinstance(value, float) and not (value == value and abs(value) != float("inf")):
        return str(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def render_comparison(doc: dict) -> str:
    """The markdown of :func:`compare`'s document."""
    from grasp_core.eval.results import markdown_table
    from grasp_core.metrics import METRICS

    ref = doc["reference"]
    parts = [f"## `{doc['dataset']}`: {', '.join(f'`{v}`' for v in doc['variants'])}\n"]
    for split, part in doc["splits"].items():
        paired = ", ".join(str(n) for n in part["paired"]) or "—"
        parts.append(
            f"### {split} split ({part['n_queries']} queries; paired with `{ref}`: {paired})\n\n"
            f"Hit@1, Hit@5, Recall@20, MRR in percent; p: two-sided McNemar on per-query Hit@1 against `{ref}`.\n"
        )
        rows = []
        for name, cells in part["settings"].items():
            for label in doc["variants"]:
                if label not in cells:
                    rows.append([name, label, "—", "—", "—", "—", "not evaluated"])
                    continue
                c = cells[label]
                p = "—" if label == ref else ("—" if c.get("p") is None else f"{c['p']:.3g}")
                rows.append([name, label, *(f"{c[m]:.1f}" for m in METRICS), p])
        parts.append(markdown_table(["setting", "variant", *METRICS, f"McNemar p vs {ref}"], rows) + "\n")
    if doc["differ"]:
        parts.append("### Settings that differ\n")
        parts.append(
            markdown_table(
                ["setting", *doc["variants"]], ([k, *(f"`{v}`" for v in vs)] for k, vs in doc["differ"].items())
            )
        )
    else:
        parts.append("The variants' settings are the same.")
    return "\n".join(parts)

"""Each asset's code version: what its step declares it reads, and the library code that runs it.

The version hashes (1) the values of the profile sections the step declares (``@step(reads=...)`` in
``grasp_core/pipeline``), with any run-config override applied, and (2) the source of the ``grasp_core`` code in
the step's closure, found by reading the modules: starting from the step function, every top-level function,
class and constant it names (directly, through an import, also one inside a function, or as ``module.name``),
transitively, and the package data files (prompts, question lists) that code names. Two things are not followed
by name: :class:`~grasp_core.profiles.Profile` (its values are hashed, through the sections a step declares; the
config class of each declared section is in the closure) and :class:`~grasp_core.components.Components`, of which
only the members that the closure uses (``components.executor``, ``components.reranker()``) are followed. So a changed setting,
step or library function marks exactly the assets whose steps run it stale, and the data versions of what they
rebuild carry the change downstream.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import dagster as dg

import grasp_core
from grasp_core.pipeline.step import STEPS, Step, section_values
from grasp_core.profiles import Profile

ROOT = Path(grasp_core.__file__).parent
PROFILES, COMPONENTS = "grasp_core.profiles", "grasp_core.components"
TOP = "<module>"  # a module's top-level statements other than definitions, imports and the docstring
Unit = tuple[str, str]  # (module, top-level name or TOP)


@dataclass
class _Module:
    """One module, read once: its top-level definitions and what its names are bound to."""

    lines: list[str]
    units: dict[str, list[ast.AST]] = field(default_factory=dict)  # name -> the statements defining it
    bindings: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # name -> (module, name | None)


@dataclass(frozen=True)
class _Info:
    """What one unit names (other units, attribute names, strings) and its source."""

    uses: frozenset[Unit]
    attrs: frozenset[str]
    strings: frozenset[str]
    source: str


@cache
def _file(module: str, root: Path) -> Path:
    """The source file of ``module`` in the ``grasp_core`` package at ``root``."""
    base = root.parent.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


@cache
def _exists(module: str, root: Path) -> bool:
    return _file(module, root).exists()


def _import_bindings(node: ast.AST, root: Path) -> dict[str, tuple[str, str | None]]:
    """The ``grasp_core`` names an import statement binds: a module (``import a.b as m``) or a name in one."""
    out: dict[str, tuple[str, str | None]] = {}
    if isinstance(node, ast.Import):
        for a in node.names:
            if a.name.split(".")[0] == "grasp_core":
                out[a.asname or a.name.split(".")[0]] = (a.name if a.asname else "grasp_core", None)
    elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "grasp_core":
        for a in node.names:
            sub = f"{node.module}.{a.name}"
            out[a.asname or a.name] = (sub, None) if _exists(sub, root) else (node.module, a.name)
    return out


@cache
def _module(module: str, root: Path) -> _Module:
    """The module's definitions and bindings (read once per process: a code location reads its code once).
    :class:`~grasp_core.components.Components` is split into its members (``Components.executor``)."""
    text = _file(module, root).read_text()
    tree, mod = ast.parse(text), _Module(text.splitlines())
    body = tree.body[1:] if tree.body and isinstance(tree.body[0], ast.Expr) else tree.body  # the docstring
    for node in body:
        if isinstance(node, ast.If) and ast.unparse(node.test) in {"TYPE_CHECKING", "typing.TYPE_CHECKING"}:
            continue  # imports for annotations only: they never run
        if module == COMPONENTS and isinstance(node, ast.ClassDef) and node.name == "Components":
            for part in node.body:
                member = isinstance(part, ast.FunctionDef) and part.name != "__init__"
                mod.units.setdefault(f"Components.{part.name}" if member else "Components", []).append(part)  # type: ignore[attr-defined]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            mod.units.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            mod.bindings.update(_import_bindings(node, root))
        elif isinstance(node, ast.Assign | ast.AnnAssign) and all(
            isinstance(t, ast.Name) for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        ):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                mod.units.setdefault(t.id, []).append(node)  # type: ignore[attr-defined]
        else:
            mod.units.setdefault(TOP, []).append(node)
    return mod


def _walk(nodes: list[ast.AST]):
    """Every node under ``nodes`` except annotations (which never run: every module defers them)."""
    todo = list(nodes)
    while todo:
        node = todo.pop()
        yield node
        for name, value in ast.iter_fields(node):
            if name not in {"annotation", "returns"}:
                todo += [v for v in (value if isinstance(value, list) else [value]) if isinstance(v, ast.AST)]


@cache
def _info(module: str, name: str, root: Path) -> _Info:
    mod = _module(module, root)
    nodes = mod.units.get(name, [])
    all_nodes = list(_walk(nodes))
    bindings = dict(mod.bindings)
    for node in all_nodes:
        bindings.update(_import_bindings(node, root))  # imports inside functions
    uses, attrs, strings = set(), set(), set()
    for node in all_nodes:
        if isinstance(node, ast.Attribute):
            attrs.add(node.attr)
            bound = bindings.get(node.value.id) if isinstance(node.value, ast.Name) else None
            if bound is not None and bound[1] is None:
                uses.add((bound[0], node.attr))  # module.name
        elif isinstance(node, ast.Name) and node.id in mod.units:
            uses.add((module, node.id))
        elif isinstance(node, ast.Name) and node.id in bindings and bindings[node.id][1] is not None:
            uses.add((bindings[node.id][0], bindings[node.id][1]))  # type: ignore[arg-type]
        elif isinstance(node, ast.ImportFrom | ast.Import):
            uses |= {(m, n) for m, n in _import_bindings(node, root).values() if n is not None}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and 0 < len(node.value) < 200:
            strings.add(node.value)
    first = [min([n.lineno, *(d.lineno for d in getattr(n, "decorator_list", []))]) for n in nodes]  # type: ignore[attr-defined]
    source = "\n".join("\n".join(mod.lines[a - 1 : n.end_lineno]) for a, n in zip(first, nodes))  # type: ignore[attr-defined]
    return _Info(frozenset(uses), frozenset(attrs), frozenset(strings), source)


def _resolve(unit: Unit, root: Path) -> Unit | None:
    """Where the name is defined (following re-exports); None for a submodule or a name outside the library."""
    module, name = unit
    for _ in range(10):
        if not _exists(module, root):
            return None
        mod = _module(module, root)
        if name in mod.units:
            return module, name
        if name not in mod.bindings or mod.bindings[name][1] is None:
            return None
        module, name = mod.bindings[name]  # type: ignore[assignment]
    return None


def _section_classes(step: Step) -> set[Unit]:
    """The config class of each section the step reads (its methods run on the section's value)."""
    out = set()
    for f in dataclasses.fields(Profile):
        if f.name in step.reads and f.default_factory is not dataclasses.MISSING:
            cls = type(f.default_factory())
            out.add((cls.__module__, cls.__name__))
    return out


def closure(step: Step, root: Path = ROOT) -> dict[Unit, _Info]:
    """The library code the step runs, read from the ``grasp_core`` package at ``root``."""
    members = {n.removeprefix("Components."): n for n in _module(COMPONENTS, root).units if n.startswith("Components.")}
    members.pop("close")  # the asset layer closes the components after the step; no step does
    # every step runs on a Components (its ``components``): the class is always in, its members as far as they are named
    todo = {(step.fn.__module__, step.fn.__name__), (COMPONENTS, "Components")} | _section_classes(step)
    found: dict[Unit, _Info] = {}
    while todo:
        unit = _resolve(todo.pop(), root)
        if unit is None or unit in found or unit[0] == PROFILES:
            continue
        found[unit] = info = _info(*unit, root)
        todo |= info.uses | {(COMPONENTS, members[a]) for a in info.attrs if a in members}
        if TOP in _module(unit[0], root).units:
            todo.add((unit[0], TOP))
    return found


@cache
def profile_reads(step: Step, root: Path = ROOT) -> set[str]:
    """The profile sections the step's code reads (``components.profile.x``, ``self.profile.x``, ``profile.x``), found in
    its closure: what its ``@step(reads=...)`` must declare (a test compares them)."""
    sections = {f.name for f in dataclasses.fields(Profile)}
    found = set()
    for module, name in closure(step, root):
        nodes = list(_walk(_module(module, root).units.get(name, [])))
        aliases = {"profile"} | {  # p = self.profile
            t.id
            for n in nodes
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Attribute) and n.value.attr == "profile"
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        for node in nodes:
            if isinstance(node, ast.Attribute) and node.attr in sections:
                owner = node.value
                if (isinstance(owner, ast.Attribute) and owner.attr == "profile") or (
                    isinstance(owner, ast.Name) and owner.id in aliases
                ):
                    found.add(node.attr)
    return found


@cache
def _data_files(root: Path) -> tuple[Path, ...]:
    return tuple(sorted(p for p in root.rglob("*") if p.is_file() and p.suffix not in {".py", ".pyc"}))


def code_version(step: Step, profile: Profile, root: Path = ROOT) -> str:
    """The step's declared settings (values of ``profile``) and the code it runs, hashed."""
    settings = json.dumps(section_values(profile, step.reads), sort_keys=True, default=str)
    return hashlib.sha256(f"{settings}\0{_code_digest(step, root)}".encode()).hexdigest()[:16]


def code_digest(step: Step, root: Path = ROOT) -> str:
    """The digest of the library code the step runs (its code version without the settings)."""
    return _code_digest(step, root)


@cache
def _code_digest(step: Step, root: Path) -> str:
    """The source of the code the step runs, and the package data files (prompts, question lists) that code names
    by file name or path, hashed."""
    digest = hashlib.sha256()
    code = closure(step, root)
    for (module, name), info in sorted(code.items()):
        digest.update(f"{module}:{name}\0{info.source}\0".encode())
    strings = set().union(*(info.strings for info in code.values()))
    for path in _data_files(root):
        rel = path.relative_to(root).as_posix()
        if path.name in strings or any(rel.endswith(s) for s in strings if "/" in s):
            digest.update(rel.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def step_of(asset: dg.AssetsDefinition) -> Step:
    name = asset.key.to_user_string()
    if name not in STEPS:
        raise ValueError(f"asset {name!r} runs no declared step: decorate its step function with @step({name!r}, ...)")
    return STEPS[name]


def with_code_version(asset: dg.AssetsDefinition, profile: Profile) -> dg.AssetsDefinition:
    version = code_version(step_of(asset), profile)
    return asset.map_asset_specs(lambda spec: spec.replace_attributes(code_version=version))

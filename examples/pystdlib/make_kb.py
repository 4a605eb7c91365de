"""Write the example knowledge base: the Python standard library as a typed graph with text, read from this
interpreter by ``inspect`` (nothing hand-written, nothing downloaded).

Nodes: 30 modules, their public functions, classes and exceptions (at most ``PER_KIND`` of each per module, in
name order, only those with a docstring), the methods of those classes (at most ``METHODS`` each, defined by the
class itself, with a docstring), and the built-in exceptions the exceptions derive from. Each node's ``summary``
is the first paragraph of its docstring; a function's or method's short name (``dumps`` for ``json.dumps``) is its alias.
Edges: a module ``defines`` its members, a class ``has_method`` its methods, a class or exception is a ``subclass_of`` its bases in the graph, a
module ``imports`` the modules of the list it imports. Run from the repository root:

    python examples/pystdlib/make_kb.py        # writes examples/pystdlib/{nodes,edges}.csv

The shipped files were made with the Python named in ``examples/pystdlib/README.md``; another version's
docstrings differ a little.
"""

from __future__ import annotations

import builtins
import csv
import importlib
import inspect
import re
import sys
from pathlib import Path

MODULES = (
    "argparse base64 bisect calendar collections contextlib copy csv dataclasses datetime decimal difflib enum "
    "fnmatch fractions functools glob gzip heapq html json logging math pathlib pprint random shutil statistics "
    "string tempfile textwrap"
).split()
PER_KIND = 10
METHODS = 4
OUT = Path(__file__).resolve().parent


def summary(obj) -> str | None:
    doc = inspect.getdoc(obj)
    if not doc:
        return None
    first = re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0]
    text = " ".join(first.split())
    return text[:400] if len(text) > 20 else None


def kind_of(obj) -> str | None:
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return "function"
    return None


def main() -> None:
    nodes: dict[str, dict] = {}
    edges: list[tuple[str, str, str]] = []
    objects: dict[int, str] = {}  # id(obj) -> node id
    for name in MODULES:
        mod = importlib.import_module(name)
        nodes[name] = {"id": name, "type": "module", "name": name, "aliases": "", "summary": summary(mod) or ""}
        members: dict[str, list[tuple[str, object]]] = {"function": [], "class": [], "exception": []}
        for attr in sorted(vars(mod)):
            obj = getattr(mod, attr)
            kind = kind_of(obj)
            home = getattr(obj, "__module__", "") or ""
            if attr.startswith("_") or kind is None or home.lstrip("_") != name or not summary(obj):
                continue
            members[kind].append((attr, obj))
        for kind, found in members.items():
            for attr, obj in found[:PER_KIND]:
                key = f"{name}.{attr}"
                alias = attr if kind == "function" else ""
                nodes[key] = {"id": key, "type": kind, "name": key, "aliases": alias, "summary": summary(obj)}
                objects[id(obj)] = key
                edges.append((name, "defines", key))
        for other in MODULES:
            if other != name and inspect.ismodule(vars(mod).get(other)):
                edges.append((name, "imports", other))
    # methods: the public methods a class of the graph defines itself (not inherited), with a docstring
    for key in [k for k, n in nodes.items() if n["type"] == "class"]:
        module, attr = key.rsplit(".", 1)
        cls = getattr(importlib.import_module(module), attr)
        methods = [
            m
            for m in sorted(vars(cls))
            if not m.startswith("_") and inspect.isroutine(vars(cls)[m]) and summary(vars(cls)[m])
        ]
        for m in methods[:METHODS]:
            mkey = f"{key}.{m}"
            nodes[mkey] = {"id": mkey, "type": "method", "name": mkey, "aliases": m, "summary": summary(vars(cls)[m])}
            edges.append((key, "has_method", mkey))
    # bases: classes in the graph, and the built-in exceptions the graph's exceptions derive from
    for key in list(nodes):
        if nodes[key]["type"] not in ("class", "exception"):
            continue
        module, attr = key.rsplit(".", 1)
        cls = getattr(importlib.import_module(module), attr)
        for base in cls.__bases__:
            if (
                id(base) not in objects
                and issubclass(base, BaseException)
                and getattr(builtins, base.__name__, None) is base
            ):
                bkey = f"builtins.{base.__name__}"
                nodes.setdefault(
                    bkey,
                    {
                        "id": bkey,
                        "type": "exception",
                        "name": base.__name__,
                        "aliases": "",
                        "summary": summary(base) or "",
                    },
                )
                objects[id(base)] = bkey
            if id(base) in objects:
                edges.append((key, "subclass_of", objects[id(base)]))
    with open(OUT / "nodes.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["id", "type", "name", "aliases", "summary"])
        w.writeheader()
        w.writerows(nodes.values())
    with open(OUT / "edges.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["src", "rel", "dst"])
        w.writerows(dict.fromkeys(edges))
    print(f"{len(nodes)} nodes, {len(dict.fromkeys(edges))} edges (Python {sys.version.split()[0]}) -> {OUT}")


if __name__ == "__main__":
    main()

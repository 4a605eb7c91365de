"""Environment variables are read in one place: ``grasp_core.environment``, whose table the docs list."""

import ast
import re
from pathlib import Path

import pytest

from grasp_core.environment import VARIABLES, env, named_env

ROOT = Path(__file__).resolve().parents[1]


def _reads(tree: ast.AST) -> list[str]:
    """``os.environ.get(...)``, ``os.environ[...]`` and ``os.getenv(...)`` reads (writes and copies are not reads)."""
    found = []
    for node in ast.walk(tree):
        target = node.func if isinstance(node, ast.Call) else node.value if isinstance(node, ast.Subscript) else None
        text = ast.unparse(target) if target is not None else ""
        if text in ("os.environ.get", "os.getenv", "os.environ") and not (
            isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store)
        ):
            found.append(ast.unparse(node))
    return found


def test_no_module_but_environment_reads_a_variable():
    offenders = {}
    for package in ("grasp_core", "grasp_assets"):
        for file in (ROOT / package).rglob("*.py"):
            if file.name == "environment.py":
                continue
            reads = [r for r in _reads(ast.parse(file.read_text())) if "PYTHONPATH" not in r]
            if reads:
                offenders[str(file.relative_to(ROOT))] = reads
    assert offenders == {}


def test_the_docs_list_every_variable_and_no_other():
    text = (ROOT / "docs" / "configuration.md").read_text()
    section = text[text.index("## Environment variables") :]
    section = section[: section.index("\n## ")] if "\n## " in section else section
    listed = {
        name
        for row in section.splitlines()
        if row.startswith("| `")
        for name in re.findall(r"`([A-Z0-9_]+)`", row.split("|")[1])
    }
    assert listed == set(VARIABLES)


def test_env_reads_only_declared_variables_and_treats_empty_as_unset(monkeypatch):
    monkeypatch.setenv("GRASP_PROFILE", "")
    assert env("GRASP_PROFILE", "cpu") == "cpu"
    monkeypatch.setenv("GRASP_PROFILE", "gpu")
    assert env("GRASP_PROFILE", "cpu") == "gpu"
    with pytest.raises(KeyError, match="GRASP_PROFILES is not one of GRASP's environment variables"):
        env("GRASP_PROFILES")
    monkeypatch.setenv("MY_KEY", "k")
    assert named_env("MY_KEY") == "k" and named_env(None) is None and named_env("MY_UNSET_KEY") is None

"""scripts/setup.sh refuses a Python outside pyproject.toml's requires-python in one line, before it creates anything
(run on a copy of the script in an empty directory: the checkout's .venv is never touched)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_setup(tmp_path: Path, python: str) -> subprocess.CompletedProcess:
    (tmp_path / "scripts").mkdir(exist_ok=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return subprocess.run(
        ["bash", "scripts/setup.sh"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHON": python},
        capture_output=True,
        text=True,
        timeout=60,
    )


def fake_python(tmp_path: Path, version: str) -> str:
    """An interpreter that says it is ``version`` (what the script asks: ``Python X.Y``)."""
    path = tmp_path / f"python{version}"
    path.write_text(f'#!/bin/sh\necho "Python {version}"\n')
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize("version", ["3.10", "3.13", "2.7"])
def test_an_unsupported_python_is_refused_in_one_line_naming_the_versions(tmp_path, version):
    python = fake_python(tmp_path, version)
    proc = run_setup(tmp_path, python)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"[setup] error: GRASP needs Python 3.11 or 3.12, and {python} is Python {version}; install one and run "
        "PYTHON=python3.12 bash scripts/setup.sh (or python3.11)"
    ]
    assert not (tmp_path / ".venv").exists()


def test_something_that_is_not_a_python_is_refused_in_one_line(tmp_path):
    proc = run_setup(tmp_path, "/bin/false")
    assert proc.returncode == 1 and len(proc.stderr.splitlines()) == 1
    assert "GRASP needs Python 3.11 or 3.12, and /bin/false is not a Python that runs" in proc.stderr


def test_the_script_says_how_it_gets_a_cpu_torch():
    script = (ROOT / "scripts" / "setup.sh").read_text()
    assert "TORCH=2.13.0+cpu" in script and "https://download.pytorch.org/whl/cpu" in script
    assert 'echo "[setup] torch $TORCH (the CPU build)' in script


def test_the_answer_paths_own_modules_have_their_bytecode_after_setup():
    """The test command ran scripts/setup.sh, which compiles grasp_core and grasp_assets: a `grasp query` then
    compiles none of its own modules, also where PYTHONDONTWRITEBYTECODE keeps imports from writing bytecode."""
    import importlib.util

    code = (
        "import sys, grasp_core.retriever, grasp_assets.cli\n"
        "for m in list(sys.modules.values()):\n"
        "    if m.__name__.split('.')[0] in ('grasp_core', 'grasp_assets'):\n"
        "        print(m.__file__)"
    )
    python = str(ROOT / ".venv" / "bin" / "python")
    files = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert len(files) > 30 and all(Path(f).is_relative_to(ROOT) for f in files)
    assert [f for f in files if not Path(importlib.util.cache_from_source(f)).is_file()] == []

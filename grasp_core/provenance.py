"""Where a result was made: the code's commit and the machine, recorded beside every evaluation and benchmark so
that two results can be told apart without reading the command that wrote them."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any


def code_commit() -> str:
    """The checkout's short commit, with ``+dirty`` when tracked files differ from it (``unknown`` outside git)."""
    repo = Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=repo, capture_output=True).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def machine_facts() -> dict[str, Any]:
    """Cores this process may use, the CPU model, memory (GiB) and Python: what a reader needs to compare times."""
    cpu, mem_gib = platform.processor() or platform.machine(), None
    try:
        info = Path("/proc/cpuinfo").read_text()
        cpu = next(line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name"))
        kib = next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines() if "MemTotal" in line)
        mem_gib = round(int(kib) / 2**20, 1)
    except (OSError, StopIteration):
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": cpu, "cores": cores, "memory_gib": mem_gib, "python": platform.python_version()}


def machine_summary() -> str:
    """:func:`machine_facts` in a few words: ``2 cores, AMD EPYC 7B13, 24 GiB``."""
    facts = machine_facts()
    memory = f", {round(facts['memory_gib'])} GiB" if facts["memory_gib"] else ""
    return f"{facts['cores']} cores, {facts['cpu']}{memory}"

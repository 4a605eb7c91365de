"""The benchmark scripts: each answers ``--help`` without doing any work, and the shared harness records, times
and writes results as it says."""

import contextlib
import io
import json
import runpy
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py") if p.name != "harness.py")


@pytest.fixture
def harness(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # as `python benchmarks/NAME.py` has it
    import harness

    return harness


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_answers_help_with_its_usage_and_does_nothing_else(script, monkeypatch):
    """In this process (the libraries are imported once for all scripts): argparse prints the usage and exits 0."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.setattr(sys, "argv", [str(BENCHMARKS / script), "--help"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        runpy.run_path(str(BENCHMARKS / script), run_name="__main__")
    assert exit_.value.code == 0
    assert out.getvalue().startswith("usage:"), out.getvalue()[:200]


def test_a_run_writes_its_record_beside_the_result(harness, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["bench.py", "hpo", "--runs", "3"])
    run = harness.Run(profile="cpu", threads=1)
    path = run.write(tmp_path / "sub" / "x.json", {"latency": harness.percentiles([1.0, 2.0, 3.0, 10.0])}, quiet=True)
    doc = json.loads(path.read_text())
    record = doc["record"]
    assert record["profile"] == "cpu" and record["threads"] == 1
    assert record["command"] == "bench.py hpo --runs 3"
    assert record["machine"]["cores"] >= 1 and record["machine"]["python"].count(".") == 2
    assert set(record["load_average_1m"]) == {"start", "end"} and record["wall_s"] >= 0
    assert record["commit"] == "unknown" or len(record["commit"].split("+")[0]) >= 7
    assert doc["latency"] == {"p50": 2.5, "p95": 8.95, "mean": 4.0, "n": 4}
    assert not list(tmp_path.glob("sub/*.tmp"))  # written through a temporary file, then renamed
    assert capsys.readouterr().err.strip() == f"-> {path}"


def test_timed_calls_warm_up_untimed_then_time_each_call(harness):
    calls = []
    times = harness.timed(lambda: calls.append(1), n=4, warmup=2)
    assert len(calls) == 6 and len(times) == 4 and all(t >= 0 for t in times)
    assert harness.percentiles([]) == {"n": 0}
    assert harness.read_result(Path("/nonexistent/x.json")) == {}

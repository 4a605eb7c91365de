"""The integrations without a trained retriever: the library imports without their extras, a missing extra is a
one-line error naming the pip install, and `grasp mcp` refuses a dataset it cannot serve in one line, before any
protocol traffic. (The adapters answering through the frameworks' own interfaces, an MCP client over stdio among
them, run on the trained tiny system in tests/test_end_to_end.py.)"""

import json
import subprocess
import sys

import pytest

from grasp_core.errors import GraspError
from grasp_core.integrations.common import check_k, short

WITHOUT_EXTRAS = """
import json, sys
for name in ("langchain_core", "llama_index", "mcp"):
    sys.modules[name] = None  # as if not installed
import grasp_core.cli, grasp_core.integrations, grasp_core.integrations.common, grasp_core.retriever
out = {}
for adapter in ("langchain", "llamaindex", "mcp_server"):
    try:
        __import__(f"grasp_core.integrations.{adapter}")
    except ImportError as exc:
        out[adapter] = [type(exc).__name__, str(exc)]
out["cli"] = grasp_core.cli.main(["mcp", "hpo"])
print(json.dumps(out))
"""


def test_without_the_extras_the_library_imports_and_each_adapter_names_its_pip_install():
    proc = subprocess.run([sys.executable, "-c", WITHOUT_EXTRAS], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    for adapter, extra, package in (
        ("langchain", "langchain", "langchain_core"),
        ("llamaindex", "llamaindex", "llama_index"),
        ("mcp_server", "mcp", "mcp"),
    ):
        kind, message = out[adapter]
        assert kind == "MissingExtraError" and "\n" not in message
        assert message.endswith(f"pip install 'grasp[{extra}]'") and f"({package} is not installed)" in message
    assert out["cli"] == 2  # `grasp mcp` without the extra: a one-line error, before any model loads
    assert proc.stderr.strip().splitlines() == ["error: " + out["mcp_server"][1]]


@pytest.mark.parametrize(
    "dataset, message",
    [("no-such-dataset", "unknown dataset 'no-such-dataset'"), ("hpo", "has not been built yet")],
)
def test_grasp_mcp_refuses_a_dataset_it_cannot_serve_in_one_line(tmp_path, dataset, message):
    cmd = [sys.executable, "-m", "grasp_assets.cli", "--root", str(tmp_path), "mcp", dataset]
    proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""  # stdout is the protocol's: nothing else is written there
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0] and "Traceback" not in proc.stderr


def test_k_and_short_text():
    assert check_k(1) == 1 and check_k(100) == 100
    for bad in (0, 101, True, 2.0, "3"):
        with pytest.raises(GraspError, match="k \\(answers returned\\) must be an integer from 1 to 100"):
            check_k(bad)
    assert short("abc", 5) == "abc" and short("abcdefgh", 5) == "abcd…" and len(short("x" * 400)) == 300

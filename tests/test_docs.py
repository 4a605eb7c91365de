"""The README and docs cannot drift from the results files: generated tables are rendered again and compared, every
figure quoted in prose names the value it quotes (``12.3<!-- fig FILE PATH [UNIT] -->``) and is checked against it,
and the README stays user documentation (its length, no commit hashes, every doc indexed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from grasp_core.report import README_BEGIN, README_END, dataset_report, recorded_results, summary_report

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
FIGURE = re.compile(r"(-?[0-9][0-9,]*(?:\.[0-9]+)?)\**\s*<!-- fig (\S+) (\S+)(?: (\S+))? -->")
UNITS = {None: 1.0, "GiB": 2.0**-30, "MiB": 2.0**-20, "ms": 1000.0, "%": 100.0}
HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


def _generated_block(text: str) -> tuple[str, str]:
    """(the text outside the results block, the block's content)."""
    begin, end = text.index(README_BEGIN), text.index(README_END)
    return text[:begin] + text[end:], text[begin + len(README_BEGIN) : end].strip()


def _datasets(block: str) -> list[str]:
    return list(dict.fromkeys(re.findall(r"`pipeline_([A-Za-z0-9_.-]+?)(?:_test-human)?\.json`", block)))


def _value(doc, path: str):
    for part in path.split("/"):
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def _prose(text: str) -> str:
    """Markdown without its fenced code blocks."""
    return re.sub(r"```.*?```", "", text, flags=re.S)


def test_the_readme_results_are_what_grasp_report_renders_from_the_results_files():
    _, block = _generated_block(README.read_text())
    datasets = _datasets(block)
    assert datasets, "the README's results block names no results file: run `grasp report … --readme README.md`"
    rendered = summary_report({d: recorded_results(RESULTS, d) for d in datasets})
    assert block == rendered.strip(), "the README's results block is stale: rerun the `grasp report` command it names"


def test_the_results_page_is_what_grasp_report_renders_from_the_results_files():
    page = (ROOT / "docs" / "results.md").read_text()
    datasets = _datasets(page) or re.findall(r"### `([^`]+)`, test split", page)
    for dataset in datasets:
        assert dataset_report(recorded_results(RESULTS, dataset)) in page, f"docs/results.md is stale for {dataset}"


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_every_quoted_figure_equals_its_results_file(doc):
    for number, name, path, unit in FIGURE.findall(doc.read_text()):
        shown = float(number.replace(",", ""))
        decimals = len(number.split(".")[1]) if "." in number else 0
        value = float(_value(json.loads((RESULTS / name).read_text()), path)) * UNITS[unit or None]
        assert round(value, decimals) == pytest.approx(shown), f"{doc.name}: {number} quotes {name} {path} = {value}"


def test_every_decimal_figure_in_the_readme_prose_names_its_results_file():
    outside, _ = _generated_block(README.read_text())
    prose = FIGURE.sub("", _prose(outside))
    unquoted = re.findall(r"(?<![\w./–-])(?<!Python )[0-9]+\.[0-9]+(?![\w./-])", prose)
    assert not unquoted, (
        f"figures without a results file in the README: {unquoted}; quote them as 1.2<!-- fig FILE PATH -->"
    )


def test_the_readme_is_user_documentation():
    text = README.read_text()
    outside, _ = _generated_block(text)
    assert len(text.split()) <= 3500, f"the README has {len(text.split())} words (at most 3,500)"
    assert not HASH.findall(_prose(outside)), f"commit hashes in the README's prose: {HASH.findall(_prose(outside))}"
    assert text.startswith("```bash\nbash ./scripts/main.sh hpo") and "bash ./scripts/test.sh" in text.split("```")[1]


def test_the_docs_index_lists_every_doc_and_every_link_resolves():
    index = (ROOT / "docs" / "README.md").read_text()
    missing = [d.name for d in DOCS if d.name != "README.md" and f"({d.name}" not in index]
    assert not missing, f"docs/README.md does not index {missing}"
    for doc in [README, *DOCS]:
        for link in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", _prose(doc.read_text())):
            assert (doc.parent / link).exists(), f"{doc.name} links to {link}, which does not exist"


def test_the_cli_reference_names_every_command():
    import argparse

    from grasp_assets.cli import build_parser

    def commands(parser: argparse.ArgumentParser, prefix: str) -> list[str]:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            return [prefix]
        return [c for name, sub in subs[0].choices.items() for c in commands(sub, f"{prefix} {name}")]

    reference = (ROOT / "docs" / "cli.md").read_text()
    missing = [c for c in commands(build_parser(), "grasp") if f"`{c}" not in reference]
    assert not missing, f"docs/cli.md does not describe {missing}"


def test_the_design_doc_maps_every_package_and_module_of_the_library():
    text = (ROOT / "docs" / "design.md").read_text()
    section = text[text.index("## The package map") : text.index("## The answer path")]
    library = ROOT / "grasp_core"
    names = [f"`{p.name}/`" for p in library.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    names += [f"`{p.name}/`" for p in library.iterdir() if p.is_dir() and p.name == "prompts"]
    names += [f"`{p.name}`" for p in library.glob("*.py") if p.name != "__init__.py"]
    assert [n for n in names if n not in section] == []

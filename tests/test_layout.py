"""The dependency direction of the library: serving loads no training code, and neither its packages nor the modules
of ``grasp_core`` and ``grasp_assets`` form an import cycle."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import grasp_assets
import grasp_core

ROOT = Path(grasp_core.__file__).parent
TRAINING = (
    "grasp_core.pipeline",
    "grasp_core.planner.lm.sft",
    "grasp_core.planner.lm.rl",
    "grasp_core.planner.policy.train",
    "grasp_core.planner.policy.chooser_train",
    "grasp_core.planner.teachers",
    "grasp_core.text.mfar_train",
)
TRAINING += ("grasp_core.rerank.train", "grasp_core.rerank.ltr", "trl", "dagster", "grasp_assets")
ORCHESTRATION = {"dagster", "dagster_docker", "grasp_assets"}
ANSWER_PATH = ("grasp_core.retriever", "grasp_core.answer", "grasp_core.components", "grasp_core.text")
ANSWER_PATH += ("grasp_core.entities", "grasp_core.planner", "grasp_core.plan", "grasp_core.rerank", "grasp_core.embed")
ANSWER_PATH += ("grasp_core.graph", "grasp_core.ranking")


def test_importing_the_retriever_loads_no_training_module():
    code = "import sys, json, grasp_core.retriever; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = json.loads(out)
    assert "grasp_core.components" in loaded and "grasp_core.ranking" in loaded
    assert [m for m in loaded for t in TRAINING if m == t or m.startswith(t + ".")] == []
    # a first answer's imports: the lm planner's decoding (transformers, llguidance) loads when it decodes, LightGBM
    # (with scikit-learn) when an explanation asks for feature contributions; the encoder needs neither transformers
    # nor sentence-transformers
    heavy = {"transformers", "sentence_transformers", "llguidance", "lightgbm", "sklearn"}
    assert sorted({m.split(".")[0] for m in loaded} & heavy) == []


def test_the_cli_help_loads_no_model_or_orchestration_library():
    code = (
        "import sys, json\nfrom grasp_assets import cli\ntry:\n    cli.main(['--help'])\nexcept SystemExit:\n"
        "    pass\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stderr)
    assert "grasp_core.names" in loaded  # the choices it lists; the configs load in the commands that read them
    heavy = ("torch", "transformers", "sentence_transformers", "faiss", "llguidance", "dagster", "mlflow", "pandas")
    assert sorted({m.split(".")[0] for m in loaded} & set(heavy)) == []


def test_query_with_server_loads_no_library_beyond_the_standard_one():
    """``grasp query --server`` is a client of a running grasp serve: it must start in a Python start's time."""
    code = (
        "import sys, json\nfrom grasp_assets import cli\n"
        "rc = cli.main(['query', 'hpo', 'Which genes?', '--server', 'http://127.0.0.1:9'])\n"
        "print(json.dumps([rc, sorted(sys.modules)]), file=sys.stderr)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    rc, loaded = json.loads(run.stderr.splitlines()[-1])
    assert rc == 2 and "no grasp serve answers at http://127.0.0.1:9" in run.stderr  # nothing listens on port 9
    heavy = ("numpy", "pandas", "pyarrow", "torch", "transformers", "faiss", "httpx", "fastapi", "pydantic", "dagster")
    assert sorted({m.split(".")[0] for m in loaded} & set(heavy)) == []
    assert not {"grasp_core.components", "grasp_core.profiles", "grasp_core.retriever"} & set(loaded)


def _unit(module: str) -> str:
    """A subpackage (``grasp_core.planner``) or a top-level module (``grasp_core.ranking``)."""
    return ".".join(module.split(".")[:2])


def package_graph() -> dict[str, set[str]]:
    """Which unit imports which, from every import statement of the library (also those inside functions)."""
    graph: dict[str, set[str]] = {}
    for file in ROOT.rglob("*.py"):
        module = ".".join(file.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__")
        deps = graph.setdefault(_unit(module), set())
        for node in ast.walk(ast.parse(file.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            deps |= {_unit(n) for n in names if n.startswith("grasp_core.")} - {_unit(module)}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per back edge found by a depth-first search (empty when the graph is acyclic)."""
    found, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_cycle_search_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_packages():
    graph = package_graph()
    assert "grasp_core.answer" in graph["grasp_core.retriever"] and "grasp_core.planner" in graph["grasp_core.answer"]
    assert "grasp_core.planner" not in graph["grasp_core.llm"]  # llm holds backends only
    assert "grasp_core.pipeline" not in graph["grasp_core.retriever"] | graph["grasp_core.answer"]
    assert "grasp_core.answer" in graph["grasp_core.pipeline"]  # evaluation and training answer through it
    assert cycles(graph) == []


def reachable(graph: dict[str, set[str]], unit: str) -> set[str]:
    """Every unit ``unit`` imports, directly or through others."""
    found, todo = set(), [unit]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in found:
                found.add(nxt)
                todo.append(nxt)
    return found


def test_data_sources_and_question_synthesis_sit_below_the_answer_path():
    """The knowledge base in three layers: the data model (``skb``) below question synthesis (``questions``) below
    the data sources (``sources``: the hpo source synthesizes its queries, an import writes the default wording);
    none of them reaches the answer path or the training steps."""
    graph = package_graph()
    sources, questions, skb = "grasp_core.sources", "grasp_core.questions", "grasp_core.skb"
    assert {skb, questions} <= graph[sources] and skb in graph[questions]
    assert sources not in reachable(graph, questions)
    assert not {sources, questions} & reachable(graph, skb)
    for unit in (sources, questions):
        assert sorted(reachable(graph, unit) & {*ANSWER_PATH, "grasp_core.pipeline"}) == []


def module_graph(root: Path) -> dict[str, set[str]]:
    """Which module of the package at ``root`` imports which of its modules, from every import statement (also those
    inside functions and under ``TYPE_CHECKING``); ``from package import module`` is an import of that module."""
    files = {
        ".".join(f.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__"): f
        for f in root.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for module, file in files.items():
        deps = graph.setdefault(module, set())
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in files}
            elif isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    deps |= {sub} if sub in files else {node.module} & set(files)
        deps.discard(module)
    return graph


def test_module_graph_sees_imports_of_submodules_and_inside_functions(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from pkg.a import x\n    import pkg.sub\n")
    graph = module_graph(pkg)
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.a", "pkg.sub"}
    assert cycles(graph) == [["pkg.a", "pkg.sub.b", "pkg.a"]]


@pytest.mark.parametrize("package", [grasp_core, grasp_assets], ids=lambda p: p.__name__)
def test_no_import_cycle_between_modules(package):
    graph = module_graph(Path(package.__file__).parent)
    assert len(graph) > 10 and cycles(graph) == []


def test_importing_the_server_loads_no_training_module():
    code = "import sys, json, grasp_core.serve; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = json.loads(out)
    assert "fastapi" in loaded and [m for m in loaded for t in TRAINING if m == t or m.startswith(t + ".")] == []


def imported_modules(file: Path) -> set[str]:
    """Every module a file imports: import statements (also inside functions) and ``import_module("...")`` calls."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(file.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in {
            "import_module",
            "__import__",
        }:
            names |= {a.value for a in node.args[:1] if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return names


def test_the_library_never_imports_the_orchestration_layer(tmp_path):
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text('import importlib\n\ndef f():\n    return importlib.import_module("grasp_assets.run")\n')
    assert "grasp_assets.run" in imported_modules(sneaky)
    offending = {
        str(file.relative_to(ROOT.parent)): sorted(
            m for m in imported_modules(file) if m.split(".")[0] in ORCHESTRATION
        )
        for file in ROOT.rglob("*.py")
    }
    assert {f: m for f, m in offending.items() if m} == {}


def test_the_planner_kinds_do_not_import_each_other():
    """``planner/lm`` and ``planner/policy`` share only the planner's common modules (candidates, reward, samples,
    the attempt record, config); the interface above them loads either."""
    root = ROOT / "planner"
    for kind, other in (("lm", "policy"), ("policy", "lm")):
        for file in (root / kind).rglob("*.py"):
            for node in ast.walk(ast.parse(file.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module:
                    assert not node.module.startswith(f"grasp_core.planner.{other}"), (file.name, node.module)

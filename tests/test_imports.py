"""Imports run one way, and the light entry points stay light.

The graph: every module of hpdsl/ parsed with `ast`, each a node of its own
(a package is its `__init__`), with an edge for every import the module can run:
at module level, inside functions and methods, under `try` and plain `if`, all
of them, but not those under `if TYPE_CHECKING:` (never run). `from P import N`
is an edge to P.N when that is a module, else to P. It must have no cycle, and
hpdsl/cost/ imports in layers, one way (COST_LAYERS). The entry points are run
in a child interpreter that reports `sys.modules`: `import hpdsl.cost` loads
neither lark nor torch, and `hpdsl --help` / `hpdsl compile` load neither numpy
nor rich.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hpdsl"

# --------------------------------------------------------------------------
# The graph
# --------------------------------------------------------------------------


def module_name(path: Path) -> str:
    """Return the dotted name of a module file under the repository root."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


class _Imports(ast.NodeVisitor):
    """Collects (imported module or name, line) of every import a module can run."""

    def __init__(self, module: str, package: bool) -> None:
        self.module, self.package = module, package
        self.found: list[tuple[str, int]] = []

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for statement in node.orelse:  # `if TYPE_CHECKING: ... else: ...`: the else runs
                self.visit(statement)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found += [(alias.name, node.lineno) for alias in node.names]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            parts = self.module.split(".")[: len(self.module.split(".")) - node.level + int(self.package)]
            base = ".".join([*parts, *([base] if base else [])])
        for alias in node.names:
            name = f"{base}.{alias.name}"
            self.found.append((name if name in MODULES else base, node.lineno))


def runtime_imports(path: Path, module: str) -> list[tuple[str, int]]:
    """Return (imported module or name, line) of every import of a module file that can run."""
    visitor = _Imports(module, path.name == "__init__.py")
    visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
    return visitor.found


def known_module(name: str) -> str | None:
    """Return the longest hpdsl module that `name` (a module, or a module's attribute) lies in."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def import_edges() -> dict[tuple[str, str], list[str]]:
    """Return (module, module) -> the import lines that make that edge, between distinct modules."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module, path in MODULES.items():
        where = path.relative_to(ROOT).as_posix()
        for name, line in runtime_imports(path, module):
            target = known_module(name) if name.split(".")[0] == "hpdsl" else None
            if target is None or target == module:
                continue
            edges.setdefault((module, target), []).append(f"{where}:{line} imports {target}")
    return edges


def find_cycle(edges: dict[tuple[str, str], list[str]]) -> list[str] | None:
    """Return the nodes of one cycle (first node repeated at the end), or None."""
    graph: dict[str, list[str]] = {}
    for source, target in sorted(edges):
        graph.setdefault(source, []).append(target)
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(current: str) -> list[str] | None:
        state[current] = "open"
        stack.append(current)
        for target in graph.get(current, []):
            if state.get(target) == "open":
                return [*stack[stack.index(target):], target]
            if target not in state and (found := visit(target)):
                return found
        state[current] = "done"
        stack.pop()
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def describe_cycle(cycle: list[str], edges: dict[tuple[str, str], list[str]]) -> str:
    """Return the cycle and, under each step, the imports that make it."""
    lines = [" -> ".join(cycle)]
    for source, target in zip(cycle, cycle[1:]):
        lines.append(f"  {source} -> {target}:")
        lines += [f"    {why}" for why in sorted(set(edges[(source, target)]))]
    return "\n".join(lines)


COST_LAYERS = ("facts", "formulas", "feasibility", "price", "sweep")
"""hpdsl/cost/'s layer folders, lowest first; the modules directly in hpdsl/cost/ are the top."""


def cost_layer(module: str) -> int | None:
    """Return the layer of a hpdsl.cost module (its folder's place in COST_LAYERS; the top: len), else None."""
    parts = module.split(".")
    if parts[:2] != ["hpdsl", "cost"]:
        return None
    if len(parts) > 3 or (len(parts) == 3 and parts[2] in COST_LAYERS):
        return COST_LAYERS.index(parts[2])
    return len(COST_LAYERS)


# --------------------------------------------------------------------------
# The graph's tests
# --------------------------------------------------------------------------


def test_the_graph_sees_every_runtime_import_per_module() -> None:
    edges = import_edges()
    assert ("hpdsl.api", "hpdsl.check.clean") in edges or any(
        s == "hpdsl.api" and t.startswith("hpdsl.check") for s, t in edges)
    assert any(s.startswith("hpdsl.check") and t.startswith("hpdsl.ir") for s, t in edges)
    assert any(s.startswith("hpdsl.ir") and t == "hpdsl.scope" for s, t in edges)
    # A function-level import is an edge: `hpdsl search --run` imports the train command when it runs.
    assert ("hpdsl.cli.cost", "hpdsl.cli.train") in edges
    # A module of a package is its own node: no edge is merged into its package's.
    assert ("hpdsl.cost.estimate", "hpdsl.cost.price.scalar") in edges
    # A TYPE_CHECKING import is no edge: hpdsl/__init__.py names hpdsl.api only there.
    assert not any(source == "hpdsl" for source, _ in edges)


def test_runtime_imports_leave_out_type_checking_only(tmp_path: Path) -> None:
    path = tmp_path / "sample.py"
    path.write_text("from typing import TYPE_CHECKING\nimport hpdsl.api\nif TYPE_CHECKING:\n"
                    "    import hpdsl.registry\nelse:\n    import hpdsl.errors\n"
                    "def f():\n    from hpdsl.cost import estimate\n    if x:\n        import hpdsl.fmt\n",
                    encoding="utf-8")
    names = [name for name, _ in runtime_imports(path, "sample")]
    assert names == ["typing", "hpdsl.api", "hpdsl.errors", "hpdsl.cost.estimate", "hpdsl.fmt"]


def test_find_cycle_reports_a_cycle_and_its_imports() -> None:
    edges = {("a", "b"): ["a.py:1 imports b"], ("b", "c"): ["b.py:2 imports c"],
             ("c", "a"): ["c.py:3 imports a"], ("c", "d"): ["c.py:4 imports d"]}
    cycle = find_cycle(edges)
    assert cycle == ["a", "b", "c", "a"]
    assert "c.py:3 imports a" in describe_cycle(cycle, edges)
    assert find_cycle({("a", "b"): ["a.py:1 imports b"]}) is None


def test_no_import_cycle() -> None:
    edges = import_edges()
    cycle = find_cycle(edges)
    assert cycle is None, "hpdsl's modules import each other in a cycle:\n" + describe_cycle(cycle, edges)


def test_the_cost_layers_import_one_way() -> None:
    upward = sorted(why for (source, target), whys in import_edges().items()
                    if (low := cost_layer(source)) is not None and (high := cost_layer(target)) is not None
                    and high > low for why in whys)
    assert upward == [], "a lower layer of hpdsl/cost/ imports a higher one:\n" + "\n".join(upward)


def test_hpdsl_cost_holds_at_most_a_dozen_modules_directly() -> None:
    direct = sorted(path.name for path in (PACKAGE / "cost").glob("*.py"))
    assert len(direct) <= 12, direct
    assert {path.name for path in (PACKAGE / "cost").iterdir() if path.is_dir() and path.name != "__pycache__"} \
        == set(COST_LAYERS)


def test_only_the_torch_backend_imports_torch() -> None:
    importers = sorted(
        f"{module}:{line}" for module, path in MODULES.items()
        if not module.startswith("hpdsl.torch")
        for name, line in runtime_imports(path, module)
        if name.split(".")[0] == "torch")
    assert importers == []


# --------------------------------------------------------------------------
# What the entry points load
# --------------------------------------------------------------------------

CLI = """\
import json, sys
from hpdsl.cli import main
try:
    main(sys.argv[1:], prog_name="hpdsl")
except SystemExit as stop:
    code = stop.code
print("\\nMODULES " + json.dumps([code, sorted(sys.modules)]))
"""


def _child(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True,
                          text=True, check=False, env={**os.environ, "PYTHONPATH": path}, timeout=120)


def _loaded(run: subprocess.CompletedProcess[str]) -> tuple[object, set[str]]:
    assert run.stdout.rfind("MODULES ") >= 0, run.stderr
    code, modules = json.loads(run.stdout[run.stdout.rfind("MODULES ") + len("MODULES "):])
    return code, {module.split(".")[0] for module in modules}


def test_importing_hpdsl_cost_loads_neither_lark_nor_torch() -> None:
    run = _child("import json, sys, hpdsl.cost\n"
                 "print('MODULES ' + json.dumps([0, sorted(sys.modules)]))")
    _, loaded = _loaded(run)
    assert "hpdsl" in loaded
    assert loaded.isdisjoint({"lark", "torch"}), sorted(loaded & {"lark", "torch"})


@pytest.mark.parametrize("first", ["hpdsl.bound.slots", "hpdsl.cost.search", "hpdsl.cost.estimate"])
def test_the_cost_functions_keep_their_names_whatever_loads_first(first: str) -> None:
    run = _child(f"import importlib, json, sys\nimportlib.import_module({first!r})\n"
                 "import hpdsl.cost\n"
                 "from hpdsl.cost.estimate import estimate\nfrom hpdsl.cost.search import search\n"
                 "assert hpdsl.cost.estimate is estimate and hpdsl.cost.search is search\n"
                 "from hpdsl.cost import Strategy, estimate as e, search as s\n"
                 "assert (e, s) == (estimate, search) and callable(Strategy)\n"
                 "print('MODULES ' + json.dumps([0, sorted(sys.modules)]))")
    assert run.returncode == 0, run.stderr
    _, loaded = _loaded(run)
    assert "numpy" in loaded


@pytest.mark.parametrize("heavy", ["numpy", "rich"])
def test_hpdsl_help_loads_neither_numpy_nor_rich(heavy: str) -> None:
    code, loaded = _loaded(_child(CLI, "--help"))
    assert code == 0
    assert heavy not in loaded


@pytest.mark.parametrize("heavy", ["numpy", "rich"])
def test_hpdsl_compile_loads_neither_numpy_nor_rich(heavy: str) -> None:
    run = _child(CLI, "compile")
    code, loaded = _loaded(run)
    assert code == 0, run.stderr
    assert "ok:" in run.stdout
    assert heavy not in loaded


def test_python_m_hpdsl_is_the_cli(tmp_path: Path) -> None:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    helped = subprocess.run([sys.executable, "-m", "hpdsl", "--help"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, check=False, timeout=120)
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("Usage: hpdsl ")
    assert "compile" in helped.stdout and "estimate" in helped.stdout
    compiled = subprocess.run([sys.executable, "-m", "hpdsl", "compile", "-o", "registry.json"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
                              timeout=120)
    assert compiled.returncode == 0, compiled.stderr
    assert compiled.stdout.startswith("ok: ")
    assert json.loads((tmp_path / "registry.json").read_text(encoding="utf-8"))["schema_version"]


def test_a_training_rank_and_explain_load_torch_distributed_pipelining_only_for_pp() -> None:
    """torch.distributed.pipelining brings torch._dynamo (about 1.3 CPU-seconds): importing hpdsl.torch leaves it out."""
    run = _child("import json, sys\nimport hpdsl.torch.train, hpdsl.torch.explain, hpdsl.torch.build\n"
                 "before = sorted(sys.modules)\nimport hpdsl.torch.pipeline_stage\n"
                 "print('MODULES ' + json.dumps([before, sorted(sys.modules)]))")
    assert run.returncode == 0, run.stderr
    before, after = json.loads(run.stdout[run.stdout.rfind("MODULES ") + len("MODULES "):])
    assert not [name for name in before if name.startswith(("torch.distributed.pipelining", "torch._dynamo"))]
    assert "torch.distributed.pipelining" in after

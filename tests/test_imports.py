"""Imports run one way, and the light entry points stay light.

The graph: every module of hpdsl/ parsed with `ast`, its module-level imports
(not those under `if TYPE_CHECKING:` nor inside functions) collapsed to
top-level nodes: `hpdsl.X` for a subpackage or a top-level module. It must have
no cycle. The entry points are run in a child interpreter that reports
`sys.modules`: `import hpdsl.cost` loads neither lark nor torch, and `hpdsl
--help` / `hpdsl compile` load neither numpy nor rich.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Iterator
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


def node(module: str) -> str:
    """Return the top-level node of a module: hpdsl.X."""
    return ".".join(module.split(".")[:2])


def _is_type_checking(test: ast.expr) -> bool:
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def module_level_imports(statements: list[ast.stmt], module: str, package: bool
                         ) -> Iterator[tuple[str, int]]:
    """Yield (imported module or name, line) of the imports run when the module loads."""
    for statement in statements:
        if isinstance(statement, ast.Import):
            yield from ((alias.name, statement.lineno) for alias in statement.names)
        elif isinstance(statement, ast.ImportFrom):
            base = statement.module or ""
            if statement.level:
                parts = module.split(".")[: len(module.split(".")) - statement.level + int(package)]
                base = ".".join([*parts, *([base] if base else [])])
            yield base, statement.lineno
            yield from ((f"{base}.{alias.name}", statement.lineno) for alias in statement.names)
        elif isinstance(statement, ast.If) and not _is_type_checking(statement.test):
            yield from module_level_imports(statement.body + statement.orelse, module, package)
        elif isinstance(statement, ast.If):
            yield from module_level_imports(statement.orelse, module, package)
        elif isinstance(statement, ast.Try):
            blocks = [statement.body, statement.orelse, statement.finalbody,
                      *(handler.body for handler in statement.handlers)]
            for block in blocks:
                yield from module_level_imports(block, module, package)


def known_module(name: str) -> str | None:
    """Return the longest hpdsl module that `name` (a module, or a module's attribute) lies in."""
    while name and name != "hpdsl":
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def import_edges() -> dict[tuple[str, str], list[str]]:
    """Return (node, node) -> the import lines that make that edge, between distinct nodes."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(ROOT).as_posix()
        for name, line in module_level_imports(tree.body, module, path.name == "__init__.py"):
            target = known_module(name) if name.startswith("hpdsl") else None
            if target is None or node(target) == node(module):
                continue
            edges.setdefault((node(module), node(target)), []).append(f"{where}:{line} imports {target}")
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


# --------------------------------------------------------------------------
# The graph's tests
# --------------------------------------------------------------------------


def test_the_graph_sees_the_packages_imports() -> None:
    edges = import_edges()
    assert ("hpdsl.api", "hpdsl.check") in edges
    assert ("hpdsl.check", "hpdsl.ir") in edges
    assert ("hpdsl.ir", "hpdsl.scope") in edges
    # A TYPE_CHECKING import is no edge: hpdsl/__init__.py names hpdsl.api only there.
    assert not any(source == "hpdsl" for source, _ in edges)


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
    assert cycle is None, "hpdsl's subpackages import each other in a cycle:\n" + describe_cycle(cycle, edges)


def test_only_the_torch_backend_imports_torch() -> None:
    importers = sorted(
        module for module, path in MODULES.items()
        if not module.startswith("hpdsl.torch")
        for name, _ in module_level_imports(ast.parse(path.read_text(encoding="utf-8")).body, module,
                                            path.name == "__init__.py")
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

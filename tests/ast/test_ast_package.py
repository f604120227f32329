"""hpdsl/ast/ is one package to its users: every node of its modules is a name of `hpdsl.ast`."""

from __future__ import annotations

import ast as python_ast
import importlib
import inspect
import pkgutil
import typing
from types import ModuleType

import hpdsl.ast
from hpdsl import ast

MODULES = [importlib.import_module(f"hpdsl.ast.{info.name}") for info in pkgutil.iter_modules(hpdsl.ast.__path__)]


def _top_level_names(module: ModuleType) -> list[str]:
    """Return the names a module's own top-level statements bind (classes, functions, aliases)."""
    tree = python_ast.parse(inspect.getsource(module))
    names = []
    for node in tree.body:
        if isinstance(node, (python_ast.ClassDef, python_ast.FunctionDef)):
            names.append(node.name)
        elif isinstance(node, python_ast.Assign):
            names += [target.id for target in node.targets if isinstance(target, python_ast.Name)]
    return names


def test_every_public_name_of_the_modules_is_exported() -> None:
    defined = {name: module for module in MODULES for name in _top_level_names(module) if not name.startswith("_")}
    assert sorted(defined) == sorted(ast.__all__)
    assert len(set(ast.__all__)) == len(ast.__all__)
    for name, module in defined.items():
        assert getattr(ast, name) is getattr(module, name)


def test_every_annotation_resolves_where_its_class_is_defined() -> None:
    # Forward references ("FieldDecl" in ProfileItem, DimExpr in KindDim) cross modules: each
    # module imports at run time what its annotations name.
    classes = [value for value in vars(ast).values() if isinstance(value, type)]
    assert len(classes) > 60
    for cls in classes:
        typing.get_type_hints(cls)

"""The public API says what it takes, returns and raises.

Every public function, method and class defined in a module of
:data:`supergcn.PUBLIC_MODULES` (the modules a user imports; not those it imports from
elsewhere) has a docstring, and the docstring

* names each parameter but ``self`` and ``cls``: an entry of its ``Args:`` section, or
  the name in double backquotes in its prose;
* has a ``Returns:`` section where the code returns a value, and ``Yields:`` where it
  yields one;
* has a ``Raises:`` section naming the :class:`~supergcn.errors.SuperGCNError` or
  ``ValueError`` the function raises in its own body.

A property needs a docstring only. A class's docstring names the arguments of its own
``__init__``; a dataclass's names its fields, but for options declared with their help
(:func:`supergcn.options.option`). A
public function added without such a docstring fails here. Sources are parsed, nothing is
run, so the check takes the time of importing the modules.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import inspect
import re
import textwrap

import supergcn
from supergcn.errors import SuperGCNError

#: Dunder methods held to the rules (the others are Python's protocols).
PUBLIC_DUNDERS = ("__call__",)
#: Exceptions whose ``raise`` in a function's own body needs a ``Raises:`` entry.
DOCUMENTED_RAISES = ("SuperGCNError", "ValueError")

def public_members(module) -> list[tuple[str, object, bool]]:
    """(name, object, whether its first parameter is self or cls) of the module's own
    public functions and classes, and of those classes' public methods and properties
    (cached ones too)."""
    members = []
    for name, value in vars(module).items():
        if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(value):
            members.append((name, value, False))
        elif inspect.isclass(value):
            members.append((name, value, False))
            for attribute, member in vars(value).items():
                if attribute.startswith("_") and attribute not in PUBLIC_DUNDERS:
                    continue
                bound = not isinstance(member, staticmethod)
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if inspect.isfunction(member) or isinstance(member, (property, functools.cached_property)):
                    members.append((f"{name}.{attribute}", member, bound))
    return members


def own_body(function) -> list[ast.AST]:
    """The AST nodes of a function's body, nested functions, lambdas and classes left out."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(function))))
    nodes, todo = [], list(tree.body[0].body)
    while todo:
        node = todo.pop()
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            nodes.append(node)
            todo.extend(ast.iter_child_nodes(node))
    return nodes


def gives_value(node: ast.Return | ast.Yield | ast.YieldFrom) -> bool:
    return node.value is not None and not (isinstance(node.value, ast.Constant) and node.value.value is None)


def section(docstring: str, title: str) -> str:
    """The text of a Google-style section of a (dedented) docstring, '' when absent."""
    found = re.search(rf"^{title}:\n((?:[ \t]+\S.*\n?|[ \t]*\n)+)", docstring, re.M)
    return found.group(1) if found else ""


def names(docstring: str, parameter: str) -> bool:
    """Whether a docstring names a parameter: an entry ``name:``, ``*name:`` or
    ``name (type):`` of a section, or ````name```` in its prose."""
    entry = rf"^[ \t]+\*{{0,2}}{re.escape(parameter)}( \([^)]*\))?:"
    return bool(re.search(entry, docstring, re.M)) or f"``{parameter}``" in docstring


def function_problems(function, bound: bool) -> list[str]:
    docstring = inspect.getdoc(function) or ""
    if not docstring:
        return ["no docstring"]
    parameters = list(inspect.signature(function).parameters)[1 if bound else 0:]
    found = [f"parameter {name!r} not named" for name in parameters if not names(docstring, name)]
    body = own_body(function)
    if any(isinstance(node, ast.Return) and gives_value(node) for node in body) and not section(docstring, "Returns"):
        found.append("returns a value but has no Returns: section")
    if any(isinstance(node, (ast.Yield, ast.YieldFrom)) and gives_value(node) for node in body) \
            and not section(docstring, "Yields"):
        found.append("yields values but has no Yields: section")
    raised = {node.exc.func.id for node in body if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
              and isinstance(node.exc.func, ast.Name)}
    found += [f"raises {name} but no Raises: entry names it" for name in DOCUMENTED_RAISES
              if name in raised and name not in section(docstring, "Raises")]
    return found


def class_problems(cls) -> list[str]:
    docstring = inspect.cleandoc(vars(cls).get("__doc__") or "")
    if not docstring or (dataclasses.is_dataclass(cls) and docstring.startswith(f"{cls.__name__}(")):
        return ["no docstring"]  # a dataclass without one gets its signature
    if dataclasses.is_dataclass(cls):
        return [f"field {field.name!r} not named" for field in dataclasses.fields(cls)
                if not field.metadata.get("option", {}).get("help") and not names(docstring, field.name)]
    init = vars(cls).get("__init__")
    if init is None:
        return []
    return [f"argument {name!r} of __init__ not named" for name in list(inspect.signature(init).parameters)[1:]
            if not names(docstring, name) and not names(inspect.getdoc(init) or "", name)]


def problems(member, bound: bool) -> list[str]:
    if inspect.isclass(member):
        return class_problems(member)
    if isinstance(member, (property, functools.cached_property)):
        return [] if member.__doc__ else ["no docstring"]
    return function_problems(member, bound)


def test_the_public_modules_import():
    assert len(set(supergcn.PUBLIC_MODULES)) == len(supergcn.PUBLIC_MODULES)
    for module in supergcn.PUBLIC_MODULES:
        assert public_members(importlib.import_module(module)), f"{module} has no public function or class"


def test_every_public_function_says_what_it_takes_returns_and_raises():
    gaps = {f"{module}.{name}: {problem}" for module in supergcn.PUBLIC_MODULES
            for name, member, bound in public_members(importlib.import_module(module))
            for problem in problems(member, bound)}
    assert not gaps, f"{len(gaps)} gaps:\n" + "\n".join(sorted(gaps))


# What the check tells apart, on functions of this module.

def _bare(a, b):
    """Add."""
    return a + b


def _prose(a, b):
    """Add ``a`` to ``b`` and return the sum."""
    if a < 0:
        raise SuperGCNError("negative", "give a positive number")
    return a + b


def _complete(a, *rest, scale: int = 1):
    """Add, on an extra line.

    Args:
        a: one.
        *rest: the others.
        scale (int): a factor.

    Returns:
        The sum.

    Raises:
        SuperGCNError: when ``a`` is negative.
    """
    if a < 0:
        raise SuperGCNError("negative", "give a positive number")
    return scale * (a + sum(rest))


def test_the_check_reads_the_sections():
    assert function_problems(_bare, bound=False) == ["parameter 'a' not named", "parameter 'b' not named",
                                                     "returns a value but has no Returns: section"]
    assert function_problems(_prose, bound=False) == ["returns a value but has no Returns: section",
                                                      "raises SuperGCNError but no Raises: entry names it"]
    assert function_problems(_complete, bound=False) == []

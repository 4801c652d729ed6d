"""Which package sources a command runs: its static import closure and a hash of it.

Snakemake reruns a job when its rule's code or parameters change, not when the package
its shell command calls changes. Each rule therefore carries a hash of the package
modules its command can execute, derived from the code itself: starting from the
command's module, every ``import supergcn...`` / ``from supergcn... import ...`` /
relative import found anywhere in a module (lazy imports inside functions included) is
followed, and every package ``__init__.py`` on the way is added (Python runs them). What
is hashed is each module's code, not its text: docstrings, comments and layout can be
edited without rerunning a study's jobs.

Standard library only (``ast``): the Snakefile computes these hashes while it parses.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path

PACKAGE = "supergcn"
PACKAGE_DIR = Path(__file__).resolve().parent
#: The modules that import others by name at run time, and what they load, ``{}`` standing
#: for each sub-package of the package the pattern names and ``*`` for every module of it
#: (the GNN models' cards and layers, the compared methods' cards and runtime modules).
#: ``tests/test_sources.py`` holds every ``importlib.import_module`` of the package to it.
LOADED_BY_NAME = {"supergcn.models": "supergcn.models.{}", "supergcn.models.layers": "supergcn.models.{}.layer",
                  "supergcn.methods": "supergcn.methods.{}", "supergcn.methods.runtime": "supergcn.methods.{}.*"}


def module_file(name: str, package_dir: Path = PACKAGE_DIR) -> Path | None:
    """The source file of the package module ``name`` (dotted), or None if there is none."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    base = package_dir.joinpath(*parts[1:])
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def imported_modules(path: Path, name: str) -> set[str]:
    """Dotted names of the package modules that the module ``name`` at ``path`` imports."""
    stat = path.stat()
    return set(_imported_modules(str(path), name, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=None)
def _imported_modules(path: str, name: str, mtime_ns: int, size: int) -> frozenset[str]:
    # Keyed by modification time and size as well, so an edited file is parsed again.
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(Path(path).read_text(), filename=path)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module
            found.add(base)
            # ``from package import module`` imports a sub-module; ``from module import name`` does not.
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return frozenset(module for module in found if module.split(".")[0] == PACKAGE)


def loaded_by_name(name: str, package_dir: Path = PACKAGE_DIR) -> set[str]:
    """The modules ``name`` imports by name at run time (:data:`LOADED_BY_NAME`)."""
    pattern = LOADED_BY_NAME.get(name)
    if pattern is None:
        return set()
    homes = package_dir.joinpath(*pattern.split(".{}")[0].split(".")[1:])
    rooms = [path.parent for path in homes.glob("*/__init__.py")]
    if pattern.endswith(".*"):
        return {pattern[:-2].format(room.name) + ("" if module.stem == "__init__" else f".{module.stem}")
                for room in rooms for module in room.glob("*.py")}
    return {pattern.format(room.name) for room in rooms}


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts) + 1)]


def import_closure(*entry_points: str, package_dir: Path = PACKAGE_DIR) -> dict[str, Path]:
    """Every package module the ``entry_points`` (dotted module names) may execute, with its file."""
    closure: dict[str, Path] = {}
    pending = [parent for entry in entry_points for parent in _with_parents(entry)]
    while pending:
        name = pending.pop()
        if name in closure:
            continue
        path = module_file(name, package_dir)
        if path is None:
            continue  # a name imported from a module, not a module
        closure[name] = path
        for imported in imported_modules(path, name) | loaded_by_name(name, package_dir):
            pending.extend(parent for parent in _with_parents(imported) if parent not in closure)
    return closure


def code_of(path: Path) -> bytes:
    """What a module runs: its syntax tree without docstrings (``ast.dump``: no comments,
    no layout either), so that editing documentation reruns no job."""
    stat = path.stat()
    return _code_of(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=None)
def _code_of(path: str, mtime_ns: int, size: int) -> bytes:
    tree = ast.parse(Path(path).read_text(), filename=path)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree).encode()


@functools.cache
def source_hash(*entry_points: str, package_dir: Path = PACKAGE_DIR) -> str:
    """A hash of the modules in the import closure of ``entry_points``: their names and
    their code (:func:`code_of`)."""
    digest = hashlib.blake2b(digest_size=8)
    for name, path in sorted(import_closure(*entry_points, package_dir=package_dir).items()):
        digest.update(name.encode())
        digest.update(code_of(path))
    return digest.hexdigest()


def command_hash(command: str, package_dir: Path = PACKAGE_DIR) -> str:
    """The source hash of one ``supergcn`` sub-command run as ``python -m supergcn.cli``:
    ``command`` is its module in :mod:`supergcn.cli` (``train``, ``bench_comm``, ...)."""
    if module_file(f"{PACKAGE}.cli.{command}", package_dir) is None:
        raise ValueError(f"supergcn has no command module supergcn/cli/{command}.py")
    return source_hash(f"{PACKAGE}.cli.__main__", f"{PACKAGE}.cli.{command}", package_dir=package_dir)

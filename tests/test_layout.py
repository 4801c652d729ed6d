"""The package's layout: modules that import each other without cycles (function-level
imports included: one that dodges a cycle at import time still ties the two modules
together), rooms a reader can hold in mind, and no pointer a reader cannot follow."""

import ast
import re
import subprocess

import networkx as nx

from supergcn import sources

from conftest import LONGEST_FILES, REPO

#: The most lines of code (docstrings, comments and blank lines left out) of a module and of a
#: function of the package; and the most lines of a module's file, everything counted.
MAX_MODULE_LINES, MAX_FUNCTION_LINES, MAX_FILE_LINES = 450, 80, 450
#: The package's layers, lowest first (docs/development.md, "Layout", names them): each
#: sub-package or top-level module imports only those below it.
LAYERS = ("errors", "progress", "naming", "options", "sources", "kernels", "data", "partition", "plan", "distributed",
          "models", "methods", "variants", "train", "report", "bench", "perf", "cluster", "testing", "workflow_config",
          "cli")


def import_graph() -> nx.DiGraph:
    """Module -> the package modules it imports (:func:`supergcn.sources.imported_modules`,
    the parser of the rerun hashes), a module's own packages left out."""
    paths = {".".join((sources.PACKAGE, *path.relative_to(sources.PACKAGE_DIR).with_suffix("").parts))
             .removesuffix(".__init__"): path for path in sources.PACKAGE_DIR.rglob("*.py")}
    graph = nx.DiGraph()
    for name, path in paths.items():
        graph.add_node(name)
        for imported in sources.imported_modules(path, name) & set(paths):
            if imported != name and not name.startswith(imported + "."):
                graph.add_edge(name, imported)
    return graph


def test_no_import_cycles():
    cycles = [sorted(component) for component in nx.strongly_connected_components(import_graph())
              if len(component) > 1]
    assert not cycles, f"modules that import each other: {cycles}"


def package_graph() -> nx.DiGraph:
    """Sub-package (or top-level module) -> those it imports from: the module graph's edges
    between ``supergcn.X`` and ``supergcn.Y`` for X != Y."""
    modules, graph = import_graph(), nx.DiGraph()
    graph.add_nodes_from(module.split(".")[1] for module in modules if module != "supergcn")
    for module, imported in modules.edges:
        source, target = module.split(".")[1], imported.split(".")[1]
        if source != target:
            graph.add_edge(source, target)
    return graph


def test_no_package_import_cycles():
    """Counted as ``python -m pytest tests/test_layout.py -k package``: sub-packages that
    import each other, directly or round a longer cycle (module by module, imports inside
    functions included)."""
    cycles = [sorted(c) for c in nx.strongly_connected_components(package_graph()) if len(c) > 1]
    assert not cycles, f"sub-packages that import each other: {cycles}"


def test_packages_import_only_the_layers_below_them():
    graph = package_graph()
    assert set(graph) == set(LAYERS), "a sub-package is missing from LAYERS, or LAYERS names one that is gone"
    upward = sorted(f"{a} -> {b}" for a, b in graph.edges if LAYERS.index(b) > LAYERS.index(a))
    assert upward == [], f"imports from a lower layer up to a higher one: {upward}"


def test_the_development_page_names_the_layers():
    page = (REPO / "docs" / "development.md").read_text()
    (listed,) = re.findall(r"^Layers, lowest first: (.+)\.$", page, re.M)
    assert tuple(re.findall(r"`(\w+)`", listed)) == LAYERS


def test_the_graph_sees_imports_inside_functions():
    # supergcn.cli.train imports the trainer only when it runs
    assert import_graph().has_edge("supergcn.cli.train", "supergcn.train.trainer")


def code_lines(tree: ast.AST, text: str) -> set[int]:
    """The line numbers of ``text`` that hold code: not blank, not a comment, not a
    docstring (what the rerun hash counts, :func:`supergcn.sources.code_of`)."""
    lines = {number for number, line in enumerate(text.splitlines(), 1)
             if line.strip() and not line.strip().startswith("#")}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                lines -= set(range(first.lineno, first.end_lineno + 1))
    return lines


def test_modules_and_functions_stay_small():
    """Counted in lines of code (documentation does not make a module too long), and a
    module's file in all its lines (what a reader scrolls through)."""
    too_long = []
    for path in sources.PACKAGE_DIR.rglob("*.py"):
        text = path.read_text()
        tree = ast.parse(text)
        code = code_lines(tree, text)
        if len(code) > MAX_MODULE_LINES:
            too_long.append(f"{path.name}: {len(code)} lines of code")
        if len(text.splitlines()) > MAX_FILE_LINES:
            too_long.append(f"{path.name}: {len(text.splitlines())} lines")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = len(code & set(range(node.lineno, node.end_lineno + 1)))
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.name}:{node.name}: {length} lines of code")
    assert not too_long, too_long


def test_code_lines_leave_out_docstrings_and_comments():
    text = 'def f():\n    """Doc\n    string."""\n    # a comment\n\n    return 1\n'
    assert code_lines(ast.parse(text), text) == {1, 6}


def test_no_file_points_to_an_issue_number():
    """Issue numbers of this project's tracker mean nothing to a reader of the code; a
    reference to another project's issue names the project (``snap-stanford/ogb issue 127``)."""
    tracked = subprocess.run(["git", "ls-files", "supergcn", "tests", "benchmarks", "workflow", "config", "docs",
                              "Snakefile", "README.md"], cwd=REPO, capture_output=True, text=True, check=True)
    pointing = []
    for name in tracked.stdout.split():
        if name.endswith((".py", ".smk", ".md", ".yaml", ".rst")) or name == "Snakefile":
            for number, line in enumerate((REPO / name).read_text().splitlines(), 1):
                mentions = re.findall(r"(\S*\s)?\bissues?[ -]\d+", line, re.I)
                if any("/" not in before for before in mentions):
                    pointing.append(f"{name}:{number}")
    assert not pointing, pointing


def test_every_method_room_is_listed_in_the_methods_docstring():
    """supergcn/methods/ holds one room (a sub-package) per compared method; its docstring
    names each one."""
    import supergcn.methods

    rooms = {path.parent.name for path in (sources.PACKAGE_DIR / "methods").glob("*/__init__.py")}
    listed = set(re.findall(r"^\* :mod:`supergcn\.methods\.(\w+)`", supergcn.methods.__doc__, re.M))
    assert rooms == listed


def test_test_files_have_distinct_names():
    """pytest imports test files by their base name (the test folders are no packages): two
    of one name in different folders make the second fail to import."""
    names = [path.name for path in (REPO / "tests").rglob("test_*.py")]
    assert sorted({name for name in names if names.count(name) > 1}) == []


def test_the_longest_test_files_named_first_exist():
    """conftest.LONGEST_FILES orders the suite's files: one renamed or gone would be
    ordered no longer, silently."""
    assert [name for name in LONGEST_FILES if not (REPO / "tests" / name).is_file()] == []


def test_pointers_to_a_section_name_one_that_exists():
    """A pointer written as text, ``(docs/methods.md, "The models")``, or the same to the
    README, names a heading of that page (or the start of one): a section that moved to
    another page, or never existed, fails here."""
    tracked = subprocess.run(["git", "ls-files", "supergcn", "tests", "benchmarks", "workflow", "config", "docs",
                              "Snakefile", "README.md"], cwd=REPO, capture_output=True, text=True, check=True)
    pointer = re.compile(r"`?\b(README|docs/[\w/-]+\.md)`?(?:\.md)?,?\s+\"([^\"]+)\"")
    dangling = []
    for name in tracked.stdout.split():
        if name.endswith((".py", ".smk", ".md", ".yaml", ".sbatch")) or name == "Snakefile":
            for match in pointer.finditer((REPO / name).read_text()):
                page = REPO / (match.group(1) + (".md" if match.group(1) == "README" else ""))
                headings = re.findall(r"^#+\s+(.+?)\s*$", page.read_text(), re.M) if page.is_file() else []
                section = " ".join(match.group(2).split())
                if not any(heading.startswith(section) for heading in headings):
                    dangling.append(f"{name}: {match.group(0)}")
    assert not dangling, dangling

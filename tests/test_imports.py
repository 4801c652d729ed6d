"""The package's modules import each other without cycles (function-level imports
included: one that dodges a cycle at import time still ties the two modules together)."""

import networkx as nx

from supergcn import sources


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


def test_the_graph_sees_imports_inside_functions():
    # supergcn.cli.train imports the trainer only when it runs
    assert import_graph().has_edge("supergcn.cli.train", "supergcn.train.trainer")

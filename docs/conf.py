"""Sphinx configuration: narrative pages in Markdown (MyST), the API from the docstrings.

Build with ``make docs`` (HTML in ``docs/_build/html``); ``tests/test_docs.py`` builds it
with warnings as errors, so a dead cross-reference, a page link that points nowhere or a
docstring autodoc cannot render fails the suite.
"""

import importlib
import shutil
import sys
import types
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.ext import napoleon
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path.insert(0, str(REPO))

import supergcn  # noqa: E402

logger = logging.getLogger(__name__)

# The recursive autosummary imports every submodule to list it, and importing
# supergcn.cli.__main__ runs the command line (with Sphinx's arguments): an empty module
# stands in for it. It is private, so it has no page either way.
sys.modules.setdefault("supergcn.cli.__main__", types.ModuleType("supergcn.cli.__main__"))

project = "supergcn"
author = "the supergcn authors"
release = version = supergcn.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    # docs/cli.md: every command's options, from the parsers the commands build.
    "sphinxarg.ext",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
templates_path = ["_templates"]

# Markdown: headings get anchors so pages can link to each other's sections
# ([text](methods.md#quantized-exchange)); MyST checks every such link at build time.
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3
# Where a Markdown link looks for its target: sections and pages (std) and the API (py).
# Left open, it asks every domain, and sphinx-argparse's (docs/cli.md) answers with a
# warning that it cannot.
myst_ref_domains = ["std", "py"]

# The API reference walks the whole package (api.rst: a recursive autosummary of
# supergcn), so a module moved, added or removed needs no edit here. The pages it
# generates are rewritten on every build: a stub left from a module that has since moved
# would otherwise fail its import.
AUTOSUMMARY_OUT = DOCS / "_autosummary"
shutil.rmtree(AUTOSUMMARY_OUT, ignore_errors=True)
autosummary_generate = True
autosummary_imported_members = False
# Every public member, documented or not yet: the reference is complete, and a
# cross-reference to a function without a docstring still resolves.
autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
# A method without a docstring of its own (forward of a torch.autograd.Function) would
# otherwise show its base class's, written for torch's documentation.
autodoc_inherit_docstrings = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# References the docstrings make to names outside the package (numpy, torch, ...) are
# left as plain text rather than reported.
nitpicky = False

html_theme = "alabaster"
html_sidebars = {"**": ["about.html", "navigation.html", "localtoc.html", "relations.html", "searchbox.html"]}
html_title = f"supergcn {release}"
html_static_path = []


def _google_sections_of_code(app, what, name, obj, options, lines):
    """Napoleon for functions, classes and modules only: it would read the first line of a
    data comment (``#: A DistGNN schedule (...): ...``) as ``type: description``, and the
    package's data comments are prose."""
    if what not in ("data", "attribute", "property"):
        napoleon._process_docstring(app, what, name, obj, options, lines)


def _defined(dotted):
    """Whether ``supergcn.a.b.c`` names a module, or an attribute of one, that exists
    (documented or not: a numba intrinsic has no page but is no dead reference)."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for name in parts[split:]:
            obj = getattr(obj, name, _MISSING)
        return obj is not _MISSING
    return False


_MISSING = object()


def _dead_package_reference(app, env, node, contnode):
    """A cross-reference to ``supergcn.<anything>`` that resolves to nothing is a warning,
    hence an error under ``-W``: the function or module it names was renamed, moved or
    removed. An object that exists but has no page of its own (a numba intrinsic) is not
    reported. References to other libraries (numpy, torch, ...) stay plain text, as
    ``nitpicky = False`` leaves them."""
    target = node.get("reftarget", "")
    if node.get("refdomain") == "py" and target.startswith("supergcn.") and not _defined(target):
        logger.warning("cross-reference to %s, which the package does not define (renamed or removed?)",
                       target, location=node, type="supergcn", subtype="dead_reference")


class ColumnGlossary(SphinxDirective):
    """``{column-glossary} TABLE``: the columns of a result table, their units and meanings,
    as :mod:`supergcn.report.columns` declares them beside the code that writes the tables."""

    required_arguments = 1

    def run(self):
        from supergcn.report.columns import COLUMNS, glossary_markdown

        table = self.arguments[0]
        if table not in COLUMNS:
            raise self.error(f"no table {table!r} in supergcn.report.columns: one of {', '.join(COLUMNS)}")
        container = nodes.container()
        self.state.nested_parse(StringList(glossary_markdown(table).splitlines()), self.content_offset, container)
        return container.children


def setup(app):
    for listener in list(app.events.listeners["autodoc-process-docstring"]):
        if listener.handler is napoleon._process_docstring:
            app.disconnect(listener.id)
    app.connect("autodoc-process-docstring", _google_sections_of_code)
    app.connect("missing-reference", _dead_package_reference)
    app.add_directive("column-glossary", ColumnGlossary)

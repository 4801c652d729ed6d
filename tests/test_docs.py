"""The documentation builds with warnings as errors.

``docs/`` is a Sphinx site: Markdown pages (MyST) and an API reference generated from the
docstrings of the whole package. Building it here means a docstring autodoc cannot render,
a cross-reference to a ``supergcn`` function that was renamed or removed, and a link to a
page or section that does not exist all fail the suite. External addresses are not fetched.
"""

import subprocess
import sys

import pytest

from conftest import REPO


def test_the_documentation_builds_without_a_warning(tmp_path):
    for module in ("sphinx", "myst_parser", "sphinxarg"):
        try:
            __import__(module)
        except ImportError:
            pytest.fail(f"{module} is missing: install the docs extra (pip install -e '.[docs]'; make venv does)")
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "-d", str(tmp_path / "doctrees"),
         str(REPO / "docs"), str(tmp_path / "html")],
        capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, f"sphinx-build failed:\n{result.stderr[-20000:]}"
    assert (tmp_path / "html" / "index.html").is_file()
    assert (tmp_path / "html" / "_autosummary" / "supergcn.errors.html").is_file()

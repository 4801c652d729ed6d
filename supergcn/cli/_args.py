"""Argument types and helpers shared by the command modules."""

from __future__ import annotations

import argparse
from pathlib import Path

from supergcn.options import Range

positive_int = Range(int, 1)
#: A share in [0, 1) (a dropout probability, a label rate).
fraction = Range(float, 0, 1, high_open=True)
#: A share in (0, 1] (a relative accuracy target).
share = Range(float, 0, 1, low_open=True)
#: A percentage in (0, 100] (an accuracy target).
percentage = Range(float, 0, 100, low_open=True, what="a percentage")


def output_file(text: str) -> Path:
    """A file to write: checked before any work (:func:`supergcn.data.storage.check_output_path`)."""
    return _output(text, directory=False)


def output_dir(text: str) -> Path:
    """A directory to write (replaced as a whole): checked before any work."""
    return _output(text, directory=True)


def _output(text: str, directory: bool) -> Path:
    from supergcn.data.storage import check_output_path
    from supergcn.errors import SuperGCNError

    try:
        return check_output_path(Path(text), directory)
    except SuperGCNError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def print_json(result: dict, path: Path | None) -> None:
    """Print ``result`` as indented JSON, and also write it to ``path`` when given."""
    import json

    from supergcn.data.storage import write_json

    print(json.dumps(result, indent=2))
    if path is not None:
        write_json(path, result)

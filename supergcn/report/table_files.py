"""A table's files: CSV for scripts, Markdown and LaTeX (with its caption) for the paper,
each cell shown to the digits its spread allows (:func:`supergcn.report.spread.shown`)."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from supergcn.data.storage import write_text
from supergcn.report.spread import shown


def write_table(table: pd.DataFrame, stem: str | Path, caption: str) -> None:
    """``stem``.csv, .md and .tex; a missing value (a target no run reaches, a ratio with a
    zero denominator) is an empty CSV field and a dash in Markdown and LaTeX, not "nan".

    Args:
        table: the table.
        stem: the files' path without suffix.
        caption: the Markdown and LaTeX caption.

    Raises:
        SuperGCNError: a file cannot be written, or the disk filled.
    """
    stem = Path(stem)
    write_text(stem.with_suffix(".csv"), table.to_csv(index=False))
    # tabulate formats NaN as "nan" and takes only None as missing.
    # Every cell as text, to the digits its spread allows (supergcn.report.spread); tabulate
    # must not parse it back into numbers, which drops a figure's last zero.
    text = shown(table)
    align = ["right" if pd.api.types.is_numeric_dtype(table[column]) else "left" for column in table.columns]
    markdown = text.to_markdown(index=False, disable_numparse=True, colalign=align, missingval="—")
    write_text(stem.with_suffix(".md"), f"{caption}\n\n{markdown}\n")
    write_text(stem.with_suffix(".tex"), text.fillna("---").to_latex(
        index=False, caption=caption, label=f"tab:{stem.name}", escape=True,
        column_format="".join(side[0] for side in align)))


def write_named_tables(written: Mapping[str, tuple[pd.DataFrame, str]], declared: Sequence[str], out_dir: Path) -> None:
    """Each table of ``written`` as ``out_dir/<name>`` (:func:`write_table`), in the order of
    ``declared``: the names the workflow's rules expect (:data:`supergcn.naming.TABLES`,
    :data:`supergcn.naming.PERF_TABLES`).

    Args:
        written: table name -> (table, caption).
        declared: every name a table may have, in the order to write them.
        out_dir: the tables' directory.

    Raises:
        ValueError: a table's name is not declared (declare it in :mod:`supergcn.naming`).
        SuperGCNError: a file cannot be written, or the disk filled.
    """
    undeclared = sorted(set(written) - set(declared))
    if undeclared:
        raise ValueError(f"tables {', '.join(undeclared)} are not declared: add them to supergcn.naming")
    for name in declared:
        if name in written:
            table, caption = written[name]
            write_table(table, Path(out_dir) / name, caption)

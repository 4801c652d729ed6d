"""``supergcn perf figures``: the plan-only study's figures, from its tables."""

from __future__ import annotations

from pathlib import Path

from supergcn.cli._args import output_dir

HELP = "the study's figures from its tables"


def configure(parser) -> None:
    parser.add_argument("--tables-dir", required=True, type=Path)
    parser.add_argument("--out-dir", required=True, type=output_dir)


def run(args) -> None:
    """Draw :func:`supergcn.report.perf_figures.plot_perf_study` into ``args.out_dir``."""
    from supergcn.data.storage import files_written_together
    from supergcn.report.perf_figures import plot_perf_study

    with files_written_together(args.out_dir):
        plot_perf_study(args.tables_dir, args.out_dir)

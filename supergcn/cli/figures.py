"""``supergcn figures``: the figures of a study, from the tables of ``supergcn tables`` and
the metrics files of the runs (the files the workflow's ``figures`` rule declares)."""

from __future__ import annotations

from pathlib import Path

from supergcn.cli._args import output_dir
from supergcn.naming import FIGURES

HELP = "figures (PNG, PDF) from `supergcn tables` output"


def configure(parser) -> None:
    tables = ", ".join(f"{name}.csv" for name in dict.fromkeys(figure.table for figure in FIGURES.values()))
    parser.add_argument("--tables", nargs="+", type=Path, required=True, metavar="TABLE.csv",
                        help=f"the tables of `supergcn tables` the figures are drawn from: {tables}")
    parser.add_argument("--runs", nargs="+", type=Path, required=True,
                        help="the metrics files the runs table names (the accuracy curves read them)")
    parser.add_argument("--out-dir", type=output_dir, required=True)


def run(args) -> None:
    """Draw the figures of :data:`supergcn.naming.FIGURES` into ``args.out_dir``, every input
    checked before any figure is drawn."""
    from supergcn.data.storage import files_written_together
    from supergcn.report import figures

    read = figures.read_tables(args.tables)
    read["runs"] = figures.runs_with_metrics(read["runs"], args.runs)
    with files_written_together(args.out_dir):
        figures.plot_study(read, args.out_dir)
    drawn = [name for name, figure in FIGURES.items() if figure.table in read]
    print(f"drew the figures {', '.join(drawn)} (PNG, PDF) -> {args.out_dir}")

"""``supergcn volume``: tabulate the rows of features plans send."""

from __future__ import annotations

from pathlib import Path

from supergcn.cli._args import output_file

HELP = "tabulate the communication volume of plans"


def configure(parser) -> None:
    parser.add_argument("plans", nargs="+", type=Path, help="plan directories")
    parser.add_argument("--csv", type=output_file, help="also write the table as CSV")


def run(args) -> None:
    """Print :func:`supergcn.perf.volume.rows_table` of ``args.plans`` (and write it as CSV)."""
    from supergcn.data.storage import write_text
    from supergcn.perf.volume import rows_table

    table = rows_table(args.plans)
    print(table.to_string(index=False))
    if args.csv:
        write_text(args.csv, table.to_csv(index=False))

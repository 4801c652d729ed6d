"""``supergcn figures``: the figures of a study, from the output of ``supergcn tables``."""

from __future__ import annotations

from pathlib import Path

from supergcn.cli._args import output_dir

HELP = "figures (PNG, PDF) from `supergcn tables` output"


def configure(parser) -> None:
    parser.add_argument("--tables-dir", type=Path, required=True, help="output directory of `supergcn tables`")
    parser.add_argument("--out-dir", type=output_dir, required=True)


def run(args) -> None:
    """Draw the scaling, breakdown, accuracy-curve (and volume) figures into ``args.out_dir``."""
    from supergcn.data.storage import files_written_together
    from supergcn.report import figures

    read = figures.read_tables(args.tables_dir)  # all of them before drawing any
    out = args.out_dir
    with files_written_together(out):
        figures.plot_scaling(read["scaling"], out / "scaling")
        figures.plot_breakdown(read["breakdown"], out / "breakdown")
        figures.plot_accuracy_curves(read["runs"], out / "accuracy_curves")
        if "volume" in read:
            figures.plot_volume(read["volume"], out / "volume")

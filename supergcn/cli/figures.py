"""``supergcn figures``: the figures of a study, from the output of ``supergcn tables``."""

from __future__ import annotations

from pathlib import Path

HELP = "figures (PNG, PDF) from `supergcn tables` output"


def configure(parser) -> None:
    parser.add_argument("--tables-dir", type=Path, required=True)
    parser.add_argument("--out-dir", type=Path, required=True)


def run(args) -> None:
    """Draw the scaling, breakdown, accuracy-curve (and volume) figures into ``args.out_dir``."""
    import pandas as pd

    from supergcn.report import figures

    tables, out = args.tables_dir, args.out_dir
    runs = pd.read_csv(tables / "runs.csv")
    figures.plot_scaling(pd.read_csv(tables / "scaling.csv"), out / "scaling")
    figures.plot_breakdown(pd.read_csv(tables / "breakdown.csv"), out / "breakdown")
    figures.plot_accuracy_curves(runs, out / "accuracy_curves")
    if (tables / "volume.csv").exists():
        figures.plot_volume(pd.read_csv(tables / "volume.csv"), out / "volume")

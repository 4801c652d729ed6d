"""``supergcn tables``: the result tables of a study (CSV, Markdown, LaTeX)."""

from __future__ import annotations

from pathlib import Path

from supergcn.cli._args import positive_int
from supergcn.errors import SuperGCNError

HELP = "result tables (CSV, Markdown, LaTeX) of a study"


def configure(parser) -> None:
    parser.add_argument("--runs", nargs="+", type=Path, required=True, help="metrics files of training runs")
    parser.add_argument("--plans", nargs="*", default=[], help="DATASET=PLAN_DIR for the volume table")
    parser.add_argument("--hidden", type=positive_int, default=256, help="feature width of the volume table")
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--baseline", help="variant to show every variant's speed-up over (e.g. post-fp32-nolp)")


def run(args) -> None:
    """Write runs, scaling, breakdown, accuracy (and volume, with ``--plans``) tables to ``args.out_dir``."""
    from supergcn.report import tables

    plans = []
    for item in args.plans:
        dataset, sep, directory = item.partition("=")
        if not sep:
            raise SuperGCNError(f"--plans takes DATASET=PLAN_DIR, got {item!r}")
        plans.append((dataset, directory))
    runs = tables.runs_table(args.runs)
    out = args.out_dir
    tables.write_table(runs, out / "runs", "All training runs.")
    baseline = "" if args.baseline is None else f", and speed-up over {args.baseline} at the same P"
    tables.write_table(tables.scaling_table(runs, args.baseline), out / "scaling",
                       "Epoch time (s, max over ranks, mean over epochs after the first and over seeds), speed-up "
                       f"and parallel efficiency relative to the smallest P{baseline}.")
    tables.write_table(tables.breakdown_table(runs), out / "breakdown",
                       "Seconds per epoch by phase, of the slowest rank (mean over epochs after the first).")
    tables.write_table(tables.accuracy_table(runs), out / "accuracy",
                       "Test accuracy (%) at the best-validation-accuracy epoch (OGB protocol) and at the "
                       "lowest-validation-loss epoch (upstream SuperGCN's model selection), mean ± std over seeds.")
    if plans:
        tables.write_table(tables.volume_table(plans, args.hidden), out / "volume",
                           f"Bytes exchanged by one layer at width {args.hidden}: pre / post / hybrid (FP32) and "
                           "hybrid with Int2 data plus bfloat16 parameters.")

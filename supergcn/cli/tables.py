"""``supergcn tables``: the result tables of a study (CSV, Markdown, LaTeX)."""

from __future__ import annotations

from pathlib import Path

from supergcn.cli._args import output_dir, percentage, positive_int, share
from supergcn.errors import SuperGCNError

HELP = "result tables (CSV, Markdown, LaTeX) of a study"


def configure(parser) -> None:
    parser.add_argument("--runs", nargs="+", type=Path, required=True, help="metrics files of training runs")
    parser.add_argument("--plans", nargs="*", default=[], help="DATASET=PLAN_DIR for the volume table")
    parser.add_argument("--graphs", nargs="*", type=Path, default=[],
                        help="prepared graph directories, for the preprocessing table")
    parser.add_argument("--partitions", nargs="*", type=Path, default=[],
                        help="partition directories, for the preprocessing table")
    parser.add_argument("--plan-dirs", nargs="*", type=Path, default=[],
                        help="plan directories of any strategy, for the preprocessing table")
    parser.add_argument("--hidden", type=positive_int, default=256, help="feature width of the volume table")
    parser.add_argument("--hidden-by-dataset", nargs="*", default=[], metavar="DATASET=WIDTH",
                        help="a dataset's own width in the volume table, where it is not --hidden")
    parser.add_argument("--out-dir", type=output_dir, required=True)
    parser.add_argument("--baseline", help="variant to show every variant's speed-up over (e.g. post-fp32-nolp)")
    parser.add_argument("--absolute-targets", nargs="*", type=percentage, default=[], metavar="PERCENT",
                        help="accuracies (%%) whose time to reach the time_to_accuracy table gives")
    parser.add_argument("--relative-targets", nargs="*", type=share, default=[0.95, 0.99], metavar="SHARE",
                        help="accuracy targets as shares of the dataset's best accuracy in the study (default: "
                             "0.95 0.99)")


def run(args) -> None:
    """Write the tables of :data:`supergcn.naming.TABLES` to ``args.out_dir`` (volume only with
    ``--plans``, preprocessing only with ``--graphs``)."""
    from supergcn.data.storage import files_written_together
    from supergcn.naming import TABLES
    from supergcn.report import step_tables, tables
    from supergcn.report.table_files import write_named_tables

    plans = [_pair(item, "--plans", "PLAN_DIR") for item in args.plans]
    widths = {}
    for item in args.hidden_by_dataset:
        dataset, width = _pair(item, "--hidden-by-dataset", "WIDTH")
        if not width.isdigit() or int(width) < 1:
            raise SuperGCNError(f"--hidden-by-dataset gives {dataset} the width {width!r}",
                                "give a whole number of features, at least 1")
        widths[dataset] = int(width)
    runs = tables.runs_table(args.runs)
    scaling = tables.scaling_table(runs, args.baseline)
    # Every table is built before any is written: a bad input leaves the old tables whole.
    written = {
        "runs": (runs, "All training runs."),
        "scaling": (scaling, tables.scaling_caption(scaling, args.baseline)),
        "breakdown": (tables.breakdown_table(runs),
                      "Seconds per epoch by phase, of the slowest rank (mean over epochs after each process's "
                      "first)."),
        "accuracy": (tables.accuracy_table(runs),
                     "Test accuracy (%) at the best-validation-accuracy epoch (OGB protocol) and at the "
                     "lowest-validation-loss epoch (upstream SuperGCN's model selection), mean ± std over seeds; "
                     "n/a where the runs had no validation nodes."),
        "time_to_accuracy": (tables.time_to_accuracy_table(runs, args.absolute_targets, args.relative_targets),
                             "First epoch and training seconds (epoch times summed, first epoch included, "
                             "evaluation excluded) at which validation / test accuracy reaches each target (% or "
                             "a share of the dataset's best accuracy in the study), mean over the seeds that "
                             "reach it (reached: runs that do / runs)."),
    }
    if plans:
        written["volume"] = (step_tables.volume_table(plans, {dataset: widths.get(dataset, args.hidden)
                                                         for dataset, _ in plans}),
                             "Bytes exchanged by one layer at the dataset's hidden width: pre / post / hybrid (FP32) "
                             "and hybrid with Int2 data plus bfloat16 parameters (one zero point and scale a row); "
                             "hybrid_reduction = min(pre, post) / hybrid, int2_reduction = hybrid / (Int2 data + "
                             "parameters).")
    if args.graphs:
        written["preprocessing"] = (step_tables.preprocessing_table(args.graphs, args.partitions, args.plan_dirs),
                                    "Preprocessing steps per dataset and P: seconds of the step's own work and "
                                    "peak resident memory of its process (GiB, and bytes per directed adjacency "
                                    "entry of the graph from 50 M entries on; empty below, where the interpreter's "
                                    "own memory is most of the peak), from the manifests the steps write; "
                                    "partitions add the edge cut and the max/mean imbalance of nodes, edges and "
                                    "training nodes.")
    with files_written_together(args.out_dir):
        write_named_tables(written, TABLES, args.out_dir)
    print(f"wrote the tables {', '.join(name for name in TABLES if name in written)} (CSV, Markdown, LaTeX) "
          f"-> {args.out_dir}")


def _pair(item: str, option: str, value: str) -> tuple[str, str]:
    """``DATASET=VALUE`` split, or the error naming ``option``'s form."""
    dataset, sep, rest = item.partition("=")
    if not sep or not dataset or not rest:
        raise SuperGCNError(f"{option} takes DATASET={value}, got {item!r}", f"write it as DATASET={value}")
    return dataset, rest

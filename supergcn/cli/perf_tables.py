"""``supergcn perf tables``: the plan-only study's tables, from predictions and measurements."""

from __future__ import annotations

from pathlib import Path

from supergcn.cli._args import output_dir
from supergcn.errors import SuperGCNError

HELP = "the study's tables from predictions and measurements"


def configure(parser) -> None:
    parser.add_argument("--predictions", nargs="+", required=True, type=Path)
    parser.add_argument("--validation", nargs="*", default=[], type=Path,
                        help="`supergcn bench comm --exchange ...` results: the exchanges the model is checked against")
    parser.add_argument("--profile", type=Path, help="this machine's measured profile (for --validation)")
    parser.add_argument("--out-dir", required=True, type=output_dir)


def run(args) -> None:
    """Write :func:`supergcn.perf.study.write_tables` to ``args.out_dir``."""
    from supergcn.data.storage import files_written_together
    from supergcn.perf import study

    if args.validation and args.profile is None:
        raise SuperGCNError("--validation needs --profile", "pass the measured profile of this machine")
    with files_written_together(args.out_dir):
        study.write_tables(args.predictions, args.validation, args.profile, args.out_dir)

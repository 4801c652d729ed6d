"""``supergcn bench kernels``: our aggregation kernels against PyG, torch and scipy."""

from __future__ import annotations

from pathlib import Path

from supergcn.cli._args import output_file, positive_int, print_json

HELP = "our aggregation kernels vs PyG, torch.sparse.mm, scipy, memcpy"


def configure(parser) -> None:
    parser.description = "Times are medians over --repeats calls after one warm-up call."
    parser.add_argument("--graph", required=True, type=Path, help="prepared graph directory")
    parser.add_argument("--features", type=positive_int, default=256, help="feature width F")
    parser.add_argument("--threads", type=positive_int, default=1, help="threads for every contender")
    parser.add_argument("--repeats", type=positive_int, default=5)
    parser.add_argument("--reorder", choices=("none", "rcm"), default="none",
                        help="renumber nodes first (reverse Cuthill-McKee) to measure locality effects")
    parser.add_argument("--no-pyg", action="store_true", help="skip PyG's scatter path (slow on big graphs)")
    parser.add_argument("--json", type=output_file, help="also write the result here")


def run(args) -> None:
    """Print (and write) :func:`supergcn.perf.kernelbench.bench_kernels`'s result."""
    from supergcn.perf.kernelbench import bench_kernels

    print_json(bench_kernels(args.graph, args.features, args.threads, args.repeats, args.reorder, not args.no_pyg),
               args.json)

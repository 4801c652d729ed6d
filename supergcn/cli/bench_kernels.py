"""``supergcn bench kernels``: our aggregation kernel against its roofline, the authors' kernel and the libraries."""

from __future__ import annotations

from pathlib import Path

from supergcn.cli._args import output_file, positive_int, print_json

HELP = "our aggregation kernel vs its roofline, the authors' kernel, PyG, torch.sparse.mm and scipy"


def configure(parser) -> None:
    from supergcn.bench.kernels import ROW_TYPES, SHAPES

    parser.description = ("Times are medians over --repeats rounds after a warm-up round; the kernels and the "
                          "roofline's passes are timed in turn within each round.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--graph", type=Path, help="prepared graph directory")
    source.add_argument("--shape", choices=tuple(SHAPES),
                        help="a synthetic CSR of that shape: Zipf(2.2) degrees, neighbours uniform at random")
    parser.add_argument("--features", type=positive_int, default=256, help="feature width F")
    parser.add_argument("--rows", choices=ROW_TYPES, default="float32",
                        help="the gathered rows' type (bfloat16: as a --precision bf16 rank holds them, summed in "
                             "float32; the libraries and the authors' kernel, float32 only, are then not timed)")
    parser.add_argument("--threads", type=positive_int, default=1, help="threads for every contender")
    parser.add_argument("--repeats", type=positive_int, default=15)
    parser.add_argument("--reorder", choices=("none", "rcm"), default="none",
                        help="renumber nodes first (reverse Cuthill-McKee) to measure locality effects")
    parser.add_argument("--authors-ops", type=Path,
                        help="folder holding the authors' built supergnn_ops extension, timed beside ours")
    parser.add_argument("--no-pyg", action="store_true", help="skip PyG's scatter path (slow on big graphs)")
    parser.add_argument("--json", type=output_file, help="also write the result here")


def run(args) -> None:
    """Print (and write) :func:`supergcn.bench.kernels.bench_kernels`'s result."""
    from supergcn.bench.kernels import bench_kernels, check_rows

    check_rows(args.rows, args.authors_ops is not None)
    authors = None
    if args.authors_ops is not None:
        from supergcn.bench.authors import load_authors_ops

        authors = load_authors_ops(args.authors_ops)
    print_json(bench_kernels(args.graph, args.features, args.threads, args.repeats, args.reorder, not args.no_pyg,
                             shape=args.shape, authors_ops=authors, rows=args.rows), args.json)

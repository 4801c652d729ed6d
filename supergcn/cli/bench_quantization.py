"""``supergcn bench quantization``: quantize+pack and unpack+dequantize throughput."""

from __future__ import annotations

from supergcn.cli._args import output_file, positive_int, print_json
from supergcn.naming import QUANTIZED_BITS, ROUNDINGS

HELP = "quantize+pack and unpack+dequantize throughput vs memcpy"


def configure(parser) -> None:
    parser.add_argument("--rows", type=positive_int, default=200_000)
    parser.add_argument("--features", type=positive_int, default=256)
    parser.add_argument("--threads", type=positive_int, default=1)
    parser.add_argument("--bits", type=int, choices=QUANTIZED_BITS, default=2)
    parser.add_argument("--rounding", choices=ROUNDINGS, default="nearest")
    parser.add_argument("--repeats", type=positive_int, default=5)
    parser.add_argument("--json", type=output_file, help="also write the result here")


def run(args) -> None:
    """Print (and write) :func:`supergcn.bench.kernels.bench_quantization`'s result."""
    from supergcn.bench.kernels import bench_quantization

    print_json(bench_quantization(args.rows, args.features, args.threads, args.bits, args.rounding, args.repeats),
               args.json)

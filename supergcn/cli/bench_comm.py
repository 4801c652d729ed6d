"""``supergcn bench comm``: the machine's exchange parameters at this P (under mpiexec)."""

from __future__ import annotations

from pathlib import Path

from supergcn.bench.comm import ROUNDS
from supergcn.cli._args import output_file, positive_int, print_json
from supergcn.errors import SuperGCNError
from supergcn.naming import DEFAULT_PARAMETER_DTYPE, PARAMETER_DTYPES, PRECISIONS, QUANTIZED_BITS, STRATEGIES

HELP = "MPI latency, Alltoallv and quantization time vs size (run under mpiexec -n P)"


def configure(parser) -> None:
    parser.description = ("Fits the performance model's per-call cost, latency L and bandwidth BW, and the "
                          "quantization and dequantization costs, at this P, timed as training exchanges rows.")
    parser.add_argument("--features", type=positive_int, default=256, help="row width F of the quantization sweep")
    parser.add_argument("--bits", type=int, choices=QUANTIZED_BITS, default=2, help="quantized width")
    parser.add_argument("--parameter-dtype", choices=tuple(PARAMETER_DTYPES), default=DEFAULT_PARAMETER_DTYPE,
                        help="wire type of the quantization parameters")
    parser.add_argument("--threads", type=positive_int, default=1, help="torch and numba threads per rank")
    parser.add_argument("--exchange", nargs="*", default=[], metavar="STRATEGY=PLAN_DIR",
                        help="also time these plans' exchanges, in turn with the sweeps (the model's check)")
    parser.add_argument("--exchange-bits", nargs="+", type=int, choices=tuple(PRECISIONS), default=[32, 2],
                        help="precisions of the --exchange runs")
    parser.add_argument("--rounds", type=positive_int, default=ROUNDS,
                        help="rounds, each timing every sweep point and exchange once (the median is kept)")
    parser.add_argument("--json", type=output_file, help="also write the result here")


def parse_exchanges(items: list[str], bits: list[int]) -> list[tuple[str, Path, int]]:
    """(strategy, plan dir, bits) of every ``STRATEGY=PLAN_DIR`` at every precision."""
    exchanges = []
    for item in items:
        strategy, separator, plan = item.partition("=")
        if not separator or strategy not in STRATEGIES:
            raise SuperGCNError(f"--exchange takes STRATEGY=PLAN_DIR with STRATEGY one of {', '.join(STRATEGIES)}, "
                                f"got {item!r}", "write it as e.g. hybrid=data/plans/synthetic-small/P2/hybrid")
        exchanges.extend((strategy, Path(plan), width) for width in bits)
    return exchanges


def run(args) -> int:
    """Every rank measures (:func:`supergcn.bench.comm.bench_comm`); rank 0 prints and writes."""
    from supergcn.distributed.comm import configure_mpi

    configure_mpi()  # the MPI settings training runs with
    from mpi4py import MPI

    from supergcn.bench.comm import bench_comm
    from supergcn.cli.bench_exchange import check_plan_size
    from supergcn.distributed.ranks import agree, run_ranked
    from supergcn.distributed.threads import set_threads

    exchanges = parse_exchanges(args.exchange, args.exchange_bits)

    def work(comm):
        set_threads(args.threads)
        agree(comm, lambda: [check_plan_size(plan, comm.Get_size()) for _, plan, _ in exchanges])
        result = bench_comm(comm, args.features, args.bits, args.parameter_dtype, args.threads, exchanges,
                            args.rounds)
        if comm.Get_rank() == 0:
            print_json(result, args.json)

    return run_ranked(work, MPI.COMM_WORLD, "bench comm", args.debug)

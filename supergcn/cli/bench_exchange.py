"""``supergcn bench exchange``: time one layer's boundary exchange of a plan (under mpiexec)."""

from __future__ import annotations

from pathlib import Path

from supergcn.cli._args import check_plan_size, positive_int, print_json
from supergcn.naming import PARAMETER_DTYPES, PRECISIONS

HELP = "time one layer's boundary exchange of a plan (run under mpiexec -n P)"


def configure(parser) -> None:
    parser.add_argument("--plan", required=True, type=Path, help="plan directory")
    parser.add_argument("--features", type=positive_int, default=256, help="feature width F")
    parser.add_argument("--bits", type=int, choices=tuple(PRECISIONS), default=32)
    parser.add_argument("--parameter-dtype", choices=tuple(PARAMETER_DTYPES), default="bfloat16",
                        help="wire type of the quantization parameters")
    parser.add_argument("--threads", type=positive_int, default=1, help="torch and numba threads per rank")
    parser.add_argument("--repeats", type=positive_int, default=20)
    parser.add_argument("--json", type=Path, help="also write the result here")


def run(args) -> int:
    """Every rank measures (:func:`supergcn.perf.exchangebench.bench_exchange`); rank 0 prints and writes."""
    from mpi4py import MPI

    from supergcn.distributed.ranks import agree, run_ranked
    from supergcn.distributed.threads import set_threads
    from supergcn.perf.exchangebench import bench_exchange

    def work(comm):
        set_threads(args.threads)
        agree(comm, lambda: check_plan_size(args.plan, comm.Get_size()))
        result = bench_exchange(comm, args.plan, args.features, args.bits, args.repeats, args.parameter_dtype)
        if comm.Get_rank() == 0:
            print_json(result, args.json)

    return run_ranked(work, MPI.COMM_WORLD, "bench exchange")

"""``supergcn bench exchange``: time one layer's boundary exchange of a plan (under mpiexec)."""

from __future__ import annotations

from pathlib import Path

from supergcn.cli._args import output_file, positive_int, print_json
from supergcn.errors import wrong_world_size
from supergcn.naming import DEFAULT_PARAMETER_DTYPE, PARAMETER_DTYPES, PRECISIONS

HELP = "time one layer's boundary exchange of a plan (run under mpiexec -n P)"


def configure(parser) -> None:
    parser.add_argument("--plan", required=True, type=Path, help="plan directory")
    parser.add_argument("--features", type=positive_int, default=256, help="feature width F")
    parser.add_argument("--bits", type=int, choices=tuple(PRECISIONS), default=32)
    parser.add_argument("--parameter-dtype", choices=tuple(PARAMETER_DTYPES), default=DEFAULT_PARAMETER_DTYPE,
                        help="wire type of the quantization parameters")
    parser.add_argument("--threads", type=positive_int, default=1, help="torch and numba threads per rank")
    parser.add_argument("--repeats", type=positive_int, default=100, help="exchanges timed (the median is kept)")
    parser.add_argument("--json", type=output_file, help="also write the result here")


def check_plan_size(plan_dir: Path, size: int) -> None:
    """Refuse a plan made for another number of ranks than the ``size`` started."""
    from supergcn.plan.store import read_plan_manifest

    ranks = read_plan_manifest(plan_dir)["num_ranks"]
    if ranks != size:
        raise wrong_world_size(f"plan {plan_dir}", ranks, size)


def run(args) -> int:
    """Every rank measures (:func:`supergcn.bench.exchange.bench_exchange`); rank 0 prints and writes."""
    from supergcn.distributed.comm import configure_mpi

    configure_mpi()  # the MPI settings training runs with
    from mpi4py import MPI

    from supergcn.bench.exchange import bench_exchange
    from supergcn.distributed.ranks import agree, run_ranked
    from supergcn.distributed.threads import set_threads

    def work(comm):
        set_threads(args.threads)
        agree(comm, lambda: check_plan_size(args.plan, comm.Get_size()))
        result = bench_exchange(comm, args.plan, args.features, args.bits, args.repeats, args.parameter_dtype,
                                args.threads)
        if comm.Get_rank() == 0:
            print_json(result, args.json)

    return run_ranked(work, MPI.COMM_WORLD, "bench exchange", args.debug)

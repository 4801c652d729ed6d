"""``supergcn bench comm``: the machine's MPI latency and all-to-all bandwidth (under mpiexec)."""

from __future__ import annotations

from supergcn.cli._args import output_file, print_json

HELP = "MPI ping-pong latency and Alltoallv time vs message size (run under mpiexec -n P)"


def configure(parser) -> None:
    parser.description = "Fits the performance model's latency L and bandwidth BW at this P."
    parser.add_argument("--json", type=output_file, help="also write the result here")


def run(args) -> int:
    """Every rank measures (:func:`supergcn.perf.commbench.bench_comm`); rank 0 prints and writes."""
    from supergcn.distributed.comm import configure_mpi

    configure_mpi()  # the MPI settings training runs with
    from mpi4py import MPI

    from supergcn.distributed.ranks import run_ranked
    from supergcn.perf.commbench import bench_comm

    def work(comm):
        result = bench_comm(comm)
        if comm.Get_rank() == 0:
            print_json(result, args.json)

    return run_ranked(work, MPI.COMM_WORLD, "bench comm", args.debug)

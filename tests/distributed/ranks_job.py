"""Run by tests/distributed/test_ranks.py under ``mpiexec -n 2``: each rank prints the MPICH
shared-memory files it maps, inside :func:`run_ranked`; then rank 1 fails (``fail``) or
every rank ends well (``ok``)."""

import sys
from pathlib import Path

from mpi4py import MPI

from supergcn.distributed.comm import MPICH_SEGMENT_PREFIX
from supergcn.distributed.ranks import run_ranked


def work(comm):
    maps = Path("/proc/self/maps").read_text().splitlines()
    for path in sorted({line.split(maxsplit=5)[5] for line in maps if MPICH_SEGMENT_PREFIX in line}):
        print(f"rank {comm.Get_rank()} maps {path.removesuffix(' (deleted)')}", flush=True)
    comm.Barrier()
    if sys.argv[1] == "fail" and comm.Get_rank() == 1:
        raise RuntimeError("this rank fails on purpose")


comm = MPI.COMM_WORLD
if run_ranked(work, comm, "ranks job") == 0:
    print(f"rank {comm.Get_rank()} ok", flush=True)

"""What produced a result: package versions, host, git commit."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path


def package_versions() -> dict[str, str]:
    import mpi4py
    import numba
    import numpy
    import scipy
    import torch
    from mpi4py import MPI

    import supergcn

    return {"supergcn": supergcn.__version__, "python": platform.python_version(), "torch": torch.__version__,
            "numpy": numpy.__version__, "scipy": scipy.__version__, "numba": numba.__version__,
            "mpi4py": mpi4py.__version__, "mpi": MPI.Get_library_version().splitlines()[0].strip()}


def git_commit() -> str | None:
    """HEAD of the checkout holding this package (suffixed ``-dirty`` if modified), or None."""
    source = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=source,
                               capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def host() -> str:
    return platform.node()


def oversubscribed(comm, threads: int) -> dict:
    """Whether the ranks of ``comm`` ask for more cores than they may run on: per host
    (:func:`host`), its ranks x ``threads`` against the CPUs in the union of their affinity
    masks (collective).

    Args:
        comm: the job's MPI communicator.
        threads: threads per rank.

    Returns:
        ``threads_per_rank``, ``cores_by_host`` (host -> CPUs its ranks may run on) and
        ``oversubscribed``.
    """
    hosts: dict[str, list] = {}
    for name, cpus in comm.allgather((host(), sorted(os.sched_getaffinity(0)))):
        hosts.setdefault(name, []).append(cpus)
    cores = {name: len(set().union(*masks)) for name, masks in hosts.items()}
    return {"threads_per_rank": threads, "cores_by_host": cores,
            "oversubscribed": any(len(hosts[name]) * threads > cores[name] for name in hosts)}

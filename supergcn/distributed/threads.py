"""Threads per MPI rank."""

from __future__ import annotations


def set_threads(threads: int) -> None:
    """Pin torch and numba to ``threads`` (mpiexec otherwise leaves torch at one thread)."""
    import torch

    from supergcn.kernels.jit import numba

    torch.set_num_threads(threads)
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))

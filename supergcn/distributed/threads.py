"""Threads per MPI rank, and what must happen before a rank's threads first share work."""

from __future__ import annotations

# The float unary ops whose contiguous float32/float64 kernels ATen hands to oneMKL's vector
# math (VML) in its MKL builds: aten/src/ATen/cpu/vml.h's IMPLEMENT_VML_MKL lines, the union
# over torch's versions (calling one that a version keeps in ATen costs nothing).
MKL_VML_OPS = ("abs", "acos", "asin", "atan", "cos", "erf", "erfc", "erfinv", "exp", "expm1",
               "log", "log10", "log1p", "log2", "sin", "sqrt", "tan", "tanh", "trunc")


def settle_mkl_vml_dispatch() -> None:
    """Call each of torch's MKL VML ops once, on one element, on this thread alone.

    oneMKL 2024.2 (the one torch's wheels ship) picks a VML kernel lazily, on first use. If
    that first use runs on several of torch's threads at once, one thread can run a
    low-accuracy kernel for its whole chunk, despite the high accuracy torch asks for
    (pytorch/pytorch#188792): ``sqrt`` then errs by up to about 3e-4 relative, and one Adam
    step (``exp_avg_sq.sqrt()``) gives half a parameter different bits. Here only a process's
    first VML call raced, whichever op it was; each op is called anyway, as the fix proposed
    to torch does (pytorch/pytorch#188791), in case a build resolves them one by one. One
    element is below torch's grain size, so the call never leaves this thread. Without MKL
    the ops are torch's own, and this costs microseconds.
    """
    import torch

    for dtype in (torch.float32, torch.float64):
        one = torch.full((1,), 0.5, dtype=dtype)
        for name in MKL_VML_OPS:
            getattr(torch, name)(one)


def set_threads(threads: int) -> None:
    """Pin torch and numba to ``threads`` (mpiexec otherwise leaves torch at one thread).

    MKL's vector math is settled first (:func:`settle_mkl_vml_dispatch`), so no op's first
    call can race between the threads.

    Args:
        threads: torch's and numba's threads (numba's capped at its ``NUMBA_NUM_THREADS``).
    """
    import torch

    from supergcn.kernels.jit import numba

    settle_mkl_vml_dispatch()
    torch.set_num_threads(threads)
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))

"""A fixed sparse operator of a rank's aggregation: A x and A^T x on the numba kernels.

The numba kernels (:mod:`supergcn.kernels.gather`, the default) or torch's CSR
``torch.sparse.mm`` (``kernel="torch"``, the reference path); and the mean's row scale,
:func:`inverse_degree`.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
import torch

from supergcn.kernels.bfloat16 import kernel_array
from supergcn.kernels.gather import GatherCsr
from supergcn.naming import KERNELS


class SparseOperator:
    """A fixed 0/1 sparse matrix A applying A x (optionally scaled and accumulated) and A^T x;
    a ``symmetric`` A serves as its own transpose (half the memory)."""

    def __init__(self, matrix: sp.csr_matrix, kernel: str = "numba", symmetric: bool = False) -> None:
        if kernel not in KERNELS:
            raise ValueError(f"unknown kernel {kernel!r}: choose one of {KERNELS}")
        matrix = sp.csr_matrix(matrix)
        matrix.sort_indices()
        self.kernel = kernel
        self.shape = matrix.shape
        if kernel == "numba":
            self._forward = GatherCsr(matrix.indptr, matrix.indices, matrix.shape[1])
            self._transpose = self._forward if symmetric else self._forward.transpose()
        else:
            self._forward = self._to_torch(matrix)
            self._transpose = self._forward if symmetric else self._to_torch(matrix.T.tocsr())
        self.nnz = int(matrix.nnz)

    @property
    def nbytes(self) -> int:
        """Bytes the operator's index arrays hold (A's and, where it is kept, A^T's)."""
        def held(op) -> int:
            if self.kernel == "numba":
                return op.indptr.nbytes + op.indices.nbytes + op.weights.nbytes
            return sum(t.numel() * t.element_size() for t in (op.crow_indices(), op.col_indices(), op.values()))
        return held(self._forward) + (0 if self._transpose is self._forward else held(self._transpose))

    @staticmethod
    def _to_torch(matrix: sp.csr_matrix) -> torch.Tensor:
        matrix.sort_indices()
        with warnings.catch_warnings():  # the reference path knows CSR tensors are in beta
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
            return torch.sparse_csr_tensor(torch.from_numpy(matrix.indptr.astype(np.int64)),
                                           torch.from_numpy(matrix.indices.astype(np.int64)),
                                           torch.ones(matrix.nnz), size=matrix.shape, check_invariants=False)

    def _apply(self, op, x: torch.Tensor, out: torch.Tensor | None, accumulate: bool,
               row_scale: torch.Tensor | None, pieces: int = 1, between=None) -> torch.Tensor:
        x = x.contiguous()
        if self.kernel == "numba":
            if out is None:
                out = x.new_empty((op.shape[0], x.shape[1]), dtype=sums_in(x.dtype))
                accumulate = False
            op.matmul(kernel_array(x), out=out.numpy(), accumulate=accumulate,
                      row_scale=None if row_scale is None else row_scale.numpy(), pieces=pieces, between=between)
            return out
        x = x.to(sums_in(x.dtype))  # bfloat16 rows summed in float32, as the kernel sums them
        product = (x.new_zeros((op.shape[0], x.shape[1])) if op._nnz() == 0 or 0 in op.shape
                   else torch.sparse.mm(op.to(x.dtype), x))
        if out is not None and accumulate:
            product = product + out
        if row_scale is not None:
            product = product * row_scale[:, None]
        if out is None:
            return product
        out.copy_(product)
        return out

    def matmul(self, x, out=None, accumulate=False, row_scale=None, transpose=False, pieces=1,
               between=None) -> torch.Tensor:
        """``diag(row_scale) (out + A x)`` if accumulating into ``out``, else ``diag(row_scale) A x``
        (A^T for ``transpose``). The numba kernel runs in ``pieces`` and calls ``between()``
        after each (:meth:`supergcn.kernels.gather.GatherCsr.matmul`)."""
        return self._apply(self._transpose if transpose else self._forward, x, out, accumulate, row_scale,
                           pieces, between)

    def t_matmul(self, x, out=None, accumulate=False) -> torch.Tensor:
        """``out + A^T x`` if accumulating into ``out``, else ``A^T x``."""
        return self._apply(self._transpose, x, out, accumulate, None)


def sums_in(dtype: torch.dtype) -> torch.dtype:
    """The dtype a product of ``dtype`` rows is summed and written in: float32 for
    bfloat16 rows (:func:`supergcn.kernels.gather.sums_in`), the rows' own otherwise."""
    return torch.float32 if dtype == torch.bfloat16 else dtype


def inverse_degree(degree) -> torch.Tensor:
    """The mean's row scale: ``1 / degree`` in float32, 0 where the degree is 0 (the mean of
    no neighbours).

    Args:
        degree: the degree of each row (an array or a tensor).

    Returns:
        A float32 tensor of the same length.
    """
    degree = degree if isinstance(degree, torch.Tensor) else torch.from_numpy(np.asarray(degree, dtype=np.float32))
    return torch.where(degree > 0, 1.0 / degree.clamp(min=1), torch.zeros_like(degree))

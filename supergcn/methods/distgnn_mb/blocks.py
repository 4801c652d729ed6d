"""A mini-batch's blocks as the layers see them (:mod:`supergcn.methods.distgnn_mb`): each
layer's :class:`BlockOps`, the :class:`~supergcn.models.ops.Ops` it aggregates with in place
of the full graph's.

A block's rows in are its sources (the previous layer's output on its solid sources, then
the cache's rows of its halo sources), its rows out its destinations (the first ``num_dst``
sources). The mean runs over each destination's kept in-edges (a cache miss's are gone), on
the numba gather kernel over the block's CSR, or with ``kernel="torch"`` on torch's CSR
product (the reference path).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import scipy.sparse as sp
import torch

from supergcn.distributed.operators import SparseOperator, inverse_degree
from supergcn.distributed.timing import phase
from supergcn.kernels.gather import GatherCsr
from supergcn.models.inputs import written_out


class _BlockProduct:
    """``diag(s) A x`` and ``Aᵀ g`` of a block's num_dst x num_src 0/1 matrix A, its edges
    summed in the sampler's order (numba) or by torch's CSR product."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, num_src: int, kernel: str) -> None:
        if kernel == "numba":
            self._gather = GatherCsr(indptr, indices, num_src)
            self._transposed: GatherCsr | None = None
        else:
            matrix = sp.csr_matrix((np.ones(len(indices), dtype=np.float32), indices, indptr),
                                   shape=(len(indptr) - 1, num_src))
            self._torch = SparseOperator(matrix, kernel)
            self._gather = None

    def forward(self, x: torch.Tensor, row_scale: torch.Tensor) -> torch.Tensor:
        if self._gather is None:
            return self._torch.matmul(x, row_scale=row_scale)
        return torch.from_numpy(self._gather.matmul(x.contiguous().numpy(), row_scale=row_scale.numpy()))

    def transpose(self, grad: torch.Tensor) -> torch.Tensor:
        if self._gather is None:
            return self._torch.matmul(grad, transpose=True)
        if self._transposed is None:
            self._transposed = self._gather.transpose()
        return torch.from_numpy(self._transposed.matmul(grad.contiguous().numpy()))


class _BlockAggregation(torch.autograd.Function):
    """``diag(s) A x`` on a block and, in backward, ``Aᵀ diag(s) g``."""

    @staticmethod
    def forward(ctx, x, product: _BlockProduct, row_scale):
        ctx.product, ctx.row_scale = product, row_scale
        return product.forward(x.detach(), row_scale)

    @staticmethod
    def backward(ctx, grad):
        return ctx.product.transpose(grad * ctx.row_scale[:, None]), None, None


_aggregate = phase("aggregation")(_BlockAggregation.apply)


class BlockOps:
    """The aggregations of one layer of a mini-batch (module docstring).

    Args:
        indptr: the block's CSR pointers over its destinations, the misses' edges removed.
        indices: each kept edge's source position.
        num_src: the block's sources.
        layer: the block's layer, from 0 (the input layer's).
        kernel: the sparse kernels (``numba`` or ``torch``).
        halo_rows: the cache's rows of the block's halo sources (zeros for the misses), which
            follow the solid sources' rows in the layer's input.
        taking: ``(layer, rows) -> None``, called with the layer's whole input as it is taken
            (the push of its solid rows), or None.
    """

    exact = True  # float32 and synchronous: a linear map of its input

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, num_src: int, layer: int, kernel: str = "numba",
                 halo_rows: torch.Tensor | None = None, taking: Callable | None = None) -> None:
        self.indptr, self.indices, self.num_src, self.layer, self.kernel = indptr, indices, num_src, layer, kernel
        self.product = _BlockProduct(indptr, indices, num_src, kernel)
        self.num_dst = len(indptr) - 1
        self.inv_degree = inverse_degree(np.diff(indptr))
        self.halo_rows, self.taking = halo_rows, taking
        self._built: dict = {}

    def begin_pass(self, training: bool) -> None:
        """Nothing: a block is one step's, and its rows are its own."""

    def layer_input(self, x: torch.Tensor) -> torch.Tensor:
        """The layer's input: the solid sources' rows ``x``, then the halo rows; handed to
        ``taking`` (the push) as it is taken.

        Args:
            x: a row per solid source.

        Returns:
            A row per source.
        """
        if self.halo_rows is not None:
            x = torch.cat([x, self.halo_rows])
        if self.taking is not None:
            self.taking(self.layer, x)
        return x

    def cached(self, state):
        """``state.block(self)`` (a :class:`~supergcn.models.ops.RankState`: GAT's attention
        over this block), built on the first call and kept.

        Args:
            state: what the model builds once per rank.

        Returns:
            Its block form.

        Raises:
            NotImplementedError: a state without a block form (GCN's normalisation: a block's
                degrees are not the graph's).
        """
        if state.block is None:
            raise NotImplementedError(f"{getattr(state.full, '__qualname__', state.full)} has no mini-batch block form")
        if state not in self._built:
            self._built[state] = state.block(self)
        return self._built[state]

    def next_layer(self) -> int:
        """The layer of this block's aggregation (the full graph's counts them per pass).

        Returns:
            Its index.
        """
        return self.layer

    def mean(self, x: torch.Tensor) -> torch.Tensor:
        """The mean over each destination's kept sources (0 where none is kept).

        Args:
            x: a row per source.

        Returns:
            A row per destination.
        """
        return _aggregate(x, self.product, self.inv_degree)

    def sum(self, x: torch.Tensor, row_scale: torch.Tensor | None = None) -> torch.Tensor:
        """The sum over each destination's kept sources, scaled by ``row_scale``.

        Args:
            x: a row per source.
            row_scale: a factor per destination, or None.

        Returns:
            A row per destination.
        """
        scale = torch.ones(self.num_dst) if row_scale is None else row_scale
        return _aggregate(x, self.product, scale)

    def destinations(self, x) -> torch.Tensor:
        """The destinations' own rows of a layer's input: its first ``num_dst`` rows.

        Args:
            x: a row per source (a tensor, or a layer input as :func:`~supergcn.models.inputs.written_out` takes).

        Returns:
            A row per destination.
        """
        return written_out(x)[:self.num_dst]

    def in_degree(self) -> torch.Tensor:
        """Each destination's kept in-edges (a block's, not the graph's).

        Returns:
            num_dst float32 degrees.
        """
        return torch.from_numpy(np.diff(self.indptr).astype(np.float32))

    def self_loops(self) -> torch.Tensor:
        """Whether each destination keeps an edge to itself (source position = its own).

        Returns:
            num_dst booleans.
        """
        rows = np.repeat(np.arange(self.num_dst), np.diff(self.indptr))
        has_loop = np.zeros(self.num_dst, dtype=bool)
        has_loop[rows[self.indices == rows]] = True
        return torch.from_numpy(has_loop)

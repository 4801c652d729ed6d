"""Numba kernels of graph attention: a softmax-weighted gather, fused (no E x H x C tensor).

Rows r of a CSR gather their entries k (sources ``indices[k]`` of a table z, H heads of C)
and, optionally, *pieces*: partial softmax states (m_p, s_p, r_p) of sources summed
elsewhere (:mod:`supergcn.models.gat.online_softmax`). Per row and head, with
x_k = d_r + a_k (d the row's destination score, a the source's score),
e_k = LeakyReLU(x_k) and the row's maximum M over its entries' e_k and its pieces' m_p:

    w_k = exp(e_k - M),   c_p = exp(m_p - M),
    S = sum_k w_k + sum_p c_p s_p,   out_r = (sum_k w_k z_k + sum_p c_p r_p) / S   (normalised),

or, unnormalised (a sender's PRE row, without pieces), out_r = sum_k w_k z_k with its state
(M, S). Each row and head is summed in the order of its entries, and each dot product
over a head's C values (g, and <G_r, z_k> below) in the fixed order of
:mod:`supergcn.kernels.ordered`; the kernels carry no fast-math flag (no reassociation,
no fused multiply-add, no approximate reciprocal), so results depend neither on the
threads nor on the CPU the kernels were compiled for.

Backward, with G the gradient of out and g = <G_r, out_r> per row and head (for an
unnormalised row: S = 1 and g = -dL/dS, the gradient of its sum), alpha_k = w_k / S:

    dL/de_k = alpha_k (<G_r, z_k> - g),   dL/dz_k += alpha_k G_r,
    dL/dr_p = (c_p / S) G_r,   dL/ds_p = -(c_p / S) g,

and dL/dx_k = dL/de_k times LeakyReLU's slope at x_k, summed into d_r (by row) and into a_k
(by source). :func:`attention_backward_rows` writes alpha and dL/dx per entry;
:func:`attention_backward_sources` gathers them by source over the transposed CSR, so
neither direction needs atomics. The maxima carry no gradient: the result does not depend
on them.

:class:`FusedAttention` is the three kernels as one differentiable operator; a
:class:`Progress` cuts each call into row (backward: source) ranges with a callback between,
so that an exchange in flight can be polled while they run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from supergcn.kernels.gather import PREFETCH_DISTANCE
from supergcn.kernels.jit import njit, prange
from supergcn.kernels.ordered import ordered_dot
from supergcn.kernels.ranges import csr_pointers
from supergcn.kernels.simd import prefer_wide_vectors, prefetch

#: float32 elements of a 64-byte cache line, the stride of the prefetches.
_LINE_ELEMENTS = 16


@njit(nogil=True, cache=True, inline="always")
def _leaky(x, slope):
    return x if x > 0 else slope * x


@njit(nogil=True, cache=True, inline="always")
def _add_scaled(target, row, weight):
    """target += weight * row, over two 1-D contiguous rows (so that the loop vectorises)."""
    for c in range(len(target)):
        target[c] += weight * row[c]


@njit(nogil=True, cache=True, inline="always")
def _prefetch_row(rows, indices, k):
    """Prefetch the row of ``rows`` (2-D) that entry ``k + PREFETCH_DISTANCE`` reads (the
    last entry's, near the end): the rows come in random order, as in the plain gather."""
    ahead = indices[min(k + PREFETCH_DISTANCE, len(indices) - 1)]
    for offset in range(0, rows.shape[1], _LINE_ELEMENTS):
        prefetch(rows, ahead, offset)


@njit(parallel=True, nogil=True, cache=True)
def head_dots(left, right, out):
    """``out[r, h] = <left[r, h], right[r, h]>`` (rows x H x C inputs) in
    :mod:`~supergcn.kernels.ordered`'s order."""
    for r in prange(left.shape[0]):
        for h in range(left.shape[1]):
            out[r, h] = ordered_dot(left[r, h], right[r, h])


@njit(parallel=True, nogil=True, cache=True)
def attention_forward(indptr, indices, z, source_score, destination_score, piece_indptr, piece_order,
                      piece_rows, piece_sums, piece_maxima, slope, normalise, out, maxima, sums):
    """``out`` (rows x H x C), ``maxima`` and ``sums`` (rows x H) of the module docstring.
    Pieces of row r: ``piece_order[piece_indptr[r]:piece_indptr[r + 1]]`` index
    ``piece_rows`` (x H x C), ``piece_sums`` and ``piece_maxima`` (x H). Each pass visits
    a row's entries once, all heads of an entry together (one source row read whole)."""
    prefer_wide_vectors()
    num_rows = len(indptr) - 1
    heads, width = z.shape[1], z.shape[2]
    flat = z.reshape(z.shape[0], heads * width)
    for r in prange(num_rows):
        start, stop = indptr[r], indptr[r + 1]
        first_piece, last_piece = piece_indptr[r], piece_indptr[r + 1]
        for h in range(heads):
            maxima[r, h] = -np.inf
            sums[r, h] = 0.0
        for k in range(start, stop):
            u = indices[k]
            for h in range(heads):
                maxima[r, h] = max(maxima[r, h], _leaky(destination_score[r, h] + source_score[u, h], slope))
        for q in range(first_piece, last_piece):
            p = piece_order[q]
            for h in range(heads):
                maxima[r, h] = max(maxima[r, h], piece_maxima[p, h])
        for h in range(heads):
            for c in range(width):
                out[r, h, c] = 0.0
        for k in range(start, stop):
            u = indices[k]
            _prefetch_row(flat, indices, k)
            for h in range(heads):
                w = math.exp(_leaky(destination_score[r, h] + source_score[u, h], slope) - maxima[r, h])
                sums[r, h] += w
                _add_scaled(out[r, h], z[u, h], w)
        for q in range(first_piece, last_piece):
            p = piece_order[q]
            for h in range(heads):
                w = math.exp(piece_maxima[p, h] - maxima[r, h])
                sums[r, h] += w * piece_sums[p, h]
                _add_scaled(out[r, h], piece_rows[p, h], w)
        if normalise:
            for h in range(heads):
                inverse = 1.0 / sums[r, h] if sums[r, h] > 0 else 0.0
                for c in range(width):
                    out[r, h, c] *= inverse


@njit(parallel=True, nogil=True, cache=True)
def attention_backward_rows(indptr, indices, z, source_score, destination_score, maxima, sums, grad_out, projected,
                            piece_indptr, piece_order, piece_maxima, slope, entry_weight, entry_grad,
                            grad_destination, grad_piece_rows, grad_piece_sums):
    """Per row: each entry's alpha (``entry_weight``) and dL/dx (``entry_grad``), their sum
    into ``grad_destination``, and the pieces' gradients (module docstring). ``projected``
    is g per row and head; ``sums`` is S (1 for unnormalised rows)."""
    prefer_wide_vectors()
    num_rows = len(indptr) - 1
    heads, width = z.shape[1], z.shape[2]
    flat = z.reshape(z.shape[0], heads * width)
    for r in prange(num_rows):
        for h in range(heads):
            grad_destination[r, h] = 0.0
        for k in range(indptr[r], indptr[r + 1]):
            u = indices[k]
            _prefetch_row(flat, indices, k)
            for h in range(heads):
                x = destination_score[r, h] + source_score[u, h]
                alpha = math.exp(_leaky(x, slope) - maxima[r, h]) / sums[r, h]
                dot = ordered_dot(grad_out[r, h], z[u, h])
                grad_x = alpha * (dot - projected[r, h]) * (1.0 if x > 0 else slope)
                entry_weight[k, h] = alpha
                entry_grad[k, h] = grad_x
                grad_destination[r, h] += grad_x
        for q in range(piece_indptr[r], piece_indptr[r + 1]):
            p = piece_order[q]
            for h in range(heads):
                share = math.exp(piece_maxima[p, h] - maxima[r, h]) / sums[r, h]
                for c in range(width):
                    grad_piece_rows[p, h, c] = share * grad_out[r, h, c]
                grad_piece_sums[p, h] = -share * projected[r, h]


@njit(parallel=True, nogil=True, cache=True)
def attention_backward_sources(transpose_indptr, transpose_entries, transpose_rows, entry_weight, entry_grad,
                               grad_out, grad_z, grad_source_score):
    """Per source u: dL/dz_u = sum alpha_k G_{row(k)} and dL/da_u = sum dL/dx_k over its
    entries, in the transposed CSR's order."""
    prefer_wide_vectors()
    num_sources = len(transpose_indptr) - 1
    heads, width = grad_out.shape[1], grad_out.shape[2]
    flat = grad_out.reshape(grad_out.shape[0], heads * width)
    for u in prange(num_sources):
        for h in range(heads):
            grad_source_score[u, h] = 0.0
            for c in range(width):
                grad_z[u, h, c] = 0.0
        for t in range(transpose_indptr[u], transpose_indptr[u + 1]):
            k, r = transpose_entries[t], transpose_rows[t]
            _prefetch_row(flat, transpose_rows, t)
            for h in range(heads):
                grad_source_score[u, h] += entry_grad[k, h]
                _add_scaled(grad_z[u, h], grad_out[r, h], entry_weight[k, h])


class AttentionCsr:
    """The index arrays of one attention gather: entries (row, source) in CSR by row, the
    same entries by source (the transpose, for backward), and pieces by row.

    Args:
        rows: each entry's row.
        sources: each entry's source (a row of the table gathered from).
        num_rows: the rows.
        num_sources: the table's rows.
        piece_rows: each piece's row (None: no pieces).
    """

    def __init__(self, rows: np.ndarray, sources: np.ndarray, num_rows: int, num_sources: int,
                 piece_rows: np.ndarray | None = None) -> None:
        order = np.lexsort((sources, rows))
        self.num_rows, self.num_sources = num_rows, num_sources
        self.indptr = csr_pointers(rows, num_rows)
        self.indices = np.ascontiguousarray(sources[order], dtype=np.int64)
        by_source = np.argsort(self.indices, kind="stable")
        self.transpose_indptr = csr_pointers(self.indices, num_sources)
        self.transpose_entries = by_source.astype(np.int64)
        self.transpose_rows = np.repeat(np.arange(num_rows, dtype=np.int64), np.diff(self.indptr))[by_source]
        piece_rows = np.empty(0, dtype=np.int64) if piece_rows is None else piece_rows
        self.piece_indptr = csr_pointers(piece_rows, num_rows)
        self.piece_order = np.argsort(piece_rows, kind="stable").astype(np.int64)

    @property
    def num_entries(self) -> int:
        """The entries (edges) gathered."""
        return len(self.indices)


@dataclass(frozen=True)
class Progress:
    """How a kernel call leaves room for exchanges in flight: cut into ``pieces`` ranges of
    about equal entries, with ``between()`` after each (MPICH moves a nonblocking exchange
    only inside MPI calls, :mod:`supergcn.distributed.comm`)."""

    pieces: int = 1
    between: Callable[[], None] = lambda: None

    def ranges(self, indptr: np.ndarray) -> list[tuple[int, int]]:
        """Row ranges [a, b) of the CSR ``indptr``, each with about 1 / pieces of its entries."""
        rows = len(indptr) - 1
        if self.pieces == 1 or rows == 0:
            return [(0, rows)]
        bounds = np.unique(np.searchsorted(indptr, np.linspace(0, indptr[-1], self.pieces + 1)[1:-1]))
        edges = [0, *(int(b) for b in bounds if 0 < b < rows), rows]
        return list(zip(edges[:-1], edges[1:]))


class FusedAttention(torch.autograd.Function):
    """The numba kernels (:mod:`supergcn.kernels.attention`) as one differentiable gather:
    ``(out, maxima, sums)`` of the rows of ``csr`` from the table ``z`` and the pieces."""

    @staticmethod
    def forward(ctx, z, source_score, destination_score, piece_rows, piece_sums, piece_maxima, csr: AttentionCsr,
                slope: float, normalise: bool, progress: Progress = Progress()):
        z, source_score, destination_score, piece_rows, piece_sums, piece_maxima = (
            x.detach().contiguous() for x in (z, source_score, destination_score, piece_rows, piece_sums,
                                              piece_maxima))
        heads, width = z.shape[1:]
        out = z.new_empty((csr.num_rows, heads, width))
        maxima, sums = z.new_empty((csr.num_rows, heads)), z.new_empty((csr.num_rows, heads))
        for a, b in progress.ranges(csr.indptr):
            attention_forward(csr.indptr[a:b + 1], csr.indices, z.numpy(), source_score.numpy(),
                              destination_score[a:b].numpy(), csr.piece_indptr[a:b + 1], csr.piece_order,
                              piece_rows.numpy(), piece_sums.numpy(), piece_maxima.numpy(), slope, normalise,
                              out[a:b].numpy(), maxima[a:b].numpy(), sums[a:b].numpy())
            progress.between()
        ctx.save_for_backward(z, source_score, destination_score, piece_maxima, out, maxima, sums)
        ctx.csr, ctx.slope, ctx.normalise, ctx.progress = csr, slope, normalise, progress
        ctx.mark_non_differentiable(maxima)
        return out, maxima, sums

    @staticmethod
    def backward(ctx, grad_out, _grad_maxima, grad_sums):
        z, source_score, destination_score, piece_maxima, out, maxima, sums = ctx.saved_tensors
        csr = ctx.csr
        grad_out = grad_out.contiguous()
        if ctx.normalise:
            projected = sums.new_empty(sums.shape)
            head_dots(grad_out.numpy(), out.numpy(), projected.numpy())
        else:  # an unnormalised row's sum is an output of its own: S stands at 1, g at -dL/dS
            projected, sums = -grad_sums, torch.ones_like(sums)
        heads = z.shape[1]
        entry_weight = z.new_empty((csr.num_entries, heads))
        entry_grad = z.new_empty((csr.num_entries, heads))
        grad_destination = torch.empty_like(destination_score)
        grad_piece_rows = z.new_empty((len(piece_maxima), *z.shape[1:]))
        grad_piece_sums = torch.empty_like(piece_maxima)
        sums, projected, progress = sums.contiguous(), projected.contiguous(), ctx.progress
        for a, b in progress.ranges(csr.indptr):
            attention_backward_rows(csr.indptr[a:b + 1], csr.indices, z.numpy(), source_score.numpy(),
                                    destination_score[a:b].numpy(), maxima[a:b].numpy(), sums[a:b].numpy(),
                                    grad_out[a:b].numpy(), projected[a:b].numpy(), csr.piece_indptr[a:b + 1],
                                    csr.piece_order, piece_maxima.numpy(), ctx.slope, entry_weight.numpy(),
                                    entry_grad.numpy(), grad_destination[a:b].numpy(), grad_piece_rows.numpy(),
                                    grad_piece_sums.numpy())
            progress.between()
        grad_z, grad_source_score = torch.empty_like(z), torch.empty_like(source_score)
        for a, b in progress.ranges(csr.transpose_indptr):
            attention_backward_sources(csr.transpose_indptr[a:b + 1], csr.transpose_entries, csr.transpose_rows,
                                       entry_weight.numpy(), entry_grad.numpy(), grad_out.numpy(),
                                       grad_z[a:b].numpy(), grad_source_score[a:b].numpy())
            progress.between()
        return (grad_z, grad_source_score, grad_destination, grad_piece_rows, grad_piece_sums, None, None, None, None,
                None)
